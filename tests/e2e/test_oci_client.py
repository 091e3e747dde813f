"""cannery.oci against Debian's real docker-registry on 127.0.0.1: push a dir: layout (made by
real buildah, and by hand), merge an index, move tags, mount, list, and the trust boundaries
(digests checked against the bytes, plain HTTP only for loopback, certificate host names)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from cannery.errors import InputError, NetworkError
from cannery.oci import (
    OCI_INDEX,
    Descriptor,
    DigestMismatch,
    OCIClient,
    Reference,
    merge_index,
    move_tags,
    push_image_dir,
)
from cannery.tls import ssl_context
from tests.services.faultproxy import FaultProxy
from tests.services.registry import LocalRegistry, push_index, write_dir_layout
from tests.services.tlsca import LocalCA

pytestmark = pytest.mark.e2e


def _repo(registry: LocalRegistry | FaultProxy, name: str = "") -> Reference:
    return Reference.parse(f"{registry.host}/oci/{name or uuid.uuid4().hex[:10]}:latest")


@pytest.fixture
def client() -> OCIClient:
    with OCIClient(ssl_context(), retry_budget=5, backoff=0.01) as c:
        yield c  # type: ignore[misc]


def _two_platforms(tmp: Path, client: OCIClient, repo: Reference, note: str) -> list[Descriptor]:
    return [
        push_image_dir(client, repo, write_dir_layout(tmp / arch, arch, note))
        for arch in ("arm64", "amd64")
    ]


def test_publish_two_platforms_then_noop(tmp_path: Path, registry, client) -> None:  # type: ignore[no-untyped-def]
    repo = _repo(registry)
    children = _two_platforms(tmp_path, client, repo, "one")
    assert [c.platform for c in children] == [
        {"architecture": "arm64", "os": "linux"},
        {"architecture": "amd64", "os": "linux"},
    ]
    index = merge_index(client, repo, children, {"org.example.b": "2", "org.example.a": "1"})
    assert client.list_tags(repo) == []  # nothing tagged yet: only digests were written
    body, found = client.get_manifest(repo.with_digest(index.digest))
    data = json.loads(body)
    assert found == Descriptor(OCI_INDEX, index.digest, index.size)
    assert [m["platform"]["architecture"] for m in data["manifests"]] == ["amd64", "arm64"]
    assert list(data["annotations"]) == ["org.example.a", "org.example.b"]
    # Same inputs in another order: the same bytes, so the same digest.
    again = merge_index(client, repo, children[::-1], {"org.example.a": "1", "org.example.b": "2"})
    assert again.digest == index.digest

    assert move_tags(client, repo, index, ["latest", "v1", "latest"]).moved == ["latest", "v1"]
    assert sorted(client.list_tags(repo)) == ["latest", "v1"]
    assert client.resolve(str(repo)) == index.digest
    noop = move_tags(client, repo, index, ["latest", "v1"])  # a no-op writes nothing
    assert noop.moved == [] and noop.unchanged == ["latest", "v1"]
    # skopeo, an independent reader, agrees on the platforms.
    raw = subprocess.run(
        ["skopeo", "inspect", "--tls-verify=false", "--raw", f"docker://{repo}"],
        check=True, capture_output=True,
    ).stdout
    assert hashlib.sha256(raw).hexdigest() == index.digest.partition(":")[2]


def test_merge_refuses_a_child_the_registry_lacks(tmp_path: Path, registry, client) -> None:  # type: ignore[no-untyped-def]
    repo = _repo(registry)
    children = _two_platforms(tmp_path, client, repo, "x")
    ghost = Descriptor(children[0].media_type, "sha256:" + "1" * 64, 10, {"os": "linux",
                                                                        "architecture": "s390x"})
    with pytest.raises(NetworkError, match="not in the registry"):
        merge_index(client, repo, [*children, ghost], {})
    assert client.list_tags(repo) == []


def test_buildah_dir_layout(tmp_path: Path, registry, client) -> None:  # type: ignore[no-untyped-def]
    """What the lead's build step hands over: `buildah push IMG dir:LAYOUT`, real buildah."""
    if shutil.which("buildah") is None:
        pytest.skip("buildah is not installed")
    name = f"localhost/cannery-oci-test-{uuid.uuid4().hex[:8]}"
    (tmp_path / "f").write_text("hello\n")

    def buildah(*args: str) -> str:
        return subprocess.run(["buildah", *args], check=True, capture_output=True,
                              text=True).stdout.strip()

    ctr = buildah("from", "--arch", "arm64", "scratch")
    try:
        buildah("add", ctr, str(tmp_path / "f"), "/f")
        buildah("config", "--arch", "arm64", "--os", "linux", ctr)
        buildah("commit", "-q", ctr, name)
        buildah("push", name, f"dir:{tmp_path / 'layout'}")
    finally:
        subprocess.run(["buildah", "rm", ctr], capture_output=True)
        subprocess.run(["buildah", "rmi", name], capture_output=True)
    repo = _repo(registry)
    desc = push_image_dir(client, repo, tmp_path / "layout")
    assert desc.platform == {"architecture": "arm64", "os": "linux"}
    assert desc.digest == "sha256:" + hashlib.sha256(
        (tmp_path / "layout" / "manifest.json").read_bytes()).hexdigest()
    assert client.head_manifest(repo.with_digest(desc.digest)) == Descriptor(
        desc.media_type, desc.digest, desc.size)
    assert client.list_tags(repo) == []  # pushed by digest only


