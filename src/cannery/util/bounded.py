"""Bounded reads: the one owner of reading bytes cannery did not write itself (a file the user's
repository or an image layout points at, an archive, a download) without letting the input
choose how much memory, CPU or disk the read costs.

- :func:`read_regular_file`: a regular file's bytes, at most ``limit`` of them. The open does
  not block (a FIFO with no writer), and anything but a regular file (a device such as
  ``/dev/zero``, a FIFO, a directory, a symlink to any of these) is refused before a byte is
  read; a file over the limit is refused, not cut.
- :func:`read_http_body`: an HTTP answer's body as sent (``Accept-Encoding: identity`` asked;
  any other ``Content-Encoding`` refused, never inflated), at most ``limit`` bytes, kept or
  streamed to a sink a chunk at a time.
- :func:`copy_capped`: a stream copied (to a file, into a hash) a chunk at a time, refused once
  it passes its limit: never whole in memory, never more than the limit written.
- :func:`copy_inflated`: the same for a stream inflated by another reader (a zip member) from
  a known compressed size, held to the ratio below.
- :func:`inflate`: a gzip stream read inflated, a chunk at a time, refused once the output
  passes its limit or :data:`RATIO_LIMIT` times the compressed bytes it came from (a gzip bomb:
  1 MiB of zeros inflates to 1 GiB); the first :data:`RATIO_FREE` bytes are not held to the
  ratio.
- :func:`tar_members`: the members of a tar stream in order, with their long-name and pax
  headers held to :data:`HEADER_LIMIT` (``tarfile`` reads a header whole); a sparse member is
  refused.

Every refusal is one line naming the input and, for a size, the limit, exit status 2: an
:class:`~cannery.errors.InputError`, or for an HTTP answer a
:class:`~cannery.errors.NetworkError`.
"""

from __future__ import annotations

import io
import os
import stat
import zlib

from cannery.errors import InputError, NetworkError

# `cannery lint` reads files through this module: it imports neither typing nor tarfile at run
# time (tests/lint/test_start_up.py), and httpx only where an answer is read.
TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    import tarfile
    from collections.abc import Callable, Iterator
    from pathlib import Path
    from typing import IO

    import httpx

CHUNK = 1 << 20  # what a copy or an inflate holds at a time
RATIO_LIMIT = 100  # inflated bytes per compressed byte (text ~10, a gzip of zeros ~1030)
RATIO_FREE = 64 << 20  # inflated bytes not held to the ratio (a small, dense archive)
HEADER_LIMIT = 1 << 20  # a tar member's long name or pax header


def shown_size(n: int) -> str:
    """``n`` bytes for a message: ``4 MiB`` when a whole number of MiB, else ``N bytes``."""
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n} bytes"


class NotRegularFile(InputError):
    """A path that names a device, a FIFO, a directory or a socket, not a regular file."""

    def __init__(self, path: Path | str) -> None:
        super().__init__(f"{path}: not a regular file")
        self.path = path


class OverLimit(InputError):
    """An input past its size limit (or, inflated, past its ratio limit); ``what`` names it."""

    def __init__(self, what: Path | str, limit: int, reason: str = "") -> None:
        super().__init__(f"{what}: {reason or f'larger than {shown_size(limit)}'}")
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


def read_http_body(
    resp: httpx.Response,
    *,
    limit: int,
    what: str,
    sink: Callable[[bytes], object] | None = None,
    strict: bool = True,
) -> bytes:
    """The body of ``resp`` (a streamed answer to a request that asked for
    ``Accept-Encoding: identity``) as sent, with no content decoding, at most ``limit`` bytes.
    An answer in another ``Content-Encoding`` is refused (a gzip bomb is never inflated).
    ``strict``: a larger body (by its ``Content-Length``, before a byte is read, or by what
    arrives) is refused; else (an error body) it is cut at the limit. With ``sink``, each chunk
    goes there and nothing is kept. Refusals are :class:`~cannery.errors.NetworkError` naming
    ``what`` (the URL, shown without credentials)."""
    encoding = resp.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise NetworkError(f"{what}: answered with Content-Encoding {encoding[:20]} although "
                           "identity was asked for")
    length = resp.headers.get("content-length", "").strip()
    declared = int(length) if length.isdigit() else None
    if strict and declared is not None and declared > limit:
        raise NetworkError(f"{what}: answer of {declared} bytes is over the "
                           f"{shown_size(limit)} limit")
    kept = bytearray()
    total = 0
    for chunk in resp.iter_raw(CHUNK):
        total += len(chunk)
        if total > limit:
            if strict:
                raise NetworkError(f"{what}: answer is over the {shown_size(limit)} limit")
            kept += chunk[: limit - len(kept)]
            break
        if sink is not None:
            sink(chunk)
        else:
            kept += chunk
    return bytes(kept)


def ratio_limit(compressed: int) -> int:
    """The most bytes ``compressed`` bytes may inflate to: :data:`RATIO_FREE` plus
    :data:`RATIO_LIMIT` times them."""
    return RATIO_FREE + RATIO_LIMIT * compressed


def _over_ratio(what: Path | str) -> OverLimit:
    return OverLimit(what, RATIO_LIMIT, f"inflates to more than {RATIO_LIMIT} times its "
                     "compressed size (a decompression bomb?)")


