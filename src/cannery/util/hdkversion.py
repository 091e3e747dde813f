"""Ordering of Ascend HDK (NPU driver and firmware) version strings, in every form the host's
version.info files and npu-smi print: 24.1.rc3, 25.0.RC1.b030, 23.0.3, 6.0.rc1.2, 25.0.rc1.1,
7.7.0.1.231."""

from __future__ import annotations

import re


def _any_case(*words: str) -> str:
    # spelled out, not (?i:...): the pattern also goes to JSON Schema (ECMA-262 regexes)
    return "|".join("".join(f"[{c.upper()}{c.lower()}]" for c in w) for w in words)


# release numbers, then an optional pre-release (rc/alpha/beta/t + number), then patch
# numbers (RC1.1), then an optional build (b030: a build of the same release, not a patch)
_FORM = re.compile(
    r"(?P<release>[0-9]+(?:\.[0-9]+)*)"
    r"(?:[.-]?(?P<stage>" + _any_case("rc", "alpha", "beta", "t") + r")\.?(?P<stage_n>[0-9]+))?"
    r"(?P<patch>(?:\.[0-9]+)*)"
    r"(?:[.-]?[Bb](?P<build>[0-9]+))?"
)
# The same, as a JSON Schema pattern (no named groups) for the catalog's `host` fields.
PATTERN = "^" + re.sub(r"\?P<[a-z_]+>", "", _FORM.pattern) + "$"
# a final release sorts after each of its pre-releases
_STAGES = {"t": 0, "alpha": 1, "beta": 2, "rc": 3, None: 4}

Key = tuple[tuple[int, ...], int, int, tuple[int, ...], int]


class BadVersion(ValueError):
    """Not an HDK version string."""


def version_key(text: str) -> Key:
    """A sort key: ``version_key(a) < version_key(b)`` when ``a`` is the older release.
    Release numbers are padded to three (23.0 is 23.0.0), so 23.0.rc3 < 23.0.3."""
    m = _FORM.fullmatch(text.strip())
    if m is None:
        raise BadVersion(f"not a driver or firmware version: {text.strip()[:60]!r}")
    release = tuple(int(p) for p in m["release"].split("."))
    while len(release) > 3 and release[-1] == 0:  # 24.1.0.0 is 24.1.0
        release = release[:-1]
    release += (0,) * (3 - len(release))
    stage = m["stage"].lower() if m["stage"] else None
    patch = tuple(int(p) for p in m["patch"].split(".") if p)
    return (release, _STAGES[stage], int(m["stage_n"] or 0), patch, int(m["build"] or 0))


def at_least(have: str, need: str) -> bool:
    """``have`` is ``need`` or newer."""
    return version_key(have) >= version_key(need)
