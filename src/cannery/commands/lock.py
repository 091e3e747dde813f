from __future__ import annotations

from pathlib import Path

from cannery.commands.common import err, load_with_lock, out, select
from cannery.lock import Input, dump_lock, network_resolvers, update_lock
from cannery.util.fs import atomic_write


def lock_cmd(
    catalog: Path | None,
    lock: Path | None,
    update: list[str] | None,
    ca_cert: Path | None,
    images: list[str] | None = None,
) -> int:
    loaded, old, path = load_with_lock(catalog, lock)
    names = select(loaded, images) if images else None

    def progress(inp: Input) -> None:
        err.print(f"lock: {inp.kind} {inp.key}", markup=False, style="dim")

    with network_resolvers(loaded.catalog, old, ca_cert, names) as resolvers:
        new = update_lock(loaded.catalog, old, resolvers, set(update or []), progress, names)
    text = dump_lock(new)
    changed = not path.exists() or path.read_text(encoding="utf-8") != text
    if changed:
        atomic_write(path, text)
    total = len(new.bases) + len(new.git) + len(new.urls) + len(new.python)
    out.print(f"{path}: {total} entries ({'updated' if changed else 'unchanged'})", markup=False)
    return 0
