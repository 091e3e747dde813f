from __future__ import annotations

from pathlib import Path

from cannery.commands.common import load, out
from cannery.errors import InputError


def validate(catalog: Path | None, path: Path | None = None) -> int:
    """``catalog validate --catalog PATH`` (or the positional PATH, the older spelling)."""
    if path is not None and catalog is not None and path != catalog:
        raise InputError(f"two catalogs given ({path} and --catalog {catalog}): give one")
    loaded = load(catalog or path)
    cat = loaded.catalog
    declared = sum(not b.startswith("image:") for b in cat.bases)  # not those made from images
    out.print(
        f"{loaded.path}: ok: {len(cat.images)} images, {declared} bases, "
        f"{len(cat.toolkits)} toolkits, {len(cat.components)} components"
        + (f", {len(loaded.warnings)} warnings" if loaded.warnings else ""),
        markup=False,
    )
    return 0
