"""Publishing inputs that fail before any request: layouts that are not images, manifests
naming files outside the layout; and the fixed key order that keeps index digests stable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cannery.errors import InputError
from cannery.oci import Descriptor, OCIClient, Reference, push_image_dir
from cannery.tls import ssl_context
from tests.services.registry import write_dir_layout

REPO = Reference.parse("127.0.0.1:1/never/contacted:t")


@pytest.fixture
def client() -> OCIClient:
    return OCIClient(ssl_context())


def test_not_a_layout(tmp_path: Path, client: OCIClient) -> None:
    with pytest.raises(InputError, match="neither a dir: layout nor an OCI image layout"):
        push_image_dir(client, REPO, tmp_path)


def test_manifest_cannot_name_a_file_outside_the_layout(tmp_path: Path, client: OCIClient) -> None:
    layout = write_dir_layout(tmp_path / "l", "amd64")
    manifest = json.loads((layout / "manifest.json").read_text())
    manifest["layers"][0]["digest"] = "sha256:../../../etc/passwd"
    (layout / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="invalid digest"):
        push_image_dir(client, REPO, layout)


def test_missing_or_short_blob(tmp_path: Path, client: OCIClient) -> None:
    layout = write_dir_layout(tmp_path / "l", "amd64")
    layer = json.loads((layout / "manifest.json").read_text())["layers"][0]["digest"]
    (layout / layer.partition(":")[2]).write_bytes(b"short")
    with pytest.raises(InputError, match=f"blob {layer} missing or not"):
        push_image_dir(client, REPO, layout)


def test_descriptor_json_key_order() -> None:
    d = Descriptor("m", "sha256:" + "a" * 64, 3, {"variant": "v8", "os": "linux",
                                                  "architecture": "arm64", "os.version": "1"},
                   {"b": "2", "a": "1"})
    text = json.dumps(d.to_json())
    assert text == (
        '{"mediaType": "m", "digest": "sha256:' + "a" * 64 + '", "size": 3, '
        '"platform": {"architecture": "arm64", "os": "linux", "variant": "v8", '
        '"os.version": "1"}, "annotations": {"a": "1", "b": "2"}}'
    )
    assert Descriptor.from_json(d.to_json()) == d


def test_client_refuses_a_context_without_certificate_checks() -> None:
    import ssl

    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with pytest.raises(ValueError, match="verifies certificates and names"):
        OCIClient(ctx)
