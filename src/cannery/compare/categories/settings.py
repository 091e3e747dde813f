"""settings: WORKDIR, USER, ENTRYPOINT, CMD, EXPOSE and SHELL of the final image."""

from __future__ import annotations

import json

from cannery.compare.image import ImageView, expand
from cannery.compare.model import Difference, mapping_diff

NAME = "settings"
INHERITED = "(from the base image)"


def settings(view: ImageView) -> dict[str, str]:
    out = {"WORKDIR": INHERITED, "USER": INHERITED, "ENTRYPOINT": INHERITED, "CMD": INHERITED,
           "SHELL": INHERITED}
    exposed: list[str] = []
    cmd_set = False  # BuildKit: ENTRYPOINT resets a CMD the build has not set itself
    values = dict(view.env)
    for inst in view.instructions:
        kw = inst.keyword
        if kw == "WORKDIR":
            out["WORKDIR"] = expand(inst.workdir, values)
        elif kw == "USER":
            out["USER"] = expand(inst.value[0], values) if inst.value else ""
        elif kw in ("ENTRYPOINT", "CMD"):
            argv = list(inst.value) if inst.json else [*inst.shell, " ".join(inst.value)]
            out[kw] = json.dumps(argv)
            cmd_set = cmd_set or kw == "CMD"
            if kw == "ENTRYPOINT" and not cmd_set:
                out["CMD"] = "(none: ENTRYPOINT resets the base's)"
        elif kw == "SHELL":
            out["SHELL"] = json.dumps(list(inst.value))
        elif kw == "EXPOSE":
            exposed += [p if "/" in p else f"{p}/tcp" for v in inst.value
                        for p in expand(v, values).split()]
    out["EXPOSE"] = " ".join(sorted(set(exposed))) or "(none)"
    return out


def compare(original: ImageView, new: ImageView) -> list[Difference]:
    return mapping_diff(NAME, settings(original), settings(new))
