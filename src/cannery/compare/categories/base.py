"""base: the image the final stage is built FROM (through any stages it names)."""

from __future__ import annotations

from cannery.compare.image import ImageView
from cannery.compare.model import CHANGED, Difference

NAME = "base"


def compare(original: ImageView, new: ImageView) -> list[Difference]:
    if original.base == new.base:
        return []
    note = ""
    if original.base.split("@")[0] == new.base.split("@")[0]:
        note = "same reference; only the digest pin differs"
    return [Difference(NAME, "FROM", CHANGED, original.base, new.base, note)]
