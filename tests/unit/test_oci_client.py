"""The client's pure parts: what counts as one origin, how a URL is shown in a message, and the
strict readers of image manifests and configs (each refusal names the field)."""

from __future__ import annotations

import json

import pytest

from cannery.oci.client import origin, shown
from cannery.oci.manifest import MalformedManifest, parse_config, parse_manifest

DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("https://r.example/v2/x", "https://R.example:443/v2/y?z=1", True),
        ("http://127.0.0.1:5000/a", "http://127.0.0.1:5000/b", True),
        ("https://r.example/v2/x", "http://r.example/v2/x", False),  # scheme
        ("https://r.example:5000/", "https://r.example:5001/", False),  # port
        ("https://r.example/", "https://cdn.r.example/", False),  # host
        ("http://r.example:443/", "https://r.example/", False),  # same port, other scheme
    ],
)
def test_origin_is_scheme_host_and_port(a: str, b: str, same: bool) -> None:
    assert (origin(a) == origin(b)) is same


def test_shown_drops_the_query_where_presigned_urls_carry_secrets() -> None:
    url = "https://cdn.example/blob/x?X-Amz-Signature=s3cret&X-Amz-Credential=k#f"
    assert shown(url) == "https://cdn.example/blob/x"


def _manifest(**changes: object) -> bytes:
    data: dict[str, object] = {
        "schemaVersion": 2,
        "config": {"mediaType": "c", "digest": DIGEST, "size": 2},
        "layers": [{"mediaType": "l", "digest": DIGEST, "size": 3}],
    }
    data.update(changes)
    return json.dumps({k: v for k, v in data.items() if v is not None}).encode()


def test_parse_manifest() -> None:
    config, layers = parse_manifest(_manifest(), "m")
    assert (config.digest, config.size, [x.size for x in layers]) == (DIGEST, 2, [3])


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"[]", "m: not a JSON object"),
        (b"{", "m: not JSON"),
        (_manifest(config=None), "m.config: not a JSON object"),
        (_manifest(config={"mediaType": "c", "digest": "sha256:zz", "size": 2}),
         "m.config.digest: missing or not a valid digest"),
        (_manifest(layers={"a": 1}), "m.layers: missing or not a list"),
        (_manifest(layers=[{"mediaType": "l", "digest": DIGEST, "size": "3"}]),
         "m.layers[0].size: missing or not a non-negative integer"),
    ],
)
def test_parse_manifest_names_the_field(body: bytes, field: str) -> None:
    with pytest.raises(MalformedManifest) as exc:
        parse_manifest(body, "m")
    assert str(exc.value) == field


def test_parse_config_and_its_platform() -> None:
    body = json.dumps({"architecture": "arm64", "os": "linux", "variant": "v8",
                       "config": {"Env": ["A=1"], "Labels": {"k": "v"}}, "history": [{}]})
    data, platform = parse_config(body.encode(), "c")
    assert platform == {"architecture": "arm64", "os": "linux", "variant": "v8"}
    assert data["config"] == {"Env": ["A=1"], "Labels": {"k": "v"}}


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"os": "linux"}, "c.architecture: missing or not a string"),
        ({"architecture": "amd64", "os": 1}, "c.os: missing or not a string"),
        ({"architecture": "amd64", "os": "linux", "config": []}, "c.config: not a JSON object"),
        ({"architecture": "amd64", "os": "linux", "config": {"Env": "A=1"}},
         "c.config.Env: not a list of strings"),
        ({"architecture": "amd64", "os": "linux", "config": {"Labels": {"k": 1}}},
         "c.config.Labels: not an object of strings"),
        ({"architecture": "amd64", "os": "linux", "history": ["x"]},
         "c.history: not a list of objects"),
    ],
)
def test_parse_config_names_the_field(config: dict[str, object], field: str) -> None:
    with pytest.raises(MalformedManifest) as exc:
        parse_config(json.dumps(config).encode(), "c")
    assert str(exc.value) == field
