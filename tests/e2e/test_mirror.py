"""Images across registries, against Debian's real docker-registry (TLS, the test CA): one
index digest for every tag and every OCI registry; `cannery copy` gives the digests
`skopeo copy --all --preserve-digests` gives; blobs mounted, streamed or skipped; referrers
through the tag schema; Docker media types for registries that refuse OCI ones."""

from __future__ import annotations

import hashlib
import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cannery.errors import NetworkError
from cannery.oci import Descriptor, OCIClient, Reference, merge_index, move_tags, push_image_dir
from cannery.oci.manifest import DOCKER_LIST, DOCKER_MANIFEST, OCI_INDEX, OCI_MANIFEST
from cannery.oci.mirror import Mirror
from cannery.tls import ssl_context
from tests.services.bases import cert_dir_for
from tests.services.faultproxy import FaultProxy
from tests.services.registry import LocalRegistry, write_dir_layout
from tests.services.tlsca import LocalCA

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def registries(
    tmp_path_factory: pytest.TempPathFactory, test_ca: LocalCA
) -> Iterator[list[LocalRegistry]]:
    regs = [
        LocalRegistry(
            tmp_path_factory.mktemp(f"reg{n}"), tls=(test_ca.server_cert, test_ca.server_key)
        )
        for n in range(2)
    ]
    yield regs
    for reg in regs:
        reg.stop()


@pytest.fixture
def client(test_ca: LocalCA) -> Iterator[OCIClient]:
    with OCIClient(ssl_context(test_ca.ca_cert), retry_budget=5, backoff=0.01) as c:
        yield c


def _repo(reg: LocalRegistry, tag: str = "v1") -> Reference:
    return Reference.parse(f"{reg.host}/mirror/{uuid.uuid4().hex[:10]}:{tag}")


def publish_two_platforms(
    tmp: Path, client: OCIClient, repo: Reference, note: str = "one"
) -> tuple[Descriptor, list[Descriptor]]:
    """What `cannery build --push` writes: Docker v2s2 platform manifests (buildah --format
    docker), an OCI index of them by digest."""
    children = [
        push_image_dir(client, repo, write_dir_layout(tmp / arch, arch, note, docker=True))
        for arch in ("amd64", "arm64")
    ]
    return merge_index(client, repo, children, {}), children


def _raw(ref: str, certs: Path) -> bytes:
    return subprocess.run(
        ["skopeo", "inspect", "--raw", "--cert-dir", str(certs), f"docker://{ref}"],
        check=True,
        capture_output=True,
    ).stdout


def _digests(ref: str, certs: Path) -> tuple[str, list[str]]:
    """The index digest a tag serves and its children's digests, read by skopeo."""
    body = _raw(ref, certs)
    return "sha256:" + hashlib.sha256(body).hexdigest(), [
        m["digest"] for m in json.loads(body)["manifests"]
    ]


def test_every_tag_and_every_oci_registry_serve_one_index_digest(
    tmp_path: Path, registries: list[LocalRegistry], client: OCIClient, test_ca: LocalCA
) -> None:
    certs = cert_dir_for(test_ca, tmp_path / "certs")
    name = f"mirror/{uuid.uuid4().hex[:10]}"
    seen = set()
    for n, reg in enumerate(registries):
        repo = Reference.parse(f"{reg.host}/{name}:release-1")
        index, _ = publish_two_platforms(tmp_path / str(n), client, repo)
        moves = move_tags(client, repo, index, ["release-1", "latest"])
        assert moves.moved == ["release-1", "latest"]
        for tag in ("release-1", "latest"):
            seen.add(_digests(f"{reg.host}/{name}:{tag}", certs)[0])
    assert len(seen) == 1, seen  # no tag or registry name in the index


def _push_referrer(client: OCIClient, repo: Reference, subject: Descriptor) -> str:
    """An OCI 1.1 artifact naming ``subject``, and the tag-schema index that lists it (what a
    signer writes to a registry without the referrers API)."""
    empty = b"{}"
    blob = b'{"predicate": "test"}'
    for data in (empty, blob):
        client.push_blob(repo, data, "sha256:" + hashlib.sha256(data).hexdigest())
    artifact = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "artifactType": "application/vnd.example.test",
            "config": {
                "mediaType": "application/vnd.oci.empty.v1+json",
                "size": 2,
                "digest": "sha256:" + hashlib.sha256(empty).hexdigest(),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.example.test+json",
                    "size": len(blob),
                    "digest": "sha256:" + hashlib.sha256(blob).hexdigest(),
                }
            ],
            "subject": subject.to_json(),
        }
    ).encode()
    digest = "sha256:" + hashlib.sha256(artifact).hexdigest()
    client.put_manifest(repo.with_digest(digest), artifact, OCI_MANIFEST)
    index = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {
                    "mediaType": OCI_MANIFEST,
                    "digest": digest,
                    "size": len(artifact),
                    "artifactType": "application/vnd.example.test",
                }
            ],
        }
    ).encode()
    client.put_manifest(repo.with_tag(subject.digest.replace(":", "-")), index, OCI_INDEX)
    return digest