def copy_capped(src: IO[bytes], write: Callable[[bytes], object], *, limit: int,
                what: Path | str) -> int:
    """Copy ``src`` to ``write`` (a file's ``write``, a hash's ``update``) a chunk at a time and
    return the number of bytes; :class:`OverLimit` naming ``what`` as soon as it passes
    ``limit`` (what was written before stays: write to a temporary file)."""
    total = 0
    while chunk := src.read(min(CHUNK, limit - total + 1)):
        total += len(chunk)
        if total > limit:
            raise OverLimit(what, limit)
        write(chunk)
    return total


def copy_inflated(src: IO[bytes], write: Callable[[bytes], object], *, compressed: int,
                  limit: int, what: Path | str) -> int:
    """:func:`copy_capped` of a stream another reader inflates (a zip member) from
    ``compressed`` bytes: refused past ``limit``, or past the ratio :func:`inflate` holds a
    gzip stream to."""
    cap = min(limit, ratio_limit(compressed))
    try:
        return copy_capped(src, write, limit=cap, what=what)
    except OverLimit:
        if cap < limit:
            raise _over_ratio(what) from None
        raise


class _Inflating(io.RawIOBase):
    """A gzip stream (one member or several) read inflated; see :func:`inflate`."""

    def __init__(self, src: IO[bytes], limit: int | None, what: Path | str) -> None:
        self._src = src
        self._limit = limit
        self._what = what
        self._z = zlib.decompressobj(wbits=31)
        self._feed = b""  # compressed bytes read but not yet inflated
        self._read = 0  # compressed bytes read from src
        self._out = 0  # inflated bytes given out
        self._pending = memoryview(b"")
        self._done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buf: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self._pending:
            if self._done or not self._inflate():
                return 0
        n = min(len(buf), len(self._pending))
        buf[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def _inflate(self) -> bool:
        """Inflate at most CHUNK more bytes into ``_pending``; False at the end."""
        if not self._feed:
            self._feed = self._src.read(CHUNK)
            self._read += len(self._feed)
            if not self._feed:
                self._done = True
                if not self._z.eof:
                    raise InputError(f"{self._what}: not a gzip stream, or cut short")
                return False
        if self._z.eof:  # past a member: zero padding (as gzip allows), or the next member
            self._feed = self._feed.lstrip(b"\0")
            if not self._feed:
                return True  # read on: more padding, another member, or the end
            self._z = zlib.decompressobj(wbits=31)
        try:
            out = self._z.decompress(self._feed, CHUNK)
        except zlib.error as exc:
            raise InputError(f"{self._what}: not a gzip stream ({exc})") from None
        self._feed = self._z.unused_data if self._z.eof else self._z.unconsumed_tail
        self._out += len(out)
        if self._limit is not None and self._out > self._limit:
            raise OverLimit(self._what, self._limit, f"inflates to more than "
                            f"{shown_size(self._limit)}")
        consumed = self._read - len(self._feed)
        if self._out > ratio_limit(consumed):
            raise _over_ratio(self._what)
        self._pending = memoryview(out)
        return True


def inflate(src: IO[bytes], *, limit: int | None = None, what: Path | str) -> IO[bytes]:
    """The gzip stream ``src`` (read sequentially, never whole) as a stream of its inflated
    bytes. Reading it raises :class:`OverLimit` naming ``what`` once the output passes
    ``limit`` (if given: the ratio bounds it by the size of ``src`` in any case), or
    :func:`ratio_limit` of the compressed bytes consumed; :class:`~cannery.errors.InputError`
    when ``src`` is not gzip or is cut short."""
    return io.BufferedReader(_Inflating(src, limit, what), CHUNK)


def tar_members(
    stream: IO[bytes], *, what: Path | str
) -> Iterator[tuple[tarfile.TarInfo, IO[bytes] | None]]:
    """The members of the (uncompressed) tar ``stream``, read once from start to end: each
    with its content as a stream (regular files; None for others), to be read before the next
    member. :class:`OverLimit` naming ``what`` for a long-name or pax header over
    :data:`HEADER_LIMIT` (``tarfile`` reads one whole), refused before it is read;
    :class:`~cannery.errors.InputError` for a malformed archive and for a sparse member (GNU or
    pax), whose holes would come out of no compressed bytes at all."""
    import tarfile

    long_headers = (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE,
                    tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE)

    class CappedHeader(tarfile.TarInfo):
        def _proc_member(self, tar: tarfile.TarFile) -> tarfile.TarInfo:
            if self.type in long_headers and self.size > HEADER_LIMIT:
                raise OverLimit(what, HEADER_LIMIT, f"a {self.size}-byte extended header is "
                                f"over {shown_size(HEADER_LIMIT)}")
            return super()._proc_member(tar)  # type: ignore[misc,no-any-return]

    try:
        with tarfile.open(fileobj=stream, mode="r|", tarinfo=CappedHeader) as tar:
            for member in tar:
                if member.sparse is not None:
                    # tarfile gives its holes as zeros it makes, never inflated: a few bytes
                    # of archive for any size, past every ratio above. Builders write none.
                    raise InputError(f"{what}: {member.name}: a sparse member (its holes "
                                     "would be read without bound); not read")
                yield member, (tar.extractfile(member) if member.isfile() else None)
    except (tarfile.TarError, EOFError) as exc:
        raise InputError(f"{what}: not a valid tar archive ({exc})") from None
