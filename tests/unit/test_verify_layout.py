"""`cannery verify oci:DIR` without buildah: the layout reader (digest-checked blobs, what a tag
and a per-platform tag name), the per-platform entries `build --platform --output oci:` writes,
and the options a layout refuses. The container part runs in tests/e2e/test_build.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cannery.builder.execute import _write_layout_platforms
from cannery.errors import InputError
from cannery.oci.manifest import OCI_MANIFEST, Descriptor, digest_of, parse_index
from cannery.verify.layout import LAYOUT_REF, Layout
from tests.catalogs import minimal


def _blob(root: Path, data: bytes) -> Descriptor:
    digest = digest_of(data)
    path = root / "blobs" / "sha256" / digest.split(":")[1]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return Descriptor(OCI_MANIFEST, digest, len(data))


def _image(root: Path, arch: str) -> Descriptor:
    config = json.dumps({"architecture": arch, "os": "linux", "config": {"Env": ["A=1"]}})
    cdesc = _blob(root, config.encode())
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": cdesc.digest, "size": cdesc.size},
        "layers": [],
    }).encode()
    desc = _blob(root, manifest)
    return Descriptor(OCI_MANIFEST, desc.digest, desc.size, {"architecture": arch, "os": "linux"},
                      {"io.cannery.inputs": "sha256:" + "1" * 64})


def test_per_platform_entries_are_named_tag_arch_and_replace_their_older_self(
    tmp_path: Path,
) -> None:
    amd = _image(tmp_path, "amd64")
    _write_layout_platforms(tmp_path, [amd], "t")
    arm = _image(tmp_path, "arm64")
    _write_layout_platforms(tmp_path, [arm], "t")
    newer = _image(tmp_path, "amd64")  # the same bytes: the entry is rewritten, not added
    _write_layout_platforms(tmp_path, [newer], "t")
    entries, _ = parse_index((tmp_path / "index.json").read_bytes(), "index.json")
    names = [(e.annotations or {})["org.opencontainers.image.ref.name"] for e in entries]
    assert sorted(names) == ["t-amd64", "t-arm64"]  # never "t": no partial image under it
    for e in entries:
        assert (e.annotations or {})["io.cannery.inputs"] == "sha256:" + "1" * 64


def test_layout_names_platforms_and_reads_their_configs(tmp_path: Path) -> None:
    _write_layout_platforms(tmp_path, [_image(tmp_path, "amd64"), _image(tmp_path, "arm64")], "t")
    layout = Layout(tmp_path)
    body, desc = layout.named("t", ["linux/arm64"])
    children, _ = parse_index(body, "made")
    assert [c.platform for c in children] == [{"architecture": "arm64", "os": "linux"}]
    assert children[0].annotations == {"io.cannery.inputs": "sha256:" + "1" * 64}
    assert desc.digest == digest_of(body)
    got, cfg = layout.image_config(LAYOUT_REF.with_digest(children[0].digest))
    assert got.platform == {"architecture": "arm64", "os": "linux"}
    assert cfg["config"] == {"Env": ["A=1"]}
    with pytest.raises(InputError, match="no index is named 't'"):
        layout.named("t", None)
    with pytest.raises(InputError, match="no linux/s390x image is named 't-s390x'"):
        layout.named("t", ["linux/s390x"])


def test_a_blob_that_is_not_its_digest_is_refused(tmp_path: Path) -> None:
    desc = _image(tmp_path, "amd64")
    path = tmp_path / "blobs" / "sha256" / desc.digest.split(":")[1]
    path.write_bytes(path.read_bytes() + b" ")  # still a manifest, not its digest
    with pytest.raises(InputError, match=f"do not hash to {desc.digest}"):
        Layout(tmp_path).get_manifest(LAYOUT_REF.with_digest(desc.digest))


def test_no_layout_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot be read"):
        Layout(tmp_path / "none").named("t", None)


@pytest.mark.parametrize("extra", [["--rebuild"], ["--all-registries"],
                                   ["--require-attestations"]])
def test_registry_only_options_are_refused_for_a_layout(tmp_path: Path, cli, extra) -> None:  # type: ignore[no-untyped-def]
    cat = tmp_path / "c.toml"
    cat.write_text(minimal())
    res = cli("verify", f"oci:{tmp_path}", "--catalog", str(cat), "--image", "one", *extra)
    assert res.code == 2 and "not a layout" in res.err, res.err


def test_a_layout_needs_the_image_named(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    cat = tmp_path / "c.toml"
    cat.write_text(minimal())
    res = cli("verify", f"oci:{tmp_path}", "--catalog", str(cat))
    assert res.code == 2 and "give --image (one of one, two)" in res.err, res.err
    res = cli("verify", f"oci:{tmp_path}", "--catalog", str(cat), "--image", "one",
              "--platform", "linux/s390x")
    assert res.code == 2 and "not one of its platforms" in res.err, res.err


def test_a_blob_or_index_that_is_not_a_regular_file_is_refused_unread(tmp_path: Path) -> None:
    """A symlink to /dev/zero (size 0 to stat, endless to read) in place of a config blob or
    index.json is refused, not read into memory until the runner dies."""
    desc = _image(tmp_path, "amd64")
    _write_layout_platforms(tmp_path, [desc], "t")
    layout = Layout(tmp_path)
    manifest = json.loads(layout.get_manifest(LAYOUT_REF.with_digest(desc.digest))[0])
    config = tmp_path / "blobs" / "sha256" / manifest["config"]["digest"].split(":")[1]
    config.unlink()
    config.symlink_to("/dev/zero")
    with pytest.raises(InputError, match="not a regular file"):
        layout.image_config(LAYOUT_REF.with_digest(desc.digest))
    index = tmp_path / "index.json"
    index.unlink()
    index.symlink_to("/dev/zero")
    with pytest.raises(InputError, match="not a regular file"):
        layout.named("t", ["linux/amd64"])
    index.unlink()
    os.mkfifo(index)  # no writer: an open without O_NONBLOCK would wait for ever
    with pytest.raises(InputError, match="not a regular file"):
        layout.named("t", ["linux/amd64"])


def test_a_config_blob_past_the_cap_is_refused_unread(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import cannery.verify.layout as layout_mod

    desc = _image(tmp_path, "amd64")
    monkeypatch.setattr(layout_mod, "CONFIG_CAP", 16)
    with pytest.raises(InputError, match="larger than 16 bytes"):
        Layout(tmp_path).image_config(LAYOUT_REF.with_digest(desc.digest))