def test_docker_media_type_and_blob_roundtrip(tmp_path: Path, registry, client) -> None:  # type: ignore[no-untyped-def]
    repo = _repo(registry)
    layout = write_dir_layout(tmp_path / "d", "amd64", "docker", docker=True)
    desc = push_image_dir(client, repo, layout)
    assert desc.media_type == "application/vnd.docker.distribution.manifest.v2+json"
    manifest = json.loads((layout / "manifest.json").read_bytes())
    layer = manifest["layers"][0]["digest"]
    assert client.get_blob(repo, layer) == (layout / layer.partition(":")[2]).read_bytes()
    assert client.head_manifest(repo.with_tag("nope")) is None
    assert not client.blob_exists(repo, "sha256:" + "2" * 64)

    other = _repo(registry)
    assert client.mount_blob(other, layer, repo.repository) is True
    assert client.blob_exists(other, layer)
    assert client.mount_blob(other, "sha256:" + "3" * 64, repo.repository) is False


def test_push_blob_streams_from_file_and_skips_existing(tmp_path: Path, registry, client) -> None:  # type: ignore[no-untyped-def]
    repo = _repo(registry)
    blob = tmp_path / "big"
    blob.write_bytes(b"x" * (3 << 20) + b"end")  # several chunks
    digest = "sha256:" + hashlib.sha256(blob.read_bytes()).hexdigest()
    client.push_blob(repo, blob, digest)
    assert client.get_blob(repo, digest) == blob.read_bytes()
    # Through a proxy that counts: a blob already there costs one HEAD.
    proxy = FaultProxy(registry.port)
    try:
        client.push_blob(_repo(proxy, repo.repository.partition("/")[2]), blob, digest)
        assert [(m, a) for m, _, a in proxy.log] == [("HEAD", "forward")]
    finally:
        proxy.stop()


def test_a_layer_left_out_of_the_layout_must_be_in_the_repository(  # type: ignore[no-untyped-def]
    tmp_path: Path, registry, client
) -> None:
    """The build exports only layers the registry lacks: a layout without a layer pushes when
    the repository has it, and is refused before anything is written when it does not."""
    layout = write_dir_layout(tmp_path / "l", "amd64")
    layer = json.loads((layout / "manifest.json").read_text())["layers"][0]["digest"]
    blob = layout / layer.partition(":")[2]
    data = blob.read_bytes()
    blob.unlink()
    empty = _repo(registry)
    with pytest.raises(InputError, match=f"blob {layer} missing"):
        push_image_dir(client, empty, layout)
    assert client.list_tags(empty) == [] and not client.blob_exists(empty, layer)
    config = json.loads((layout / "manifest.json").read_text())["config"]["digest"]
    assert not client.blob_exists(empty, config)  # nothing was uploaded before the refusal
    has = _repo(registry)
    client.push_blob(has, data, layer)
    desc = push_image_dir(client, has, layout)
    assert client.head_manifest(has.with_digest(desc.digest)) is not None


# ------------------------------------------------------------------ trust boundaries


@pytest.mark.parametrize("action", ["lie-digest", "corrupt-consistent"])
def test_manifest_digest_is_computed_from_the_bytes(  # type: ignore[no-untyped-def]
    action: str, tmp_path: Path, registry, client
) -> None:
    """A registry that lies in Docker-Content-Digest, or serves other bytes under a digest
    with a matching header: both refused, from the bytes themselves."""
    repo = _repo(registry)
    desc = push_image_dir(client, repo, write_dir_layout(tmp_path / "a", "amd64", action))
    proxy = FaultProxy(registry.port, script=[action],
                       when=lambda method, path: "/manifests/" in path)
    try:
        via = Reference(proxy.host, repo.repository, digest=desc.digest)
        with pytest.raises(DigestMismatch):
            client.get_manifest(via)
        assert proxy.counts[action] == 1
        client.get_manifest(via)  # the next, honest answer is accepted
    finally:
        proxy.stop()


def test_resolve_refuses_a_lying_registry(tmp_path: Path, registry, client) -> None:  # type: ignore[no-untyped-def]
    """`cannery lock` pins what resolve returns: a header that disagrees with the bytes fails."""
    repo = f"oci/{uuid.uuid4().hex[:8]}"
    push_index(registry.url, repo, "t")
    proxy = FaultProxy(registry.port, script=["lie-digest"])
    try:
        with pytest.raises(DigestMismatch, match="does not match content"):
            client.resolve(f"{proxy.host}/{repo}:t")
    finally:
        proxy.stop()


