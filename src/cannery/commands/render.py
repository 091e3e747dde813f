from __future__ import annotations

import difflib
from pathlib import Path

from cannery.commands.common import err, load_with_lock, out, require_locked, select
from cannery.errors import CheckFailed
from cannery.plan import plan
from cannery.render.dockerfile import render_dockerfile
from cannery.util.fs import atomic_write_many


def dockerfile_name(image: str) -> str:
    return f"{image}.Dockerfile"


def render_dockerfile_cmd(
    images: list[str] | None,
    catalog: Path | None,
    lock: Path | None,
    out_dir: Path,
    check: bool,
    locked: bool = False,
) -> int:
    loaded, lk, _ = load_with_lock(catalog, lock)
    specs = plan(loaded.catalog, lk, select(loaded, images))
    if locked:
        require_locked(specs)
    files = {out_dir / dockerfile_name(s.name): render_dockerfile(s) for s in specs}
    if check:
        stale = []
        for path, text in files.items():
            try:
                current = path.read_text(encoding="utf-8")
            except OSError:
                current = None
            if current != text:
                stale.append(path)
                if current is not None:
                    diff = difflib.unified_diff(
                        text.splitlines(True),
                        current.splitlines(True),
                        f"{path} (rendered)",
                        f"{path} (on disk)",
                    )
                    err.print("".join(diff), markup=False, end="")
                else:
                    err.print(f"{path}: missing", markup=False)
        if stale:
            raise CheckFailed(
                f"{len(stale)} Dockerfile(s) differ from the catalog: "
                + ", ".join(str(p) for p in stale)
                + "; run `cannery render dockerfile` to rewrite them"
            )
        out.print(f"{len(files)} Dockerfile(s) up to date", markup=False)
        return 0
    atomic_write_many(files)
    for path, spec in zip(files, specs, strict=False):
        notes = [f"{len(spec.unlocked())} unlocked inputs"] if spec.unlocked() else []
        if spec.unpinned():
            notes.append("Python dependencies unpinned")
        note = f" ({', '.join(notes)})" if notes else ""
        out.print(f"wrote {path}{note}", markup=False)
    return 0