def test_copy_gives_the_digests_skopeo_preserve_digests_gives(
    tmp_path: Path, registries: list[LocalRegistry], client: OCIClient, test_ca: LocalCA, cli
) -> None:  # type: ignore[no-untyped-def]
    certs = cert_dir_for(test_ca, tmp_path / "certs")
    src = _repo(registries[0])
    index, children = publish_two_platforms(tmp_path, client, src)
    move_tags(client, src, index, ["v1"])
    referrer = _push_referrer(client, src, index)
    ours = _repo(registries[1])
    theirs = _repo(registries[1])
    r = cli("copy", str(src), ours.name, "--ca-cert", str(test_ca.ca_cert))
    assert r.code == 0, r.err
    subprocess.run(
        [
            "skopeo",
            "copy",
            "--quiet",
            "--all",
            "--preserve-digests",
            "--src-cert-dir",
            str(certs),
            "--dest-cert-dir",
            str(certs),
            f"docker://{src}",
            f"docker://{theirs}",
        ],
        check=True,
        capture_output=True,
    )
    want = (index.digest, sorted(c.digest for c in children))
    for ref in (ours, theirs):
        got, kids = _digests(str(ref), certs)
        assert (got, sorted(kids)) == want
    # The summary counts the image's blobs and manifests (2 configs + 2 layers; 2 platform
    # manifests and the index) and the referrers, each with its own blobs and manifest.
    assert f"{ours.name}:v1@{index.digest} (tag moved)" in r.out
    assert "blobs: 4 copied" in r.out and "0 mounted, 0 already there" in r.out
    assert "manifests: 3 written" in r.out
    assert "1 referrer(s)" in r.out
    # The referrer came along under the tag schema; skopeo does not copy it.
    tag = index.digest.replace(":", "-")
    assert json.loads(_raw(f"{ours.name}:{tag}", certs))["manifests"][0]["digest"] == referrer
    assert tag not in client.list_tags(theirs)

    # Again: nothing to copy, nothing written.
    again = cli("copy", str(src), ours.name, "--ca-cert", str(test_ca.ca_cert), "--json")
    assert again.code == 0, again.err
    target = json.loads(again.out)["targets"][0]
    assert target["tag_moved"] is False
    assert target["manifests_written"] == 0 and target["blobs_copied"] == 0


def test_same_host_copy_mounts_and_skips(
    tmp_path: Path, registries: list[LocalRegistry], client: OCIClient
) -> None:
    src = _repo(registries[0])
    index, _ = publish_two_platforms(tmp_path, client, src)
    dst = _repo(registries[0])
    mirror = Mirror(client)
    assert mirror.copy(src.with_digest(index.digest), dst).digest == index.digest
    assert (mirror.stats.blobs_mounted, mirror.stats.blobs_copied) == (4, 0)
    # Again: every manifest is there, so no blob is even asked about.
    again = Mirror(client)
    again.copy(src.with_digest(index.digest), dst)
    st = again.stats
    assert (st.manifests_present, st.manifests_written) == (3, 0)
    assert st.blobs_present + st.blobs_copied + st.blobs_mounted == 0


def test_docker_media_types_keep_docker_platform_digests(
    tmp_path: Path, registries: list[LocalRegistry], client: OCIClient, test_ca: LocalCA
) -> None:
    """A build's platform manifests are Docker v2s2 already: the Docker list names the same
    platform digests; only the index differs (a Docker list instead of an OCI index)."""
    certs = cert_dir_for(test_ca, tmp_path / "certs")
    src = _repo(registries[0])
    index, children = publish_two_platforms(tmp_path, client, src)
    dst = _repo(registries[1])
    desc = Mirror(client).copy(src.with_digest(index.digest), dst, docker=True)
    assert desc.media_type == DOCKER_LIST and desc.digest != index.digest
    body = _raw(f"{dst.name}@{desc.digest}", certs)
    listed = json.loads(body)
    assert listed["mediaType"] == DOCKER_LIST
    assert sorted(m["digest"] for m in listed["manifests"]) == sorted(c.digest for c in children)
    assert {m["mediaType"] for m in listed["manifests"]} == {DOCKER_MANIFEST}


def test_docker_media_types_convert_oci_manifests(
    tmp_path: Path, registries: list[LocalRegistry], client: OCIClient, test_ca: LocalCA
) -> None:
    certs = cert_dir_for(test_ca, tmp_path / "certs")
    src = _repo(registries[0])
    one = push_image_dir(client, src, write_dir_layout(tmp_path / "a", "amd64", "oci"))
    assert one.media_type == OCI_MANIFEST
    dst = _repo(registries[1])
    desc = Mirror(client).copy(src.with_digest(one.digest), dst, docker=True)
    manifest = json.loads(_raw(f"{dst.name}@{desc.digest}", certs))
    assert manifest["mediaType"] == DOCKER_MANIFEST
    assert manifest["config"]["mediaType"] == "application/vnd.docker.container.image.v1+json"
    assert manifest["layers"][0]["mediaType"] == (
        "application/vnd.docker.image.rootfs.diff.tar.gzip"
    )


def test_a_corrupted_blob_is_refused_and_nothing_is_written(
    tmp_path: Path, registries: list[LocalRegistry], client: OCIClient
) -> None:
    """The source answers a blob with one byte flipped (a consistent-looking lie): the copy
    fails naming the digest, and the target has no manifest of the image."""
    (tmp_path / "plain").mkdir()
    plain = LocalRegistry(tmp_path / "plain")
    proxy = FaultProxy(
        plain.port, script=["corrupt-consistent"] * 50,
        when=lambda method, path: method == "GET" and "/blobs/sha256:" in path,
    )
    try:
        src = Reference.parse(f"{proxy.host}/mirror/src:v1")
        one = push_image_dir(client, src, write_dir_layout(tmp_path / "a", "amd64", "x"))
        dst = _repo(registries[1])
        with pytest.raises(NetworkError) as err:
            Mirror(client).copy(src.with_digest(one.digest), dst)
        assert "content hashes to" in err.value.message
        assert proxy.counts["corrupt-consistent"] >= 1
        assert client.head_manifest(dst.with_digest(one.digest)) is None
        assert client.list_tags(dst) == []
    finally:
        proxy.stop()
        plain.stop()
