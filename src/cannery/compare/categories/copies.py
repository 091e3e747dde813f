"""copies: what COPY and ADD (of local files or another stage's) put into the final image, by
destination: the sources and where they come from (the build context, a stage, an image)."""

from __future__ import annotations

import re

from cannery.compare.image import ImageView, expand, join
from cannery.compare.model import Difference, mapping_diff

NAME = "copies"


def copies(view: ImageView) -> dict[str, str]:
    out: dict[str, str] = {}
    for inst in view.instructions:
        if inst.keyword not in ("COPY", "ADD") or len(inst.value) < 2:
            continue
        values = dict(view.env)
        *sources, dest = [expand(v, values) for v in inst.value]
        sources = [s for s in sources if not re.match(r"^(https?|ftp|git)://|^git@", s)]
        if not sources:
            continue  # a URL: the downloads category's
        origin = next((f.split("=", 1)[1] for f in inst.flags if f.startswith("--from=")),
                      "the build context")
        shown = " ".join(s.rstrip("/") or "/" for s in sources)
        out[join(inst.workdir, dest)] = f"{shown} from {origin}"
    return out


def compare(original: ImageView, new: ImageView) -> list[Difference]:
    return mapping_diff(NAME, copies(original), copies(new))
