"""SLSA v1 provenance drawn from the plan: every pinned input of the platform, nothing of
another platform, and a statement that in-toto's own models accept."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path

from google.protobuf import json_format
from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
from in_toto_attestation.v1.statement import Statement

from cannery.attest.provenance import (
    BUILD_TYPE,
    SLSA_PROVENANCE,
    BuildContext,
    provenance,
    resolved_dependencies,
)
from cannery.catalog.load import load_catalog
from cannery.lock import read_lock
from cannery.oci.manifest import OCI_MANIFEST, Descriptor
from cannery.plan import ImageSpec, plan

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
H1, H2, H3 = "1" * 64, "2" * 64, "3" * 64


def _spec() -> ImageSpec:
    cat = load_catalog(None).catalog
    (spec,) = plan(cat, read_lock(GOLDEN / "cannery.lock"), ["qwen3-5-a2"])
    pins = (
        ("amd64", (f"Numpy==2.1.0 --hash=sha256:{H1} --hash=sha256:{H2}",
                   f"torch_npu[x]==2.6.0 --hash=sha256:{H3}")),
        ("arm64", (f"numpy==2.1.0 --hash=sha256:{H3}",)),
    )
    return dataclasses.replace(spec, python_locked=pins)


def _ctx() -> BuildContext:
    t = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
    return BuildContext("catalog.toml", "a" * 64, "buildah", None, t, "urn:uuid:x", "urn:b")


def test_resolved_dependencies_are_the_platforms_pins_only() -> None:
    spec = _spec()
    deps = resolved_dependencies(spec, "linux/amd64")
    by_name: dict[str, list[dict[str, object]]] = {}
    for d in deps:
        by_name.setdefault(str(d["name"]), []).append(d)
    assert by_name["base"] == [{
        "name": "base", "uri": f"oci://{spec.base_image}",
        "digest": {"sha256": str(spec.base_digest).partition(":")[2]},
    }]
    toolkit = [d for d in deps if str(d["name"]).startswith("toolkit:")]
    assert toolkit and all("x86_64" in str(d["uri"]) for d in toolkit)
    assert len(toolkit) == len([d for d in spec.toolkit.downloads if d.arch == "amd64"])
    gits = [d for d in deps if str(d["name"]).startswith("git:")]
    assert len(gits) == len([c for c in spec.components if c.git])
    assert all(set(d["digest"]) == {"gitCommit"} for d in gits)  # type: ignore[arg-type]
    # One entry per locked hash, names normalized, extras dropped; arm64's pins not here.
    assert by_name["python:numpy"] == [
        {"name": "python:numpy", "uri": "pkg:pypi/numpy@2.1.0", "digest": {"sha256": H1}},
        {"name": "python:numpy", "uri": "pkg:pypi/numpy@2.1.0", "digest": {"sha256": H2}},
    ]
    assert by_name["python:torch-npu"][0]["uri"] == "pkg:pypi/torch-npu@2.6.0"
    arm = resolved_dependencies(spec, "linux/arm64")
    assert [d["digest"] for d in arm if d["name"] == "python:numpy"] == [{"sha256": H3}]
    assert all("aarch64" in str(d["uri"]) for d in arm if str(d["name"]).startswith("toolkit:"))


def test_statement_is_slsa_v1_about_the_platform_manifest() -> None:
    spec = _spec()
    manifest = Descriptor(OCI_MANIFEST, "sha256:" + "f" * 64, 123)
    data = json.loads(provenance(spec, "linux/arm64", manifest, "sha256:" + "e" * 64, _ctx()))
    # Parsed back with in-toto's own models (unknown fields would raise).
    stmt = Statement([], "", {})
    json_format.ParseDict(data, stmt.pb)
    stmt.validate()
    prov = json_format.ParseDict(data["predicate"], provenance_pb2.Provenance())
    assert data["predicateType"] == SLSA_PROVENANCE
    assert data["subject"] == [
        {"name": spec.repository, "digest": {"sha256": "f" * 64}, "mediaType": OCI_MANIFEST}
    ]
    bd = prov.build_definition
    assert bd.build_type == BUILD_TYPE
    ext = json_format.MessageToDict(bd.external_parameters)
    assert ext == {
        "catalog": {"path": "catalog.toml", "digest": {"sha256": "a" * 64}},
        "image": "qwen3-5-a2", "platform": "linux/arm64", "repository": spec.repository,
    }
    assert data["predicate"]["buildDefinition"]["resolvedDependencies"] == \
        resolved_dependencies(spec, "linux/arm64")
    assert data["predicate"]["runDetails"]["metadata"]["startedOn"] == "2026-12-01T00:00:00Z"
    assert prov.run_details.builder.id == "urn:b"


def test_index_with_buildkit_style_attestation_entries_fails() -> None:
    from cannery.verify.attestations import index_entries_check

    image = {"mediaType": OCI_MANIFEST, "digest": "sha256:" + "a" * 64, "size": 1,
             "platform": {"architecture": "amd64", "os": "linux"}}
    att = {"mediaType": OCI_MANIFEST, "digest": "sha256:" + "b" * 64, "size": 1,
           "platform": {"architecture": "unknown", "os": "unknown"},
           "annotations": {"vnd.docker.reference.type": "attestation-manifest"}}
    assert index_entries_check(json.dumps({"manifests": [image]}).encode()).ok
    bad = index_entries_check(json.dumps({"manifests": [image, att]}).encode())
    assert not bad.ok and bad.detail == "sha256:bbbbbbbbbbbb"
