"""labels: every LABEL of the final image (expanded), by key."""

from __future__ import annotations

from cannery.compare.image import ImageView, expand
from cannery.compare.model import Difference, mapping_diff

NAME = "labels"


def labels(view: ImageView) -> dict[str, str]:
    out: dict[str, str] = {}
    values = dict(view.env)
    for inst in view.instructions:
        if inst.keyword == "LABEL":
            for p in inst.pairs:
                out[p.key] = expand(p.value or "", values)
    return out


def compare(original: ImageView, new: ImageView) -> list[Difference]:
    return mapping_diff(NAME, labels(original), labels(new))
