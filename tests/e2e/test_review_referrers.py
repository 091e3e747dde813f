"""Referrers lists a registry (or anyone with push rights) wrote to trip the client, on the real
docker-registry 2.8 (the tag-schema fallback): found in review of #18."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cannery.attest.attach import PROVENANCE_TYPE, SBOM_TYPE, SPDX_PREDICATE
from cannery.attest.sign import ENVELOPE_MEDIA_TYPE, envelope
from cannery.errors import NetworkError
from cannery.oci import OCI_INDEX, Descriptor, OCIClient, Reference, push_image_dir
from cannery.oci.manifest import OCI_MANIFEST
from cannery.oci.referrers import (
    Referrer,
    attach,
    copy_referrers,
    fallback_tag,
    referrers_index,
)
from cannery.tls import ssl_context
from cannery.verify.attestations import attestation_checks
from cannery.verify.registry import PlatformImage
from tests.e2e.test_attest_referrers import _image, _job
from tests.services.hostile import HostileRegistry
from tests.services.registry import LocalRegistry, write_dir_layout
from tests.services.tlsca import LocalCA

pytestmark = pytest.mark.e2e


@pytest.fixture
def client() -> Iterator[OCIClient]:
    with OCIClient(ssl_context(), retry_budget=5, backoff=0.01) as c:
        yield c


def _subject(tmp: Path, client: OCIClient, host: str) -> tuple[Reference, Descriptor]:
    repo = Reference.parse(f"{host}/review/{uuid.uuid4().hex[:10]}:latest")
    return repo, push_image_dir(client, repo, write_dir_layout(tmp / "amd64", "amd64", "x"))


def test_copy_referrers_stops_at_a_cycle_in_the_lists(
    tmp_path: Path, registry: LocalRegistry, client: OCIClient
) -> None:
    src, subject = _subject(tmp_path, client, registry.host)
    a = attach(client, src, subject, PROVENANCE_TYPE, b'{"p":1}', ENVELOPE_MEDIA_TYPE)
    # The fallback list of A names A itself: following referrers of referrers never ends.
    client.put_manifest(src.with_tag(fallback_tag(a.descriptor.digest)), referrers_index([a]),
                        OCI_INDEX)
    dst = Reference.parse(f"{registry.host}/review/{uuid.uuid4().hex[:10]}:latest")
    copied = copy_referrers(client, src, client, dst, subject.digest)
    assert [c.descriptor.digest for c in copied] == [a.descriptor.digest]


def test_copy_referrers_names_an_artifact_without_config(
    tmp_path: Path, registry: LocalRegistry, client: OCIClient, test_ca: LocalCA
) -> None:
    # docker-registry refuses such a manifest; a hostile registry serves one.
    reg = HostileRegistry(tmp_path / "reg", test_ca)
    try:
        digest, size = reg.store_image("team/app", "amd64")
        body = json.dumps({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": PROVENANCE_TYPE,
            "layers": [], "subject": Descriptor(OCI_MANIFEST, digest, size).to_json(),
        }).encode()
        desc = Descriptor(OCI_MANIFEST, reg.store_manifest("team/app", body, OCI_MANIFEST),
                          len(body))
        reg.store_manifest("team/app", referrers_index([Referrer(desc, PROVENANCE_TYPE)]),
                           OCI_INDEX, fallback_tag(digest))
        src = Reference.parse(f"{reg.host}/team/app")
        dst = Reference.parse(f"{registry.host}/review/{uuid.uuid4().hex[:10]}:latest")
        with OCIClient(ssl_context(test_ca.ca_cert), retry_budget=2, backoff=0.01) as hc, \
                pytest.raises(NetworkError, match=r"malformed answer: .*\.config: "):
            copy_referrers(hc, src, client, dst, digest)
    finally:
        reg.stop()


@pytest.mark.parametrize(
    ("kind", "statement", "check", "detail"),
    [
        # The subject's digest as a string, not an object: AttributeError before.
        (PROVENANCE_TYPE, lambda d: {"subject": [{"digest": d}]},
         "provenance subject", "the statement's subject is not"),
        # Nested deeper than the JSON parser goes: RecursionError before.
        (PROVENANCE_TYPE, lambda d: "[" * 100_000, "provenance subject", "payload is not JSON"),
        # SBOM packages / externalRefs of the wrong type: TypeError before. (This spec locks no
        # Python pins, so the check passes: it lists none as found.)
        (SBOM_TYPE, lambda d: {"subject": [{"digest": {"sha256": d[7:]}}],
                               "predicateType": SPDX_PREDICATE, "predicate": {"packages": 5}},
         "sbom python pins", None),
        (SBOM_TYPE, lambda d: {"subject": [{"digest": {"sha256": d[7:]}}],
                               "predicateType": SPDX_PREDICATE,
                               "predicate": {"packages": [{"externalRefs": 7}]}},
         "sbom python pins", None),
    ],
)
def test_a_malformed_attestation_is_a_failed_check_not_a_crash(
    tmp_path: Path, registry: LocalRegistry, client: OCIClient, kind: str,
    statement: Callable[[str], object], check: str, detail: str | None,
) -> None:
    repo, children = _image(tmp_path, client, registry.host)
    spec, _ = _job(repo)
    amd = children[0]
    stmt = statement(amd.digest)
    payload = stmt.encode() if isinstance(stmt, str) else json.dumps(stmt).encode()
    attach(client, repo, amd, kind, envelope(payload, None), ENVELOPE_MEDIA_TYPE)
    images = [PlatformImage("linux/amd64", amd, {})]
    checks = {f"{c.platform} {c.name}": c for c in attestation_checks(
        client, repo, spec, images, [], False)}
    got = checks[f"linux/amd64 {check}"]
    assert (got.ok, detail in got.detail) == (False, True) if detail else got.ok


def test_a_manifest_nested_too_deep_is_a_malformed_answer(
    tmp_path: Path, test_ca: LocalCA
) -> None:
    reg = HostileRegistry(tmp_path / "reg", test_ca)
    try:
        reg.store_manifest("team/app", b"[" * 100_000, OCI_MANIFEST, "deep")
        with OCIClient(ssl_context(test_ca.ca_cert), retry_budget=2, backoff=0.01) as hc, \
                pytest.raises(NetworkError, match=r"malformed answer: .* not a JSON object"):
            hc.get_manifest(Reference.parse(f"{reg.host}/team/app:deep"))
    finally:
        reg.stop()


def test_verify_reads_each_listed_artifact_once_and_a_bounded_number(
    tmp_path: Path, registry: LocalRegistry, client: OCIClient
) -> None:
    from cannery.verify.attestations import MAX_PER_TYPE

    repo, children = _image(tmp_path, client, registry.host)
    spec, _ = _job(repo)
    amd = children[0]
    images = [PlatformImage("linux/amd64", amd, {})]
    one = attach(client, repo, amd, PROVENANCE_TYPE, envelope(b"{}", None), ENVELOPE_MEDIA_TYPE)
    tag = repo.with_tag(fallback_tag(amd.digest))
    # The same artifact listed 50 times is read (and reported) once.
    client.put_manifest(tag, referrers_index([one] * 50), OCI_INDEX)
    checks = attestation_checks(client, repo, spec, images, [], False)
    assert [c.name for c in checks].count("provenance subject") == 1
    # More distinct artifacts of one type than verify reads: a failed check says so, and only
    # MAX_PER_TYPE are read.
    many = [attach(client, repo, amd, PROVENANCE_TYPE, envelope(b'{"n":%d}' % n, None),
                   ENVELOPE_MEDIA_TYPE) for n in range(MAX_PER_TYPE + 1)]
    assert len({m.descriptor.digest for m in many}) == MAX_PER_TYPE + 1
    checks = attestation_checks(client, repo, spec, images, [], False)
    assert [c.name for c in checks].count("provenance subject") == MAX_PER_TYPE
    (bounded,) = [c for c in checks if c.name == "attestations readable"]
    assert not bounded.ok and f"verify reads at most {MAX_PER_TYPE}" in bounded.detail


def test_build_attaches_what_a_lying_list_entry_claims_is_there(
    tmp_path: Path, registry: LocalRegistry, client: OCIClient
) -> None:
    """amd64's fallback list names arm64's provenance and signature (their manifests' subject
    is arm64): the build still attaches amd64's own, instead of skipping them as present."""
    from cryptography.hazmat.primitives.asymmetric import ed25519

    from cannery.attest.attach import SIGNATURE_TYPE, Attester
    from cannery.attest.provenance import build_context
    from cannery.attest.sign import Signer
    from cannery.oci import merge_index
    from cannery.oci.referrers import list_referrers, parse_artifact

    repo, children = _image(tmp_path, client, registry.host)
    amd, arm = children
    _, job = _job(repo)
    index = merge_index(client, repo, children, {})
    attester = Attester(client, build_context("catalog.toml", "a" * 64, "buildah", None),
                        Signer(ed25519.Ed25519PrivateKey.generate(), "test"))
    attester.platform(job, repo, arm, "linux/arm64", "")
    arm_list = client.get_manifest(repo.with_tag(fallback_tag(arm.digest)))[0]
    client.put_manifest(repo.with_tag(fallback_tag(amd.digest)), arm_list, OCI_INDEX)
    attester(job, index, children)
    about = {}
    for r in list_referrers(client, repo, amd.digest)[0]:
        body = client.get_manifest(repo.with_digest(r.descriptor.digest))[0]
        kind, subject, _, _ = parse_artifact(body, "artifact")
        about.setdefault(kind, set()).add(subject.digest)
    assert about[PROVENANCE_TYPE] == {arm.digest, amd.digest}
    assert about[SIGNATURE_TYPE] == {arm.digest, amd.digest}


