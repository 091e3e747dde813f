"""verify --rebuild's layer comparison: which files differ between two layers, and how."""

from __future__ import annotations

import gzip
import io
import tarfile

from cannery.verify.rebuild import MAX_FILES, layer_differences


def _layer(files: dict[str, tuple[bytes, int]], compress: bool = True) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, (data, mode) in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0) if compress else raw.getvalue()


def test_names_changed_added_and_removed_files_with_what_differs() -> None:
    registry = _layer({"etc/a": (b"1", 0o644), "etc/b": (b"2", 0o644), "etc/gone": (b"", 0o644)})
    rebuilt = _layer({"etc/a": (b"1", 0o644), "etc/b": (b"3", 0o755), "etc/new": (b"", 0o644)},
                     compress=False)
    assert layer_differences(rebuilt, registry) == [
        "etc/b (mode, content)",
        "etc/gone (only in the registry's)",
        "etc/new (only in the rebuild)",
    ]
    assert layer_differences(registry, registry) == []


def test_long_lists_are_cut_with_a_count() -> None:
    a = _layer({f"f{i:02}": (b"a", 0o644) for i in range(MAX_FILES + 5)})
    b = _layer({f"f{i:02}": (b"b", 0o644) for i in range(MAX_FILES + 5)})
    out = layer_differences(a, b)
    assert len(out) == MAX_FILES + 1 and out[-1] == "and 5 more"
