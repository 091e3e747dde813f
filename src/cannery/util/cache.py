"""Where cannery keeps what it may forget at any time: records and copies that save network
and CPU work on the next run, each checked or content-addressed, so a stale or deleted cache
costs time, never a different result."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$CANNERY_CACHE_DIR``, else ``$XDG_CACHE_HOME/cannery``, else ``~/.cache/cannery``."""
    explicit = os.environ.get("CANNERY_CACHE_DIR")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cannery"
