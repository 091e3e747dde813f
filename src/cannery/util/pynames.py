"""Python distribution names, compared as PyPI compares them (PEP 503)."""

from __future__ import annotations

import re


def canonical_name(name: str) -> str:
    """``Zope_Interface`` and ``zope.interface`` are one distribution: ``zope-interface``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    """The canonical name a requirement line starts with (``uv==0.13.9 ; …`` → ``uv``)."""
    return canonical_name(re.split(r"[^A-Za-z0-9._-]", requirement.strip(), maxsplit=1)[0])
