"""Atomic file writes: a reader (or a crash) never sees a half-written file."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from cannery.errors import WriteError


def _write_error(path: Path, exc: OSError) -> WriteError:
    """One line naming the file that could not be written, and why (exit 2)."""
    if isinstance(exc, FileExistsError):
        return WriteError(f"{path.parent}: exists and is not a directory")
    if isinstance(exc, NotADirectoryError):
        return WriteError(f"{path}: a parent of it is a file, not a directory")
    if isinstance(exc, IsADirectoryError):
        return WriteError(f"{path}: is a directory")
    return WriteError(f"{path}: cannot write: {exc.strerror or exc}")


def atomic_write(path: Path, data: str | bytes) -> None:
    atomic_write_many({path: data})


def atomic_write_many(files: Mapping[Path, str | bytes]) -> None:
    """Write every file or none: all are staged beside their targets, then renamed into place.

    Any OS error (a file where a directory should be, no permission, a full disk) raises one
    ``WriteError`` naming the path; staged files are removed.
    """
    staged: list[tuple[str, Path]] = []
    current = Path(".")
    try:
        for current, data in files.items():
            raw = data.encode() if isinstance(data, str) else data
            current.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{current.name}.", dir=current.parent)
            staged.append((tmp, current))
            with os.fdopen(fd, "wb") as fh:
                fh.write(raw)
            os.chmod(tmp, 0o644)
        for tmp, current in staged:
            os.replace(tmp, current)
    except OSError as exc:
        raise _write_error(current, exc) from None
    finally:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