def test_plain_http_only_for_loopback(registry, client) -> None:  # type: ignore[no-untyped-def]
    """The plain-HTTP registry answers at 127.0.0.1 (loopback: falls back to HTTP) and at
    0.0.0.0, which Linux also routes to this machine but which is not a loopback address:
    there the client must insist on TLS."""
    repo = f"oci/{uuid.uuid4().hex[:8]}"
    digest = push_index(registry.url, repo, "t")
    assert client.resolve(f"127.0.0.1:{registry.port}/{repo}:t") == digest
    with pytest.raises(NetworkError, match="registry unreachable") as exc:
        client.resolve(f"0.0.0.0:{registry.port}/{repo}:t")
    assert "\n" not in str(exc.value)


def _wrong_name_cert(ca: LocalCA, root: Path) -> tuple[Path, Path]:
    """A server certificate from the trusted test CA, but for another host name only."""
    root.mkdir(parents=True, exist_ok=True)
    key, csr, cert = root / "wrong.key", root / "wrong.csr", root / "wrong.pem"

    def ssl_cmd(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    ssl_cmd("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
            "-subj", "/CN=registry.other.example")
    (root / "san.ext").write_text(
        "subjectAltName=DNS:registry.other.example\nextendedKeyUsage=serverAuth\n")
    ssl_cmd("x509", "-req", "-in", str(csr), "-CA", str(ca.ca_cert),
            "-CAkey", str(ca.ca_cert.parent / "ca.key"), "-CAcreateserial", "-out", str(cert),
            "-days", "2", "-extfile", str(root / "san.ext"))
    return cert, key


def test_certificate_for_another_host_name_is_refused(tmp_path: Path, test_ca: LocalCA) -> None:
    cert, key = _wrong_name_cert(test_ca, tmp_path / "certs")
    (tmp_path / "reg").mkdir()
    reg = LocalRegistry(tmp_path / "reg", tls=(cert, key))
    try:
        ctx = ssl_context(test_ca.ca_cert)  # the CA is trusted; only the name is wrong
        with OCIClient(ctx, retry_budget=2) as c, pytest.raises(NetworkError) as exc:
            c.resolve(f"{reg.host}/oci/x:t")
        assert "another host name" in str(exc.value)
        # A context that skips the name check is refused outright, whoever builds it.
        lax = ssl_context(test_ca.ca_cert)
        lax.check_hostname = False
        with pytest.raises(ValueError, match="verifies certificates and names"):
            OCIClient(lax)
    finally:
        reg.stop()


def test_untrusted_certificate_is_one_line_naming_the_option(tls_registry) -> None:  # type: ignore[no-untyped-def]
    with OCIClient(ssl_context(), retry_budget=2) as c, pytest.raises(NetworkError) as exc:
        c.resolve(f"{tls_registry.host}/oci/x:t")
    msg = str(exc.value)
    assert "--ca-cert" in msg and "CANNERY_CA_CERT" in msg and "\n" not in msg


def test_tls_registry_with_test_ca(tls_registry, test_ca: LocalCA, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with OCIClient(ssl_context(test_ca.ca_cert)) as c:
        repo = _repo(tls_registry)
        desc = push_image_dir(c, repo, write_dir_layout(tmp_path / "t", "amd64", "tls"))
        assert c.head_manifest(repo.with_digest(desc.digest)) is not None



def test_oci_image_layout_made_by_skopeo(tmp_path: Path, registry, client) -> None:  # type: ignore[no-untyped-def]
    """The other layout push_image_dir takes: an OCI image layout with one manifest."""
    if shutil.which("skopeo") is None:
        pytest.skip("skopeo is not installed")
    layout = write_dir_layout(tmp_path / "d", "arm64", "oci-layout")
    subprocess.run(["skopeo", "copy", "-q", f"dir:{layout}", f"oci:{tmp_path / 'oci'}:x"],
                   check=True, capture_output=True)
    repo = _repo(registry)
    desc = push_image_dir(client, repo, tmp_path / "oci")
    assert desc.platform == {"architecture": "arm64", "os": "linux"}
    assert client.head_manifest(repo.with_digest(desc.digest)) is not None


def test_one_connection_serves_heads_and_reads_in_turn(tmp_path: Path, registry, client) -> None:  # type: ignore[no-untyped-def]
    """A HEAD's answer (found or not) is read to its end before the next request, so the
    connection goes back to the pool: requests one after another use one connection, not a
    new TCP (and, to a TLS registry, TLS) handshake each."""
    proxy = FaultProxy(registry.port)
    try:
        repo = _repo(proxy)
        desc = push_image_dir(client, repo, write_dir_layout(tmp_path / "l", "amd64", "keep"))
        missing = "sha256:" + "0" * 64
        with OCIClient(ssl_context()) as fresh:  # its own pool
            fresh.get_manifest(repo.with_digest(desc.digest))  # settles the scheme: one open
            before = proxy.connections
            assert fresh.head_manifest(repo.with_digest(desc.digest)) is not None
            assert fresh.head_manifest(repo.with_digest(missing)) is None
            assert fresh.blob_exists(repo, missing) is False
            body, _ = fresh.get_manifest(repo.with_digest(desc.digest))
            assert fresh.head_manifest(repo.with_digest(desc.digest)) is not None
            assert proxy.connections == before
        assert json.loads(body)["layers"]
    finally:
        proxy.stop()
