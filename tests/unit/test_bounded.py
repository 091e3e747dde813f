"""The one owner of bounded reads (util/bounded): what it refuses, and that it never blocks,
reads past its limit or inflates past its ratio."""

from __future__ import annotations

import gzip
import io
import os
import signal
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from cannery.errors import InputError
from cannery.util.bounded import (
    CHUNK,
    RATIO_FREE,
    NotRegularFile,
    OverLimit,
    copy_capped,
    copy_inflated,
    inflate,
    ratio_limit,
    read_regular_file,
    tar_members,
)


def test_a_regular_file_is_read_up_to_its_limit_and_refused_past_it(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"12345")
    assert read_regular_file(f, limit=5) == b"12345"
    with pytest.raises(OverLimit) as exc:
        read_regular_file(f, limit=4)
    assert str(exc.value) == f"{f}: larger than 4 bytes" and exc.value.limit == 4
    assert exc.value.exit_code == 2


@contextmanager
def _at_most(seconds: int) -> Iterator[None]:
    """Fail, rather than hang, when the body blocks (an open of a FIFO waiting for a writer)."""

    def blocked(signum: int, frame: object) -> None:
        raise TimeoutError(f"blocked for {seconds} s")

    old = signal.signal(signal.SIGALRM, blocked)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_devices_fifos_and_directories_are_refused_unread(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # no writer: an open without O_NONBLOCK would wait for ever
    link = tmp_path / "link"
    link.symlink_to("/dev/zero")  # stat size 0, endless to read
    for path in (fifo, link, Path("/dev/zero"), tmp_path):
        with _at_most(5), pytest.raises(NotRegularFile) as exc:
            read_regular_file(path, limit=1 << 20)
        assert str(exc.value) == f"{path}: not a regular file"
        assert isinstance(exc.value, InputError)


def test_a_missing_file_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_regular_file(tmp_path / "missing", limit=1)


def _gzip_of_zeros(mib: int) -> bytes:
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    return b"".join(comp.compress(bytes(1 << 20)) for _ in range(mib)) + comp.flush()


def test_inflate_reads_every_member_of_a_gzip_stream_a_chunk_at_a_time() -> None:
    data = os.urandom(3 << 20)
    stream = inflate(io.BytesIO(gzip.compress(data) + gzip.compress(b"tail")), what="x")
    assert stream.read(5) == data[:5]
    assert stream.read() == data[5:] + b"tail"
    padded = gzip.compress(b"a") + bytes(3 << 20) + gzip.compress(b"b") + bytes(10)
    assert inflate(io.BytesIO(padded), what="x").read() == b"ab"  # zero padding, as gzip reads
    assert gzip.decompress(padded) == b"ab"


def test_inflate_stops_at_its_limit_and_at_the_ratio() -> None:
    with pytest.raises(OverLimit) as exc:
        inflate(io.BytesIO(gzip.compress(bytes(1001))), limit=1000, what="x.gz").read()
    assert str(exc.value) == "x.gz: inflates to more than 1000 bytes"
    bomb = _gzip_of_zeros(2 * (RATIO_FREE >> 20))  # 128 MiB of zeros in ~130 KB
    stream = inflate(io.BytesIO(bomb), what="bomb.gz")
    read = 0
    with pytest.raises(OverLimit) as exc:
        while chunk := stream.read(1 << 20):
            read += len(chunk)
    assert str(exc.value) == ("bomb.gz: inflates to more than 100 times its compressed size "
                              "(a decompression bomb?)")
    assert RATIO_FREE <= read <= ratio_limit(len(bomb)), read  # stopped near the ratio


def test_inflate_refuses_what_is_not_gzip_or_is_cut_short() -> None:
    with pytest.raises(InputError, match=r"^x: not a gzip stream \("):
        inflate(io.BytesIO(b"plain text"), what="x").read()
    with pytest.raises(InputError, match=r"^x: not a gzip stream, or cut short$"):
        inflate(io.BytesIO(gzip.compress(b"abc" * 1000)[:30]), what="x").read()


def test_copies_are_chunked_and_stop_at_their_limit() -> None:
    sizes: list[int] = []
    assert copy_capped(io.BytesIO(bytes(3 << 20)), lambda b: sizes.append(len(b)), limit=3 << 20,
                       what="m") == 3 << 20
    assert max(sizes) <= CHUNK
    with pytest.raises(OverLimit, match=r"^m: larger than 10 bytes$"):
        copy_capped(io.BytesIO(bytes(11)), sizes.append, limit=10, what="m")
    with pytest.raises(OverLimit, match=r"^m: inflates to more than 100 times"):
        copy_inflated(io.BytesIO(bytes(ratio_limit(10) + 1)), sizes.append, compressed=10,
                      limit=1 << 40, what="m")
    with pytest.raises(OverLimit, match=r"^m: larger than 5 bytes$"):
        copy_inflated(io.BytesIO(bytes(6)), sizes.append, compressed=6, limit=5, what="m")


def test_catalog_and_lock_that_are_not_regular_files_are_one_line_exit_2(  # type: ignore[no-untyped-def]
    tmp_path: Path, cli
) -> None:
    """A catalog or a lock that is a FIFO or a symlink to /dev/zero (a pull request can commit
    one) is refused unread, naming it: never waited on, never read until memory runs out.
    (The FIFO comes first: a read that does wait fails here in 10 s.)"""
    from tests.catalogs import minimal

    catalog = tmp_path / "catalog.toml"
    lock = tmp_path / "cannery.lock"
    out = ("--out", str(tmp_path / "o"))
    os.mkfifo(catalog)
    with _at_most(10):
        res = cli("render", "dockerfile", "--catalog", str(catalog), *out)
    assert res.code == 2 and res.err.strip() == f"cannery: error: {catalog}: not a regular file"
    catalog.unlink()
    catalog.write_text(minimal())
    for make in (os.mkfifo, lambda p: p.symlink_to("/dev/zero")):
        make(lock)
        with _at_most(10):
            res = cli("render", "dockerfile", "--locked", "--catalog", str(catalog), *out)
        assert res.code == 2, res.err
        assert res.err.strip() == f"cannery: error: {lock}: not a regular file"
        lock.unlink()


@pytest.mark.parametrize("fmt", ["gnu", "posix"])
def test_a_sparse_member_is_refused_before_its_holes_are_read(tmp_path: Path,
                                                             fmt: str) -> None:
    """A sparse member (GNU's old header, or pax's GNU.sparse map) is read back as zeros for
    its holes, made by tarfile and never inflated: 123 gzip bytes gave 4 GiB to hash (5 s of
    CPU; a larger declared size, hours), past the ratio the gzip stream is held to. Image
    builders do not write them; tar_members refuses one before its content is read."""
    import shutil
    import subprocess

    if shutil.which("tar") is None:
        pytest.skip("GNU tar makes the sparse archive")
    hole = tmp_path / "hole"
    with hole.open("wb") as fh:
        fh.truncate(1 << 30)
    archive = tmp_path / "s.tar.gz"
    subprocess.run(["tar", f"--format={fmt}", "--sparse", "-czf", str(archive), "hole"],
                   cwd=tmp_path, check=True)
    assert archive.stat().st_size < 4096
    with archive.open("rb") as f, pytest.raises(InputError, match="hole: a sparse member"):
        for _member, data in tar_members(inflate(f, what="layer"), what="layer"):
            if data is not None:
                copy_capped(data, lambda _: None, limit=1 << 31, what="member")


def test_a_zip_bundle_s_wheels_together_are_held_to_the_ratio(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """Each zip member is held to its own declared size, with RATIO_FREE of its own: three
    wheels of 60 MiB of zeros (about 180 KiB of zip) each pass alone, 180 MiB in all. The
    wheels together are held to the ratio against the archive. The download is replaced by a
    copy of the local zip (resolve_url has its own tests against a real HTTPS server)."""
    import zipfile

    from cannery import download
    from cannery.pydeps import _bundle_wheels

    zipped = tmp_path / "bundle.zip"
    zeros = b"\0" * (60 << 20)
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED) as zf:
        for n in range(3):
            zf.writestr(f"w{n}-1.0-py3-none-any.whl", zeros)
    del zeros
    assert zipped.stat().st_size < 1 << 20

    def fetch(url: str, ctx: object, *, timeout: float, into: Path, limit: int) -> None:
        into.write_bytes(zipped.read_bytes())

    monkeypatch.setattr(download, "resolve_url", fetch)
    with pytest.raises(OverLimit, match="the wheel bundle: its wheels inflate to more than "
                       "100 times the archive's size"):
        _bundle_wheels("https://example.com/b.zip", tmp_path / "out", None)
