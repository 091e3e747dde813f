"""What lint may read: regular files inside the linted root, at most ``MAX_BYTES`` each.

A repository under review chooses every path lint opens: the Dockerfiles and workflows it
finds, the `file:` a workflow builds, the scripts a `RUN` executes. So every read goes through
:func:`read_text`, which follows a symbolic link only to a file inside the root (the
repository), then reads with cannery's one bounded reader (util/bounded.py): an open that does
not block (a FIFO would otherwise wait for a writer forever), a regular file only (never a
device such as /dev/zero), at most ``MAX_BYTES``. What it refuses raises :class:`Skipped`,
whose reason a `skipped-file` finding reports (a file a rule reads on a workflow's word is
left out instead: see LintContext.read).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_BYTES = 1 << 20  # the largest Dockerfile or workflow lint reads (real ones: < 100 KiB)


class Skipped(Exception):
    """A file lint does not read, and why (a phrase: "not a regular file (a FIFO)")."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def repository(start: Path, fallback: Path | None = None) -> Path:
    """The root that reads under ``start`` (a directory) are confined to: the nearest
    directory at or above it that holds `.git`, else ``fallback`` (default: ``start``)."""
    here = Path(os.path.realpath(start))
    for d in (here, *here.parents):
        if os.path.lexists(d / ".git"):
            return d
    return Path(os.path.realpath(fallback if fallback is not None else start))


def within(path: str, top: str) -> bool:
    """Whether the normalized absolute ``path`` is ``top`` or under it (no link followed)."""
    return path == top or path.startswith(top.rstrip(os.sep) + os.sep)


def inside(path: Path | str, root: Path | str) -> bool:
    """Whether ``path``, every symbolic link in it followed, is ``root`` or under it."""
    return within(os.path.realpath(path), os.path.realpath(root))


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def read_regular(path: Path | str, limit: int = MAX_BYTES) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them, read by
    :func:`cannery.util.bounded.read_regular_file` (non-blocking open, the file's type
    checked on the open descriptor): Skipped for anything else (a FIFO, a device, a socket, a
    directory) or a longer file; OSError when it cannot be opened."""
    from cannery.util.bounded import NotRegularFile, OverLimit, read_regular_file

    try:
        return read_regular_file(path, limit=limit)
    except NotRegularFile:
        raise Skipped(f"not a regular file ({_kind(path)})") from None
    except OverLimit:
        raise Skipped(f"over {_size(limit)}") from None


def _kind(path: Path | str) -> str:
    """What a path that is not a regular file is, for the message."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "gone"
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit % (1 << 20) == 0 else f"{limit} bytes"


def read_text(path: Path | str, root: Path | str, limit: int = MAX_BYTES) -> str:
    """The text of ``path`` (undecodable bytes replaced), read as :func:`read_regular` reads
    when it lies inside ``root`` once symbolic links are followed; Skipped when it does not
    (a link to /dev/zero, `../../x`), is not a regular file or is larger than ``limit``."""
    if not inside(path, root):
        real = os.path.realpath(path)
        how = "a symbolic link to" if os.path.islink(path) else "it resolves to"
        raise Skipped(f"{how} {real}, outside {os.path.realpath(root)}")
    return read_regular(os.path.realpath(path), limit).decode("utf-8", errors="replace")
