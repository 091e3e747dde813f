"""A layer blob on disk, read as one tar stream (nothing is unpacked): what `cannery size` and
the lock's os-release read share."""

from __future__ import annotations

import gzip
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

GZIP_TYPES = ("application/vnd.oci.image.layer.v1.tar+gzip",
              "application/vnd.docker.image.rootfs.diff.tar.gzip",
              "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
              "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip")
TAR_TYPES = ("application/vnd.oci.image.layer.v1.tar",
             "application/vnd.oci.image.layer.nondistributable.v1.tar")
# what can be read here (zstd cannot: Python reads no zstd before 3.14)
READABLE = GZIP_TYPES + TAR_TYPES


class Counting:
    """A read-only stream that counts what is read through it."""

    def __init__(self, inner: IO[bytes]) -> None:
        self.inner, self.count = inner, 0

    def read(self, n: int = -1) -> bytes:
        data = self.inner.read(n)
        self.count += len(data)
        return data

    def drain(self) -> int:
        """Read to the end (the end-of-archive blocks and padding); the bytes read in all."""
        while self.read(1 << 20):
            pass
        return self.count


@contextmanager
def layer_tar(path: Path, media_type: str) -> Iterator[tuple[tarfile.TarFile, Counting]]:
    """The layer at ``path`` (of a READABLE type) as a tar stream, and the uncompressed bytes
    read through it so far."""
    opener = gzip.open if media_type in GZIP_TYPES else open
    with opener(path, "rb") as raw:
        counted = Counting(raw)  # type: ignore[arg-type]
        with tarfile.open(fileobj=counted, mode="r|") as tar:  # type: ignore[call-overload]
            yield tar, counted
