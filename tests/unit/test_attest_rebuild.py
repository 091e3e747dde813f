"""verify --rebuild's layer comparison: which files differ between two layers, and how."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest

from cannery.errors import InputError
from cannery.util.bounded import OverLimit
from cannery.verify.rebuild import MAX_FILES, layer_differences


def _layer(files: dict[str, tuple[bytes, int]], compress: bool = True) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, (data, mode) in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0) if compress else raw.getvalue()


def _file(tmp_path: Path, name: str, data: bytes) -> Path:
    (tmp_path / name).write_bytes(data)
    return tmp_path / name


def test_names_changed_added_and_removed_files_with_what_differs(tmp_path: Path) -> None:
    registry = _file(tmp_path, "registry", _layer(
        {"etc/a": (b"1", 0o644), "etc/b": (b"2", 0o644), "etc/gone": (b"", 0o644)}))
    rebuilt = _file(tmp_path, "rebuilt", _layer(
        {"etc/a": (b"1", 0o644), "etc/b": (b"3", 0o755), "etc/new": (b"", 0o644)},
        compress=False))
    assert layer_differences(rebuilt, registry) == [
        "etc/b (mode, content)",
        "etc/gone (only in the registry's)",
        "etc/new (only in the rebuild)",
    ]
    assert layer_differences(registry, registry) == []


def test_long_lists_are_cut_with_a_count(tmp_path: Path) -> None:
    a = _file(tmp_path, "a", _layer({f"f{i:02}": (b"a", 0o644) for i in range(MAX_FILES + 5)}))
    b = _file(tmp_path, "b", _layer({f"f{i:02}": (b"b", 0o644) for i in range(MAX_FILES + 5)}))
    out = layer_differences(a, b)
    assert len(out) == MAX_FILES + 1 and out[-1] == "and 5 more"


def test_a_layer_that_is_not_a_tar_is_one_error_naming_it(tmp_path: Path) -> None:
    good = _file(tmp_path, "good", _layer({"a": (b"1", 0o644)}))
    for data in (b"\x1f\x8bnot gzip", _layer({"a": (b"1", 0o644)})[:40], b"x" * 700):
        bad = _file(tmp_path, "bad", data)
        with pytest.raises(InputError) as exc:
            layer_differences(good, bad, theirs_name="reg/app@sha256:1 (layer 1 of 1)")
        assert str(exc.value).startswith("reg/app@sha256:1 (layer 1 of 1): "), exc.value


def test_a_pax_header_past_its_limit_is_refused_unread(tmp_path: Path) -> None:
    """tarfile reads an extended header whole: one of 2 MiB is refused before it is read."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("a")
        info.pax_headers = {"comment": "x" * (2 << 20)}
        tar.addfile(info, io.BytesIO(b""))
    bad = _file(tmp_path, "bad", gzip.compress(raw.getvalue()))
    with pytest.raises(OverLimit, match="extended header is over 1 MiB"):
        layer_differences(bad, bad)
