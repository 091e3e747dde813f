"""Wording shared by every error message."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``did you mean 'x'?`` for a close match, else the list of known names."""
    names = list(known)
    close = difflib.get_close_matches(name, names, n=1)
    if close:
        return f"did you mean {close[0]!r}?"
    return f"known: {', '.join(sorted(names)) or '(none)'}"
