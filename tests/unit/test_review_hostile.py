"""Hostile registry answers found in review (#13, #18): each gives a clear failure, never a
crash (a traceback, exit 3)."""

from __future__ import annotations

import json

import pytest

from cannery.verify.attestations import index_entries_check

DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("index", "field"),
    [
        ({"manifests": [{"platform": "linux/amd64"}]}, "manifests[0]"),
        ({"manifests": [{"platform": {"os": "unknown"}}]}, "manifests[0]"),
        ({"manifests": 5}, "manifests"),
        ({"manifests": ["x"]}, "manifests[0]"),
        ([], "not a JSON object"),
    ],
)
def test_index_entries_check_reads_a_malformed_index_as_a_failed_check(
    index: object, field: str
) -> None:
    # Bytes from a registry: whatever they hold, a failed check, not a crash.
    check = index_entries_check(json.dumps(index).encode())
    assert not check.ok and field in check.detail


def test_index_entries_check_names_an_attestation_entry() -> None:
    entry = {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": DIGEST,
             "size": 3, "platform": {"os": "unknown", "architecture": "unknown"}}
    check = index_entries_check(json.dumps({"manifests": [entry]}).encode())
    assert not check.ok and check.detail == DIGEST[:19]
    entry["platform"] = {"os": "linux", "architecture": "amd64"}
    assert index_entries_check(json.dumps({"manifests": [entry]}).encode()).ok


@pytest.mark.parametrize("body", [b"[" * 100_000, b"not json", b"[]"])
def test_mirror_reads_a_manifest_as_a_json_object_or_refuses_it(body: bytes) -> None:
    """The mirror's Docker conversion reads manifests through manifest.load_object: nesting too
    deep for the parser, non-JSON and non-objects are one MalformedManifest, never a crash."""
    from cannery.oci.manifest import MalformedManifest
    from cannery.oci.mirror import to_docker_manifest

    with pytest.raises(MalformedManifest, match="reg/app@x"):
        to_docker_manifest(body, "reg/app@x")
