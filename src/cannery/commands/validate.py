from __future__ import annotations

from pathlib import Path

from cannery.commands.common import load, out


def validate(catalog: Path | None) -> int:
    loaded = load(catalog)
    cat = loaded.catalog
    out.print(
        f"{loaded.path}: ok: {len(cat.images)} images, {len(cat.bases)} bases, "
        f"{len(cat.toolkits)} toolkits, {len(cat.components)} components"
        + (f", {len(loaded.warnings)} warnings" if loaded.warnings else ""),
        markup=False,
    )
    return 0
