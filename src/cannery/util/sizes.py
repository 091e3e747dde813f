"""Byte sizes as people write them in a catalog (10GB, 500 MB, 1.5GiB) and as a registry page
shows them (decimal units)."""

from __future__ import annotations

import re

UNITS = {"B": 1, "kB": 10**3, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
         "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
SIZE = r"^[0-9]+(\.[0-9]+)? ?(B|kB|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$"


def parse_size(text: str) -> int:
    """``"10GB"`` → 10_000_000_000. The text matches :data:`SIZE` (the catalog checked)."""
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?) ?([A-Za-z]+)", text.strip())
    if m is None or m.group(2) not in UNITS:
        raise ValueError(f"not a size: {text!r}")
    return int(float(m.group(1)) * UNITS[m.group(2)])


def human_size(n: int) -> str:
    """Bytes as a registry page shows them (decimal units)."""
    if n >= 1e8:
        return f"{n / 1e9:.2f} GB"
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"
