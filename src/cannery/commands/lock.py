from __future__ import annotations

from pathlib import Path

from cannery.catalog.locate import LineMap
from cannery.commands.common import err, load_with_lock, out, select
from cannery.errors import LockError
from cannery.lock import (
    CiInstallError,
    Input,
    RefError,
    dump_lock,
    network_resolvers,
    update_lock,
)
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

    try:
        with network_resolvers(loaded.catalog, old, ca_cert, names) as resolvers:
            new = update_lock(loaded.catalog, old, resolvers, set(update or []), progress, names)
    except RefError as exc:
        raise LockError(f"{_where(loaded.path, exc.component)}: {exc.message}") from None
    except CiInstallError as exc:
        raise LockError(f"{_where(loaded.path, None)}: {exc.message}") from None
    text = dump_lock(new)
    changed = not path.exists() or path.read_text(encoding="utf-8") != text
    if changed:
        atomic_write(path, text)
    total = len(new.bases) + len(new.git) + len(new.urls) + len(new.python) + len(new.ci)
    out.print(f"{path}: {total} entries ({'updated' if changed else 'unchanged'})", markup=False)
    return 0


def _where(catalog: str, component: str | None) -> str:
    """``file:line`` of the component's ref (its table when an ``extends`` parent has it);
    None: of ``[ci] install`` (the file alone when the catalog leaves it out)."""
    try:
        text = Path(catalog).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return catalog
    key = ("components", component, "ref") if component else ("ci", "install")
    line = LineMap(text).line_of(key)
    return f"{catalog}:{line}" if line else catalog
