"""What the catalog says a platform's image env must hold (pure)."""

from __future__ import annotations

import re

from cannery.plan import UNAME_ARCH, ImageSpec
from cannery.render.dockerfile import ARCH_VAR, toolkit_env

_INHERIT = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):\+:\$\{\1\}\}$")


def expected_env(spec: ImageSpec, arch: str) -> dict[str, tuple[str, bool]]:
    """name → (value, inherits): ``inherits`` means the image value is this prefix, optionally
    followed by ':' and what the base image had."""
    out: dict[str, tuple[str, bool]] = {}
    for name, text in toolkit_env(spec):
        text = text.replace("${" + ARCH_VAR + "}", UNAME_ARCH[arch])
        inherits = bool(_INHERIT.search(text))
        out[name] = (_INHERIT.sub("", text), inherits)
    # The image's own runtime env (catalog images.NAME.env), set after the toolkit's.
    for e in spec.runtime_env:
        value = ":".join(e.values).replace("{uname_arch}", UNAME_ARCH[arch])
        if e.mode in ("set", "replace"):
            out[e.name] = (value, False)
        elif e.mode == "prepend":
            old = out.get(e.name)
            # with appended entries the value goes on past the prefix
            inherits = old[1] if old and not e.appended else True
            out[e.name] = (value + (":" + old[0] if old else ""), inherits)
        # append: the toolkit's expectation (a prefix) still holds; nothing more to say
    return out


def env_matches(actual: str | None, value: str, inherits: bool) -> bool:
    if actual is None:
        return False
    return actual == value or (inherits and actual.startswith(value + ":"))


def empty_element(value: str) -> bool:
    return "" in value.split(":")
