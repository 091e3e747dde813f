"""The one bounded reader (util/bounded): what it refuses, and that it never blocks or reads
past its limit."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cannery.errors import InputError
from cannery.util.bounded import NotRegularFile, OverLimit, read_regular_file


def test_a_regular_file_is_read_up_to_its_limit_and_refused_past_it(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"12345")
    assert read_regular_file(f, limit=5) == b"12345"
    with pytest.raises(OverLimit) as exc:
        read_regular_file(f, limit=4)
    assert str(exc.value) == f"{f}: larger than 4 bytes" and exc.value.limit == 4
    assert exc.value.exit_code == 2


def test_devices_fifos_and_directories_are_refused_unread(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # no writer: an open without O_NONBLOCK would wait for ever
    link = tmp_path / "link"
    link.symlink_to("/dev/zero")  # stat size 0, endless to read
    for path in (fifo, link, Path("/dev/zero"), tmp_path):
        with pytest.raises(NotRegularFile) as exc:
            read_regular_file(path, limit=1 << 20)
        assert str(exc.value) == f"{path}: not a regular file"
        assert isinstance(exc.value, InputError)


def test_a_missing_file_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_regular_file(tmp_path / "missing", limit=1)
