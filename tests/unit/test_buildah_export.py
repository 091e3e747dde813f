"""The buildah export's bookkeeping, on layouts written here (the e2e build tests run the real
buildah and compare digests across builds)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from cannery.builder.buildah import LayerCache, _assemble

GZIP = "application/vnd.docker.image.rootfs.diff.tar.gzip"
INPUTS = "sha256:" + "1" * 64


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _layout(tmp_path: Path, layers: list[dict[str, object]], diff_ids: list[str]) -> Path:
    """An OCI layout as `buildah push --format v2s2 IMG oci:DIR` writes it."""
    export = tmp_path / "export"
    blobs = export / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    config = json.dumps({
        "architecture": "amd64", "os": "linux", "container": "abc",
        "created": "2026-01-01T00:00:00Z",
        "config": {"Hostname": "h", "Env": ["A=1"]},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }).encode()
    (blobs / _digest(config)[7:]).write_bytes(config)
    manifest = json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
                   "size": len(config), "digest": _digest(config)},
        "layers": layers,
    }).encode()
    (blobs / _digest(manifest)[7:]).write_bytes(manifest)
    (tmp_path / "digest").write_text(_digest(manifest))
    return export


def _blob(export: Path, data: bytes) -> dict[str, object]:
    (export / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    (export / "blobs" / "sha256" / _digest(data)[7:]).write_bytes(data)
    return {"mediaType": GZIP, "size": len(data), "digest": _digest(data)}


def test_a_stand_in_layer_gets_its_recorded_descriptor_and_a_new_one_is_recorded(
    tmp_path: Path,
) -> None:
    old_diff, new_diff = _digest(b"old layer, unpacked"), _digest(b"new layer, unpacked")
    recorded = {"mediaType": GZIP, "size": 1234, "digest": _digest(b"old layer, gzipped")}
    new = _blob(tmp_path / "export", b"new layer, gzipped")
    # containers/image names a layer it found in the layout by the digest it asked for.
    standin = {"mediaType": "application/vnd.docker.image.rootfs.diff.tar", "size": 0,
               "digest": old_diff}
    export = _layout(tmp_path, [standin, new], [old_diff, new_diff])
    cache = LayerCache(tmp_path / "cache.json")
    out = _assemble(export, tmp_path / "digest", [old_diff, new_diff], {old_diff: recorded},
                    cache, INPUTS)
    manifest = json.loads((out / "manifest.json").read_bytes())
    assert manifest["layers"] == [recorded, new]  # as a full export writes it
    assert (out / "manifest.json").read_bytes() == json.dumps(
        manifest, separators=(",", ":")).encode()
    config = (out / manifest["config"]["digest"][7:]).read_bytes()
    assert _digest(config) == manifest["config"]["digest"]
    assert "Hostname" not in json.loads(config)["config"]  # normalized
    # the platform's inputs label, in the config and last in its history, as --label writes it
    assert json.loads(config)["config"]["Labels"] == {"io.cannery.inputs": INPUTS}
    assert json.loads(config)["history"][-1] == {
        "created": "2026-01-01T00:00:00Z",
        "created_by": f'/bin/sh -c #(nop) LABEL "io.cannery.inputs"="{INPUTS}"',
        "empty_layer": True,
    }
    assert (out / new["digest"][7:]).is_file()  # type: ignore[index]
    assert not (out / recorded["digest"][7:]).exists()  # the target has it: not exported
    cache.save()
    assert LayerCache(tmp_path / "cache.json").get(new_diff) == new  # recorded for next time
    assert LayerCache(tmp_path / "cache.json").get(old_diff) is None  # never from a stand-in


def test_a_layer_named_by_its_diff_id_without_a_stand_in_is_refused(tmp_path: Path) -> None:
    diff = _digest(b"layer, unpacked")
    export = _layout(tmp_path, [{"mediaType": GZIP, "size": 5, "digest": diff}], [diff])
    with pytest.raises(ValueError, match="uncompressed"):
        _assemble(export, tmp_path / "digest", [diff], {}, LayerCache(tmp_path / "c.json"), INPUTS)


def test_an_export_of_other_layers_than_the_built_image_is_refused(tmp_path: Path) -> None:
    layer = _blob(tmp_path / "export", b"gzipped")
    export = _layout(tmp_path, [layer], [_digest(b"one")])
    with pytest.raises(ValueError, match="not the built image"):
        _assemble(export, tmp_path / "digest", [_digest(b"another")], {},
                  LayerCache(tmp_path / "c.json"), INPUTS)


def test_a_manifest_that_is_not_the_reported_one_is_refused(tmp_path: Path) -> None:
    layer = _blob(tmp_path / "export", b"gzipped")
    export = _layout(tmp_path, [layer], [_digest(b"one")])
    (tmp_path / "digest").write_text(_digest(b"something else"))
    with pytest.raises((ValueError, OSError)):
        _assemble(export, tmp_path / "digest", [_digest(b"one")], {},
                  LayerCache(tmp_path / "c.json"), INPUTS)


def test_an_unreadable_or_malformed_cache_is_an_empty_one(tmp_path: Path) -> None:
    path = tmp_path / "cache.json"
    path.write_text("{not json")
    assert LayerCache(path).entries == {}
    good = {"mediaType": GZIP, "size": 3, "digest": _digest(b"x")}
    path.write_text(json.dumps({"layers": {
        _digest(b"a"): good,
        _digest(b"b"): {"mediaType": GZIP, "size": -1, "digest": _digest(b"y")},
        "not-a-digest": good,
    }}))
    assert LayerCache(path).entries == {_digest(b"a"): good}

