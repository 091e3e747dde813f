"""Bounded reads: the one owner of reading bytes cannery did not write itself (a file the user's
repository or an image layout points at, an archive, a download) without letting the input
choose how much memory, CPU or disk the read costs.

- :func:`read_regular_file`: a regular file's bytes, at most ``limit`` of them. The open does
  not block (a FIFO with no writer), and anything but a regular file (a device such as
  ``/dev/zero``, a FIFO, a directory, a symlink to any of these) is refused before a byte is
  read; a file over the limit is refused, not cut.

Every refusal is an :class:`~cannery.errors.InputError` (exit status 2) naming the input and,
for a size, the limit.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from cannery.errors import InputError


class NotRegularFile(InputError):
    """A path that names a device, a FIFO, a directory or a socket, not a regular file."""

    def __init__(self, path: Path | str) -> None:
        super().__init__(f"{path}: not a regular file")
        self.path = path


class OverLimit(InputError):
    """An input past its size limit (or, inflated, past its ratio limit); ``what`` names it."""

    def __init__(self, what: Path | str, limit: int, detail: str = "") -> None:
        super().__init__(f"{what}: larger than {limit} bytes{detail}")
        self.what = what
        self.limit = limit


def read_regular_file(path: Path | str, *, limit: int) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them.

    Symlinks are followed, and what they reach is judged: :class:`NotRegularFile` for anything
    but a regular file (checked on the open descriptor, so nothing is swapped in between; the
    open is non-blocking, so a FIFO is refused rather than waited on), :class:`OverLimit` for a
    file longer than ``limit`` (at most ``limit + 1`` bytes are read to tell). ``OSError`` when
    the path cannot be opened or read (missing, no permission)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except BaseException:
        os.close(fd)
        raise
    if not regular:
        os.close(fd)
        raise NotRegularFile(path)
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise OverLimit(path, limit)
    return data
