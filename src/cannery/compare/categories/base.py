"""base: the image the final stage is built FROM (through any stages it names)."""

from __future__ import annotations

from cannery.compare.image import ImageView
from cannery.compare.model import CHANGED, Difference
from cannery.oci.reference import Reference

NAME = "base"


def _canonical(ref: str) -> str:
    """``ref`` as Docker resolves it (``ubuntu:22.04`` is ``docker.io/library/ubuntu:22.04``);
    as written when it does not parse (an unexpanded ``${VAR}``)."""
    try:
        r = Reference.parse(ref)
    except ValueError:
        return ref
    return r.name + (f":{r.tag}" if r.tag else "") + (f"@{r.digest}" if r.digest else "")


def compare(original: ImageView, new: ImageView) -> list[Difference]:
    a, b = _canonical(original.base), _canonical(new.base)
    if a == b:
        return []
    note = ""
    if a.split("@")[0] == b.split("@")[0]:
        note = "same reference; only the digest pin differs"
    return [Difference(NAME, "FROM", CHANGED, original.base, new.base, note)]
