"""OCI 1.1 referrers on the real docker-registry 2.8 (no referrers API: the tag-schema fallback)
and on a stand-in for a registry with the API (tests/services/referrers.py, a proxy in front of
the real registry; say so: no registry with the API is installable here); then what the build
attaches and what verify checks, on hand-made images (no builder needed)."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from cannery.attest.attach import (
    PROVENANCE_TYPE,
    SBOM_TYPE,
    SIGNATURE_TYPE,
    SPDX_PREDICATE,
    Attester,
    statement,
)
from cannery.attest.provenance import BuildContext, build_context
from cannery.attest.sign import ENVELOPE_MEDIA_TYPE, Signer, envelope, open_envelope
from cannery.builder.jobs import plan_build
from cannery.catalog.load import load_catalog
from cannery.errors import NetworkError
from cannery.lock import read_lock
from cannery.oci import OCI_INDEX, Descriptor, OCIClient, Reference, merge_index, push_image_dir
from cannery.oci.referrers import attach, fallback_tag, list_referrers
from cannery.plan import plan
from cannery.render.dockerfile import render_dockerfile
from cannery.tls import ssl_context
from cannery.verify.attestations import attestation_checks
from cannery.verify.registry import PlatformImage
from tests.services.referrers import ReferrersAPIStandIn
from tests.services.registry import LocalRegistry, write_dir_layout

pytestmark = pytest.mark.e2e
GOLDEN = Path(__file__).resolve().parents[1] / "golden"


@pytest.fixture
def client() -> Iterator[OCIClient]:
    with OCIClient(ssl_context(), retry_budget=5, backoff=0.01) as c:
        yield c


@pytest.fixture
def api(registry: LocalRegistry) -> Iterator[ReferrersAPIStandIn]:
    proxy = ReferrersAPIStandIn(registry.port)
    yield proxy
    proxy.stop()


def _image(tmp: Path, client: OCIClient, host: str) -> tuple[Reference, list[Descriptor]]:
    repo = Reference.parse(f"{host}/attest/{uuid.uuid4().hex[:10]}:latest")
    children = [
        push_image_dir(client, repo, write_dir_layout(tmp / arch, arch, "x"))
        for arch in ("amd64", "arm64")
    ]
    return repo, children


def test_fallback_tag_lists_artifacts_and_the_index_is_untouched(
    tmp_path: Path, registry: LocalRegistry, client: OCIClient
) -> None:
    repo, children = _image(tmp_path, client, registry.host)
    index = merge_index(client, repo, children, {})
    before = client.get_manifest(repo.with_digest(index.digest))[0]
    subject = children[0]
    one = attach(client, repo, subject, PROVENANCE_TYPE, b'{"a":1}', ENVELOPE_MEDIA_TYPE,
                 {"io.example": "x"})
    two = attach(client, repo, subject, SBOM_TYPE, b'{"b":2}', ENVELOPE_MEDIA_TYPE)
    again = attach(client, repo, subject, PROVENANCE_TYPE, b'{"a":1}', ENVELOPE_MEDIA_TYPE,
                   {"io.example": "x"})
    assert again == one
    found, source = list_referrers(client, repo, subject.digest)
    assert source == "tag"
    assert [(r.artifact_type, r.descriptor.digest) for r in found] == [
        (PROVENANCE_TYPE, one.descriptor.digest), (SBOM_TYPE, two.descriptor.digest)
    ]
    assert found[0].descriptor.annotations == {"io.example": "x"}
    # The fallback index is a real OCI index under the spec's tag; the image index is unchanged.
    tag = fallback_tag(subject.digest)
    assert tag in client.list_tags(repo)
    body, desc = client.get_manifest(repo.with_tag(tag))
    assert desc.media_type == OCI_INDEX
    assert [m["artifactType"] for m in json.loads(body)["manifests"]] == [PROVENANCE_TYPE,
                                                                           SBOM_TYPE]
    assert client.get_manifest(repo.with_digest(index.digest))[0] == before
    # The artifact manifest names its subject (no platform) and its type.
    art = json.loads(client.get_manifest(repo.with_digest(one.descriptor.digest))[0])
    assert art["subject"] == {"mediaType": subject.media_type, "digest": subject.digest,
                              "size": subject.size}
    assert art["artifactType"] == PROVENANCE_TYPE
    assert art["config"]["mediaType"] == "application/vnd.oci.empty.v1+json"
    # Filtered by type; the other platform has none.
    assert len(list_referrers(client, repo, subject.digest, SBOM_TYPE)[0]) == 1
    assert list_referrers(client, repo, children[1].digest) == ([], "tag")


def test_a_fallback_tag_that_is_not_an_index_is_not_overwritten(
    tmp_path: Path, registry: LocalRegistry, client: OCIClient
) -> None:
    repo, children = _image(tmp_path, client, registry.host)
    squatter = push_image_dir(client, repo, write_dir_layout(tmp_path / "s", "amd64", "squat"))
    body, _ = client.get_manifest(repo.with_digest(squatter.digest))
    client.put_manifest(repo.with_tag(fallback_tag(children[0].digest)), body,
                        squatter.media_type)
    with pytest.raises(NetworkError, match="the referrers tag holds a"):
        attach(client, repo, children[0], PROVENANCE_TYPE, b"{}", ENVELOPE_MEDIA_TYPE)


def test_referrers_api_is_used_where_the_registry_has_it(
    tmp_path: Path, api: ReferrersAPIStandIn, client: OCIClient
) -> None:
    repo, children = _image(tmp_path, client, api.host)
    r = attach(client, repo, children[0], PROVENANCE_TYPE, b'{"p":1}', ENVELOPE_MEDIA_TYPE)
    found, source = list_referrers(client, repo, children[0].digest)
    assert source == "api" and api.api_calls >= 1
    assert [x.descriptor.digest for x in found] == [r.descriptor.digest]
    # The registry keeps the list: no fallback tag was written.
    assert fallback_tag(children[0].digest) not in client.list_tags(repo)


# ------------------------------------------------------------ attach as a build does, verify


def _job(repo: Reference):  # type: ignore[no-untyped-def]
    cat = load_catalog(None).catalog
    lock = read_lock(GOLDEN / "cannery.lock")
    (spec,) = plan(cat, lock, ["qwen3-5-a2"])
    spec = dataclasses.replace(spec, repository=repo.name)
    return spec, plan_build(spec, render_dockerfile(spec), lock)


def _attested(  # type: ignore[no-untyped-def]
    tmp: Path, client: OCIClient, host: str, signer: Signer | None, sbom: bool = True
):
    repo, children = _image(tmp, client, host)
    spec, job = _job(repo)
    index = merge_index(client, repo, children, {})
    ctx = build_context("catalog.toml", "a" * 64, "buildah", None)

    def scanner(r: Reference, d: Descriptor, p: str) -> bytes:
        return json.dumps({"spdxVersion": "SPDX-2.3", "packages": []}).encode()

    Attester(client, ctx, signer, scanner if sbom else None)(job, index, children)
    images = [PlatformImage(str(c.platform and f"linux/{c.platform['architecture']}"), c, {})
              for c in children]
    return repo.with_tag("latest"), spec, images, index, children, ctx


def _failed(checks: list) -> dict[str, str]:  # type: ignore[type-arg]
    return {f"{c.platform} {c.name}": c.detail for c in checks if not c.ok}


@pytest.mark.parametrize("registry_kind", ["fallback", "api"])
def test_attached_provenance_sbom_and_signatures_verify_with_the_key_only(
    tmp_path: Path, registry: LocalRegistry, api: ReferrersAPIStandIn, client: OCIClient,
    registry_kind: str,
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    signer = Signer(key, "test")
    host = registry.host if registry_kind == "fallback" else api.host
    ref, spec, images, index, children, ctx = _attested(tmp_path, client, host, signer)
    client.put_manifest(ref, client.get_manifest(ref.with_digest(index.digest))[0], OCI_INDEX)
    checks = attestation_checks(client, ref, spec, images, [key.public_key()], True)
    assert _failed(checks) == {}
    names = {c.name for c in checks}
    assert {"provenance present", "provenance subject", "provenance signature",
            "provenance dependencies", "provenance parameters", "sbom present",
            "sbom signature", "signature", "index signature"} <= names
    # Another key: every signature check fails, naming it.
    other = ed25519.Ed25519PrivateKey.generate()
    failed = _failed(attestation_checks(client, ref, spec, images, [other.public_key()], True))
    assert "linux/amd64 signature" in failed and "signed only by other keys" in \
        failed["linux/amd64 signature"]
    assert "linux/arm64 provenance signature" in failed
    assert "None index signature" in failed
    # A second build attaches nothing new (one provenance, SBOM, signature per platform).
    repo = Reference(ref.host, ref.repository)
    _, job = _job(repo)
    Attester(client, ctx, signer, lambda *_: b"{}")(job, index, children)
    types = [r.artifact_type for r in list_referrers(client, repo, children[0].digest)[0]]
    assert sorted(types) == sorted([PROVENANCE_TYPE, SBOM_TYPE, SIGNATURE_TYPE])


def test_tampered_provenance_and_missing_sbom_fail_naming_the_check(
    tmp_path: Path, registry: LocalRegistry, client: OCIClient
) -> None:
    key = ed25519.Ed25519PrivateKey.generate()
    signer = Signer(key, "test")
    ref, spec, images, index, children, _ = _attested(tmp_path, client, registry.host, signer)
    repo = Reference(ref.host, ref.repository)
    client.put_manifest(ref, client.get_manifest(ref.with_digest(index.digest))[0], OCI_INDEX)
    amd = children[0]
    # A provenance whose dependencies differ from the lock (one base digest changed), even
    # properly signed, fails "provenance dependencies".
    prov = [r for r in list_referrers(client, repo, amd.digest, PROVENANCE_TYPE)[0]]
    art = json.loads(client.get_manifest(repo.with_digest(prov[0].descriptor.digest))[0])
    original = open_envelope(client.get_blob(repo, art["layers"][0]["digest"]))[1]
    stmt = json.loads(original)
    deps = stmt["predicate"]["buildDefinition"]["resolvedDependencies"]
    deps[0]["digest"] = {"sha256": "0" * 64}
    forged = json.dumps(stmt, sort_keys=True).encode()
    attach(client, repo, amd, PROVENANCE_TYPE, envelope(forged, signer), ENVELOPE_MEDIA_TYPE)
    failed = _failed(attestation_checks(client, ref, spec, images, [key.public_key()], True))
    assert list(failed) == ["linux/amd64 provenance dependencies"]
    assert "which provenance lacks" in failed["linux/amd64 provenance dependencies"]
    # The lock's statement, signed, then its payload swapped: the signature check fails.
    env = json.loads(envelope(original, signer))
    env["payload"] = envelope(forged, None).decode().split('"payload":"')[1].split('"')[0]
    attach(client, repo, amd, PROVENANCE_TYPE, json.dumps(env).encode(), ENVELOPE_MEDIA_TYPE)
    failed = _failed(attestation_checks(client, ref, spec, images, [key.public_key()], True))
    assert "linux/amd64 provenance signature" in failed
    # No SBOM attached: a failure only under --require-attestations.
    ref2, spec2, images2, _, _, _ = _attested(tmp_path / "b", client, registry.host, None, False)
    assert _failed(attestation_checks(client, ref2, spec2, images2, [], False)) == {}
    failed = _failed(attestation_checks(client, ref2, spec2, images2, [], True))
    assert failed == {"linux/amd64 sbom present": "none attached",
                      "linux/arm64 sbom present": "none attached"}


def test_sbom_statement_checks_the_locked_python_pins(
    tmp_path: Path, registry: LocalRegistry, client: OCIClient
) -> None:
    repo, children = _image(tmp_path, client, registry.host)
    spec, _ = _job(repo)
    spec = dataclasses.replace(
        spec, python_locked=(("amd64", ("numpy==2.1.0 --hash=sha256:" + "1" * 64,)),))
    amd = children[0]
    doc = {"spdxVersion": "SPDX-2.3", "packages": [{"name": "numpy", "externalRefs": [
        {"referenceType": "purl", "referenceLocator": "pkg:pypi/numpy@2.0.0"}]}]}
    stmt = statement(repo.name, amd, SPDX_PREDICATE, doc)
    attach(client, repo, amd, SBOM_TYPE, envelope(stmt, None), ENVELOPE_MEDIA_TYPE)
    img = PlatformImage("linux/amd64", amd, {})
    failed = _failed(attestation_checks(client, repo.with_tag("latest"), spec, [img], [], False))
    assert failed == {"linux/amd64 sbom python pins": "numpy==2.1.0 (SBOM: 2.0.0)"}


def test_build_context_in_github_actions_names_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in {"GITHUB_ACTIONS": "true", "GITHUB_RUN_ID": "42", "GITHUB_RUN_ATTEMPT": "2",
                 "GITHUB_REPOSITORY": "o/r", "GITHUB_SERVER_URL": "https://github.com",
                 "GITHUB_WORKFLOW_REF": "o/r/.github/workflows/images.yml@refs/heads/main"}.items():
        monkeypatch.setenv(k, v)
    ctx: BuildContext = build_context("c.toml", "b" * 64, "buildx", "remote")
    assert ctx.invocation_id == "https://github.com/o/r/actions/runs/42/attempts/2"
    assert ctx.builder_id == "https://github.com/o/r/.github/workflows/images.yml@refs/heads/main"


def test_an_attestation_about_another_manifest_fails_the_subject_check(
    tmp_path: Path, registry: LocalRegistry, client: OCIClient
) -> None:
    key = ed25519.Ed25519PrivateKey.generate()
    signer = Signer(key, "test")
    ref, spec, images, index, children, _ = _attested(tmp_path, client, registry.host, signer)
    repo = Reference(ref.host, ref.repository)
    client.put_manifest(ref, client.get_manifest(ref.with_digest(index.digest))[0], OCI_INDEX)
    amd, arm = children
    (arm_prov,) = list_referrers(client, repo, arm.digest, PROVENANCE_TYPE)[0]
    art = json.loads(client.get_manifest(repo.with_digest(arm_prov.descriptor.digest))[0])
    arm_envelope = client.get_blob(repo, art["layers"][0]["digest"])
    # arm64's signed provenance, attached to amd64: the artifact's subject is right, the
    # statement's is not.
    attach(client, repo, amd, PROVENANCE_TYPE, arm_envelope, ENVELOPE_MEDIA_TYPE)
    failed = _failed(attestation_checks(client, ref, spec, images, [key.public_key()], True))
    assert list(failed) == ["linux/amd64 provenance subject"]
    assert "the statement's subject is not" in failed["linux/amd64 provenance subject"]
    # arm64's provenance artifact listed in amd64's fallback index (whoever can write the tag
    # can do that): the artifact's own subject is arm64, so it is refused.
    tag = repo.with_tag(fallback_tag(arm.digest).replace(arm.digest[7:], amd.digest[7:]))
    body = json.loads(client.get_manifest(tag)[0])
    body["manifests"] = [arm_prov.to_json()]
    client.put_manifest(tag, json.dumps(body).encode(), OCI_INDEX)
    failed = _failed(attestation_checks(client, ref, spec, images, [key.public_key()], True))
    assert "artifact subject is " + arm.digest in failed["linux/amd64 provenance subject"]


def test_a_provenance_naming_another_image_fails_the_parameters_check(
    tmp_path: Path, registry: LocalRegistry, client: OCIClient
) -> None:
    key = ed25519.Ed25519PrivateKey.generate()
    signer = Signer(key, "test")
    ref, spec, images, index, children, _ = _attested(tmp_path, client, registry.host, signer)
    repo = Reference(ref.host, ref.repository)
    client.put_manifest(ref, client.get_manifest(ref.with_digest(index.digest))[0], OCI_INDEX)
    (prov,) = list_referrers(client, repo, children[1].digest, PROVENANCE_TYPE)[0]
    art = json.loads(client.get_manifest(repo.with_digest(prov.descriptor.digest))[0])
    stmt = json.loads(open_envelope(client.get_blob(repo, art["layers"][0]["digest"]))[1])
    stmt["predicate"]["buildDefinition"]["externalParameters"]["image"] = "another-image"
    attach(client, repo, children[1], PROVENANCE_TYPE,
           envelope(json.dumps(stmt).encode(), signer), ENVELOPE_MEDIA_TYPE)
    failed = _failed(attestation_checks(client, ref, spec, images, [key.public_key()], True))
    assert list(failed) == ["linux/arm64 provenance parameters"]


def test_concurrent_attachers_lose_nothing_where_conditional_puts_are_honoured(
    tmp_path: Path, registry: LocalRegistry, client: OCIClient
) -> None:
    """Two writers attach to one manifest at once through a stand-in that honours If-Match /
    If-None-Match (docker-registry 2.8 itself ignores them): every artifact stays listed."""
    import threading

    proxy = ReferrersAPIStandIn(registry.port, api=False, conditional=True)
    try:
        repo, children = _image(tmp_path, client, proxy.host)
        errors: list[BaseException] = []

        def writer(n: int) -> None:
            try:
                with OCIClient(ssl_context(), retry_budget=5, backoff=0.01) as c:
                    for i in range(5):
                        attach(c, repo, children[0], SBOM_TYPE, f'{{"w":{n},"i":{i}}}'.encode(),
                               ENVELOPE_MEDIA_TYPE)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []
        found, source = list_referrers(client, repo, children[0].digest)
        assert source == "tag" and len(found) == 10
        print(f"412 answers: {proxy.refused}")
    finally:
        proxy.stop()


def test_a_write_between_our_read_and_our_write_is_not_lost(
    tmp_path: Path, registry: LocalRegistry, client: OCIClient
) -> None:
    """Deterministic interleaving: right after this client reads the fallback list, another
    writer adds an entry. The conditional PUT (honoured by the stand-in) is refused with 412,
    the list is read again, and both entries stay listed; without If-Match the other writer's
    entry would be overwritten."""
    proxy = ReferrersAPIStandIn(registry.port, api=False, conditional=True)
    try:
        repo, children = _image(tmp_path, client, proxy.host)
        attach(client, repo, children[0], SBOM_TYPE, b'{"first":1}', ENVELOPE_MEDIA_TYPE)
        rival: list[str] = []

        class Racing(OCIClient):
            def get_manifest_etag(self, ref: Reference):  # type: ignore[no-untyped-def]
                got = super().get_manifest_etag(ref)
                if not rival and (ref.tag or "").startswith("sha256-"):
                    r = attach(client, repo, children[0], SBOM_TYPE, b'{"rival":1}',
                               ENVELOPE_MEDIA_TYPE)
                    rival.append(r.descriptor.digest)
                return got

        with Racing(ssl_context(), retry_budget=5, backoff=0.01) as racing:
            ours = attach(racing, repo, children[0], PROVENANCE_TYPE, b'{"ours":1}',
                          ENVELOPE_MEDIA_TYPE)
        listed = [r.descriptor.digest for r in list_referrers(client, repo, children[0].digest)[0]]
        assert rival and rival[0] in listed and ours.descriptor.digest in listed
        assert len(listed) == 3 and proxy.refused == 1
    finally:
        proxy.stop()


def test_copy_referrers_carries_them_from_a_fallback_registry_to_an_api_one(
    tmp_path: Path, registry: LocalRegistry, api: ReferrersAPIStandIn, client: OCIClient
) -> None:
    from cannery.oci.referrers import copy_referrers

    src, children = _image(tmp_path, client, registry.host)
    subject = children[0]
    a = attach(client, src, subject, PROVENANCE_TYPE, b'{"p":1}', ENVELOPE_MEDIA_TYPE)
    b = attach(client, src, subject, SBOM_TYPE, b'{"s":1}', ENVELOPE_MEDIA_TYPE)
    sig = attach(client, src, b.descriptor, SIGNATURE_TYPE, b'{"sig":1}', ENVELOPE_MEDIA_TYPE)
    dst = Reference.parse(f"{api.host}/mirror/{uuid.uuid4().hex[:8]}:latest")
    body, desc = client.get_manifest(src.with_digest(subject.digest))
    for layer in [json.loads(body)["config"], *json.loads(body)["layers"]]:
        client.push_blob(dst, client.get_blob(src, layer["digest"]), layer["digest"])
    client.put_manifest(dst.with_digest(subject.digest), body, desc.media_type)
    copied = copy_referrers(client, src, client, dst, subject.digest)
    assert [c.descriptor.digest for c in copied] == [a.descriptor.digest, b.descriptor.digest,
                                                     sig.descriptor.digest]
    found, source = list_referrers(client, dst, subject.digest)
    assert source == "api" and {r.descriptor.digest for r in found} == {
        a.descriptor.digest, b.descriptor.digest}
    assert client.get_blob(dst, json.loads(client.get_manifest(
        dst.with_digest(a.descriptor.digest))[0])["layers"][0]["digest"]) == b'{"p":1}'


# ------------------------------------------------------------ GC safety: an artifact's own tag


def test_each_artifact_has_its_own_tag_and_a_copy_carries_it(
    tmp_path: Path, registry: LocalRegistry, api: ReferrersAPIStandIn, client: OCIClient
) -> None:
    """A registry that deletes untagged manifests (docker-registry 2.8's GC, quay, SWR) keeps
    each artifact through its tag sha256-<hex>.artifact, in the registry it was attached to and
    in every one it is copied to (the fallback or the API way)."""
    from cannery.oci.referrers import copy_referrers, keep_tag

    src, children = _image(tmp_path, client, registry.host)
    a = attach(client, src, children[0], PROVENANCE_TYPE, b'{"p":1}', ENVELOPE_MEDIA_TYPE)
    b = attach(client, src, a.descriptor, SIGNATURE_TYPE, b'{"s":1}', ENVELOPE_MEDIA_TYPE)
    keep = {keep_tag(a.descriptor.digest), keep_tag(b.descriptor.digest)}
    assert keep <= set(client.list_tags(src))
    assert client.head_manifest(src.with_tag(keep_tag(a.descriptor.digest))) == \
        client.head_manifest(src.with_digest(a.descriptor.digest))
    for host in (registry.host, api.host):
        dst = Reference.parse(f"{host}/mirror/{uuid.uuid4().hex[:8]}:latest")
        body, desc = client.get_manifest(src.with_digest(children[0].digest))
        for layer in [json.loads(body)["config"], *json.loads(body)["layers"]]:
            client.push_blob(dst, client.get_blob(src, layer["digest"]), layer["digest"])
        client.put_manifest(dst.with_digest(children[0].digest), body, desc.media_type)
        copy_referrers(client, src, client, dst, children[0].digest)
        assert keep <= set(client.list_tags(dst)), host


def test_an_untagged_artifact_gets_its_tag_and_a_lost_one_leaves_the_list(
    tmp_path: Path, registry: LocalRegistry, client: OCIClient
) -> None:
    """What a cannery before keep tags left: an artifact pushed by digest only (it gets its tag
    when a build finds it attached), and one a GC deleted while the list still names it (the
    next attach drops it from the list; the registry would refuse a list naming it)."""
    import httpx

    from cannery.oci.manifest import OCI_MANIFEST, digest_of
    from cannery.oci.referrers import (
        EMPTY,
        EMPTY_CONFIG,
        Referrer,
        artifact_manifest,
        keep_tag,
        referrers_index,
    )

    repo, children = _image(tmp_path, client, registry.host)
    subject = Descriptor(children[0].media_type, children[0].digest, children[0].size)
    entries = []
    for payload in (b'{"old":1}', b'{"lost":1}'):
        client.push_blob(repo, EMPTY_CONFIG, EMPTY.digest)
        layer = Descriptor(ENVELOPE_MEDIA_TYPE, digest_of(payload), len(payload))
        client.push_blob(repo, payload, layer.digest)
        body = artifact_manifest(subject, SBOM_TYPE, [layer])
        client.put_manifest(repo.with_digest(digest_of(body)), body, OCI_MANIFEST)
        entries.append(Referrer(Descriptor(OCI_MANIFEST, digest_of(body), len(body)), SBOM_TYPE))
    client.put_manifest(repo.with_tag(fallback_tag(subject.digest)), referrers_index(entries),
                        OCI_INDEX)
    old, lost = entries
    with httpx.Client() as http:  # a GC's work, by hand (this registry is plain HTTP)
        http.delete(f"http://{registry.host}/v2/{repo.repository}/manifests/"
                    f"{lost.descriptor.digest}").raise_for_status()
    assert keep_tag(old.descriptor.digest) not in client.list_tags(repo)

    _, job = _job(repo)
    ctx = build_context("catalog.toml", "a" * 64, "buildah", None)
    Attester(client, ctx, None, lambda *_: b'{"spdxVersion":"SPDX-2.3"}').platform(
        job, repo, subject, "linux/amd64", "")
    assert keep_tag(old.descriptor.digest) in client.list_tags(repo)  # the SBOM, found
    found, _ = list_referrers(client, repo, subject.digest)
    assert [r.artifact_type for r in found] == [SBOM_TYPE, PROVENANCE_TYPE]
    assert found[0].descriptor.digest == old.descriptor.digest