def test_verify_checks_the_signature_of_the_index_it_checked(
    tmp_path: Path, registry: LocalRegistry, client: OCIClient,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """The tag names an unsigned index A when verify reads it; then it moves to a signed index
    B (signed platforms, same images). The index signature checked must be A's."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    import cannery.commands.verify as verify_mod
    from cannery.attest.attach import Attester
    from cannery.attest.provenance import build_context
    from cannery.attest.sign import Signer
    from cannery.oci import merge_index

    repo, children = _image(tmp_path, client, registry.host)
    _, job = _job(repo)
    key = ed25519.Ed25519PrivateKey.generate()
    signed = merge_index(client, repo, children, {})
    Attester(client, build_context("catalog.toml", "a" * 64, "buildah", None),
             Signer(key, "test"))(job, signed, children)
    unsigned = merge_index(client, repo, children, {"org.example.note": "unsigned"})
    ref = repo.with_tag("latest")
    client.put_manifest(ref, client.get_manifest(repo.with_digest(unsigned.digest))[0],
                        OCI_INDEX)
    real = verify_mod.registry_checks

    def then_move(*args, **kwargs):  # type: ignore[no-untyped-def]
        result = real(*args, **kwargs)
        client.put_manifest(ref, client.get_manifest(repo.with_digest(signed.digest))[0],
                            OCI_INDEX)
        return result

    monkeypatch.setattr(verify_mod, "registry_checks", then_move)
    pub = tmp_path / "key.pub"
    pub.write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    lock = Path(__file__).resolve().parents[1] / "golden" / "cannery.lock"
    verify_mod.verify_cmd(str(ref), None, lock, "qwen3-5-a2", True, None, False, pub)
    report = json.loads(capsys.readouterr().out)
    (index_sig,) = [c for c in report["checks"] if c["name"] == "index signature"]
    assert not index_sig["ok"] and "no signature attached" in index_sig["detail"]


def test_a_signature_made_for_another_payload_type_does_not_count(
    tmp_path: Path, registry: LocalRegistry, client: OCIClient
) -> None:
    """The key signed these bytes as some other kind of payload (DSSE binds the type into
    what is signed): valid signature, but not of an in-toto statement."""
    from cryptography.hazmat.primitives.asymmetric import ed25519

    from cannery.attest.attach import (
        KEYID_ANNOTATION,
        SIGNATURE_PREDICATE,
        SIGNATURE_TYPE,
        statement,
    )
    from cannery.attest.sign import Signer

    repo, children = _image(tmp_path, client, registry.host)
    spec, _ = _job(repo)
    amd = children[0]
    key = ed25519.Ed25519PrivateKey.generate()
    stmt = statement(repo.name, amd, SIGNATURE_PREDICATE, {})
    attach(client, repo, amd, SIGNATURE_TYPE,
           envelope(stmt, Signer(key, "test"), "application/vnd.example.other+json"),
           ENVELOPE_MEDIA_TYPE, {KEYID_ANNOTATION: Signer(key, "test").keyid})
    images = [PlatformImage("linux/amd64", amd, {})]
    checks = attestation_checks(client, repo, spec, images, [key.public_key()], False)
    (sig,) = [c for c in checks if c.name == "signature"]
    assert not sig.ok and "payloadType 'application/vnd.example.other+json'" in sig.detail


@pytest.mark.parametrize("output", [b"syft: warning\n{}", b"[]", b"[" * 100_000])
def test_scanner_output_that_is_not_a_json_object_is_a_command_error(
    tmp_path: Path, registry: LocalRegistry, client: OCIClient, output: bytes
) -> None:
    """The scanner (syft) is a program cannery runs: output that is not an SPDX JSON object
    is one error line (exit 2, before any tag moves), not a crash."""
    from cannery.attest.attach import Attester
    from cannery.attest.provenance import build_context
    from cannery.errors import CommandError

    repo, children = _image(tmp_path, client, registry.host)
    _, job = _job(repo)
    attester = Attester(client, build_context("catalog.toml", "a" * 64, "buildah", None), None,
                        lambda *_: output)
    with pytest.raises(CommandError, match="the scanner's output is not a JSON object") as exc:
        attester.platform(job, repo, children[0], "linux/amd64", "")
    assert exc.value.exit_code == 2
