"""Publishing against the hostile registry (issue 13, items 6, 7 and the trust checks of
item 10): a lying ``Docker-Content-Digest``, an index that does not read back, a child that is
not what its descriptor says, a HEAD without ``Content-Length``, a PUT stored then answered 503,
malformed JSON, and ``--merge-only`` legs whose descriptor files lie.

The CLI runs use the buildx backend through the fake ``docker`` of test_build_buildx.py (the one
thing that cannot run here); everything after the engine is real: cannery reads the registry,
merges and tags, and each test reads what the hostile registry stored.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cannery.download import resolve_url
from cannery.errors import NetworkError
from cannery.oci import (
    OCI_INDEX,
    OCI_MANIFEST,
    Credentials,
    Descriptor,
    DigestMismatch,
    NotFound,
    OCIClient,
    Reference,
    merge_index,
    move_tags,
)
from cannery.oci.manifest import digest_of
from cannery.tls import ssl_context
from tests.e2e.test_build_buildx import FAKE_DOCKER, catalog_text, fake_docker_dir
from tests.services.hostile import HostileRegistry
from tests.services.tlsca import LocalCA

pytestmark = pytest.mark.e2e

REPO = "bx/image"


@pytest.fixture
def reg(tmp_path: Path, test_ca: LocalCA) -> Iterator[HostileRegistry]:
    r = HostileRegistry(tmp_path / "reg", test_ca)
    yield r
    r.stop()


@pytest.fixture
def client(tmp_path: Path, test_ca: LocalCA) -> Iterator[OCIClient]:
    with OCIClient(ssl_context(test_ca.ca_cert), retry_budget=3, backoff=0.01,
                   credentials=Credentials({}, tmp_path)) as c:
        yield c


def _children(reg: HostileRegistry, note: str = "") -> list[Descriptor]:
    out = []
    for arch in ("amd64", "arm64"):
        digest, size = reg.store_image(REPO, arch, note)
        out.append(Descriptor(OCI_MANIFEST, digest, size, {"os": "linux", "architecture": arch}))
    return out


def _one_line(exc: pytest.ExceptionInfo[NetworkError]) -> str:
    assert exc.value.exit_code == 2 and "\n" not in str(exc.value)
    return str(exc.value)


# ------------------------------------------------------------------ the client and publish


def test_put_manifest_checks_docker_content_digest(reg: HostileRegistry, client: OCIClient) -> None:  # type: ignore[no-untyped-def]
    """The registry answers the index PUT naming other bytes: nothing is tagged."""
    repo = Reference.parse(f"{reg.host}/{REPO}:live")
    reg.fault("lie-digest", "PUT", "/manifests/sha256:")
    with pytest.raises(DigestMismatch) as exc:
        merge_index(client, repo, _children(reg), {})
    assert "registry stored sha256:" in _one_line(exc)
    assert reg.tags(REPO) == {}


def test_a_stored_put_answered_503_is_retried_to_one_result(  # type: ignore[no-untyped-def]
    reg: HostileRegistry, client: OCIClient
) -> None:
    repo = Reference.parse(f"{reg.host}/{REPO}:live")
    reg.fault("store-then-503", "PUT", "/manifests/")
    index = merge_index(client, repo, _children(reg), {})
    reg.fault("store-then-503", "PUT", "/manifests/live")
    assert move_tags(client, repo, index, ["live"]).moved == ["live"]
    assert reg.tags(REPO) == {"live": index.digest}
    puts = [s.url for s in reg.seen if s.method == "PUT"]
    assert puts == [f"{reg.url}/v2/{REPO}/manifests/{index.digest}"] * 2 + [
        f"{reg.url}/v2/{REPO}/manifests/live"] * 2


def test_move_tags_reads_the_index_back_before_any_tag(  # type: ignore[no-untyped-def]
    reg: HostileRegistry, client: OCIClient
) -> None:
    """The index reads back as other bytes (with a header that matches them), or not at all:
    no tag moves."""
    repo = Reference.parse(f"{reg.host}/{REPO}:live")
    index = merge_index(client, repo, _children(reg), {})
    reg.fault("set", "GET", f"/manifests/{index.digest}", arg='annotations={"x": "y"}')
    with pytest.raises(DigestMismatch) as exc:
        move_tags(client, repo, index, ["live", "stable"])
    assert "not the digest asked for" in _one_line(exc)
    assert reg.tags(REPO) == {}
    reg._manifest_path(REPO, index.digest).unlink()  # the registry lost it
    with pytest.raises(NotFound):
        move_tags(client, repo, index, ["live"])
    assert reg.tags(REPO) == {}


def test_merge_index_compares_each_child_with_the_registry(  # type: ignore[no-untyped-def]
    reg: HostileRegistry, client: OCIClient
) -> None:
    """A child whose size (or media type) is not what the registry holds is not listed in an
    index: nothing is written."""
    repo = Reference.parse(f"{reg.host}/{REPO}:live")
    children = _children(reg)
    before = reg.manifests(REPO)
    wrong = [Descriptor(c.media_type, c.digest, c.size + 1, c.platform) for c in children[:1]]
    for bad in (wrong[0], Descriptor("application/vnd.docker.distribution.manifest.v2+json",
                                     children[0].digest, children[0].size, children[0].platform)):
        with pytest.raises(NetworkError) as exc:
            merge_index(client, repo, [bad, children[1]], {})
        assert "is not in the registry as described" in _one_line(exc)
    assert reg.manifests(REPO) == before and reg.tags(REPO) == {}


def test_merge_index_with_heads_without_content_length(  # type: ignore[no-untyped-def]
    reg: HostileRegistry, client: OCIClient
) -> None:
    repo = Reference.parse(f"{reg.host}/{REPO}:live")
    children = _children(reg)
    reg.fault("no-length", "HEAD", "/manifests/", times=0)
    index = merge_index(client, repo, children, {})
    stored = json.loads(reg.manifest(REPO, index.digest) or b"{}")
    assert [m["size"] for m in stored["manifests"]] == [c.size for c in children]


def test_malformed_index_under_a_tag_names_the_field(  # type: ignore[no-untyped-def]
    reg: HostileRegistry, client: OCIClient
) -> None:
    from cannery.builder.execute import current_children

    repo = Reference.parse(f"{reg.host}/{REPO}:live")
    children = _children(reg)
    body = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX,
                       "manifests": [c.to_json() for c in children]}).encode()
    reg.store_manifest(REPO, body, OCI_INDEX, tag="live")
    for field, value in (("size", '"12"'), ("digest", '"sha256:zz"'), ("mediaType", None)):
        if value is None:
            reg.fault("drop", "GET", "/manifests/live", arg=f"manifests.1.{field}")
        else:
            reg.fault("set", "GET", "/manifests/live", arg=f"manifests.1.{field}={value}")
        with pytest.raises(NetworkError) as exc:
            current_children(client, repo, "live")
        assert _one_line(exc).startswith(f"{reg.host}: malformed answer: ")
        assert f"index.manifests[1].{field}: missing or not" in str(exc.value)


def test_lock_refuses_a_redirect_from_https_to_http(reg: HostileRegistry, test_ca: LocalCA) -> None:  # type: ignore[no-untyped-def]
    """`cannery lock` pins a URL's sha256: a redirect off TLS is refused before any plain-HTTP
    request (the registry's port answers both, and saw none)."""
    reg.store_blob(b"installer")
    url = f"{reg.url}/files/installer.run"
    reg.fault("redirect", "GET", "^/files/", arg="downgrade")
    with pytest.raises(NetworkError) as exc:
        resolve_url(url, ssl_context(test_ca.ca_cert))
    assert _one_line(exc) == (f"{url}: refusing the redirect to http://{reg.host}/files/"
                              "installer.run: a downgrade from HTTPS to plain HTTP")
    assert [s.url for s in reg.seen] == [url]


def test_lock_keeps_a_redirects_userinfo_out_of_the_message(  # type: ignore[no-untyped-def]
    reg: HostileRegistry, test_ca: LocalCA
) -> None:
    """Review: the refused redirect's ``user:password@`` is not repeated in the error."""
    reg.store_blob(b"installer")
    url = f"{reg.url}/files/installer.run"
    reg.fault("redirect", "GET", "^/files/", arg=f"http://u:Pw-lock-9@{reg.host}/files/x?sig=1")
    with pytest.raises(NetworkError) as exc:
        resolve_url(url, ssl_context(test_ca.ca_cert))
    assert _one_line(exc) == (f"{url}: refusing the redirect to http://{reg.host}/files/x: a "
                              "downgrade from HTTPS to plain HTTP")


# ------------------------------------------------------------------ through the CLI


def _world(tmp_path: Path, reg: HostileRegistry, ca: LocalCA, images: int = 1
           ) -> tuple[Path, dict[str, str], dict[str, dict[str, object]]]:
    """The buildx catalog in the hostile registry: the base image, and the platform images the
    fake ``docker`` says it built."""
    reg.store_image("bx/base", "amd64", tag="1")
    descs: dict[str, dict[str, object]] = {}
    for arch in ("amd64", "arm64"):
        digest, size = reg.store_image(REPO, arch, "built by buildx")
        descs[arch] = {"mediaType": OCI_MANIFEST, "digest": digest, "size": size}
    bindir = fake_docker_dir(tmp_path, FAKE_DOCKER.format(python=sys.executable))
    catalog = tmp_path / "catalog.toml"
    text = catalog_text(reg.host)
    if images == 2:
        text += text[text.index("[images.one]"):].replace("[images.one]", "[images.two]").replace(
            'tag = "bx-{cann}"', 'tag = "two-{cann}"')
    catalog.write_text(text)
    env = dict(
        os.environ,
        PATH=f"{bindir}:{os.environ['PATH']}",
        FAKE_DOCKER_LOG=str(tmp_path / "docker.log"),
        FAKE_DOCKER_AMD64=json.dumps(descs["amd64"]),
        FAKE_DOCKER_ARM64=json.dumps(descs["arm64"]),
        DOCKER_CONFIG=str(tmp_path / "no-docker"),
        CANNERY_CA_CERT=str(ca.ca_cert),
    )
    return catalog, env, descs


def _cannery(tmp_path: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cannery", *args], env=env, cwd=tmp_path,
                          capture_output=True, text=True, check=False, timeout=300)


def _legs(tmp_path: Path, catalog: Path, env: dict[str, str]) -> list[str]:
    digests = tmp_path / "digests"
    base = ["build", "--catalog", str(catalog), "--backend", "buildx", "--push",
            "--digest-dir", str(digests), "--log-dir", str(tmp_path / "logs")]
    for platform in ("linux/amd64", "linux/arm64"):
        leg = _cannery(tmp_path, *base, "--platform", platform, env=env)
        assert leg.returncode == 0, leg.stdout + leg.stderr
    return base


def test_merge_only_checks_each_descriptor_against_the_registry(  # type: ignore[no-untyped-def]
    tmp_path: Path, reg: HostileRegistry, test_ca: LocalCA
) -> None:
    """A leg's file that lies about the size, the media type, or the platform (another
    platform's manifest): exit 2, one line naming the file, no index, no tag."""
    catalog, env, descs = _world(tmp_path, reg, test_ca)
    base = _legs(tmp_path, catalog, env)
    leg = tmp_path / "digests" / "one" / "linux-arm64.json"
    good = json.loads(leg.read_text())
    lies = {
        "size": dict(good, size=int(good["size"]) + 7),
        "media type": dict(good, mediaType="application/vnd.docker.distribution.manifest.v2+json"),
        "platform": dict(good, digest=descs["amd64"]["digest"], size=descs["amd64"]["size"]),
    }
    manifests = reg.manifests(REPO)
    # The legs tag each platform manifest TAG-<arch> (kept from "delete untagged" GC); no other.
    legs = reg.tags(REPO)
    assert sorted(legs) == ["bx-9.1.0-amd64", "bx-9.1.0-arm64"]
    for what, lie in lies.items():
        leg.write_text(json.dumps(lie))
        proc = _cannery(tmp_path, *base, "--merge-only", env=env)
        failed = [line for line in proc.stdout.splitlines() if "FAILED" in line]
        assert proc.returncode == 2 and len(failed) == 1, (what, proc.stdout, proc.stderr)
        assert str(leg) in failed[0] and "the registry holds" in failed[0], what
        assert "Traceback" not in proc.stderr
        assert reg.tags(REPO) == legs and reg.manifests(REPO) == manifests, what
    leg.write_text(json.dumps(good))
    proc = _cannery(tmp_path, *base, "--merge-only", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The image tag, and the referrers fallback's sha256-<hex> tags (one per attested manifest).
    assert [t for t in reg.tags(REPO) if not t.startswith("sha256-") and t not in legs] == [
        "bx-9.1.0"
    ]


def test_merge_only_with_heads_without_content_length(  # type: ignore[no-untyped-def]
    tmp_path: Path, reg: HostileRegistry, test_ca: LocalCA
) -> None:
    """Every HEAD answered without Content-Length: the index still lists each child with the
    size of its bytes (never 0)."""
    catalog, env, descs = _world(tmp_path, reg, test_ca)
    base = _legs(tmp_path, catalog, env)
    reg.fault("no-length", "HEAD", "", times=0)
    proc = _cannery(tmp_path, *base, "--merge-only", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    index = json.loads(reg.manifest(REPO, reg.tags(REPO)["bx-9.1.0"]) or b"{}")
    sizes = {m["platform"]["architecture"]: m["size"] for m in index["manifests"]}
    assert sizes == {arch: d["size"] for arch, d in descs.items()}


def test_malformed_answer_ends_that_image_and_the_others_go_on(  # type: ignore[no-untyped-def]
    tmp_path: Path, reg: HostileRegistry, test_ca: LocalCA
) -> None:
    """Image one's tag names an index whose second entry has no digest: that image ends with
    one line naming the registry and the field (exit 2); image two is built and tagged."""
    catalog, env, _ = _world(tmp_path, reg, test_ca, images=2)
    broken = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
        {"mediaType": OCI_MANIFEST, "digest": "sha256:" + "3" * 64, "size": 1,
         "platform": {"os": "linux", "architecture": "amd64"}},
        {"mediaType": OCI_MANIFEST, "size": 1, "platform": {"os": "linux",
                                                            "architecture": "arm64"}}]}).encode()
    reg.store_manifest(REPO, broken, OCI_INDEX, tag="bx-9.1.0")
    proc = _cannery(tmp_path, "build", "--catalog", str(catalog), "--backend", "buildx",
                    "--push", "--log-dir", str(tmp_path / "logs"), env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    failed = [line for line in proc.stdout.splitlines() if "FAILED" in line]
    assert len(failed) == 1 and failed[0].startswith("one: FAILED: "), proc.stdout
    assert f"{reg.host}: malformed answer: " in failed[0]
    assert "index.manifests[1].digest: missing or not a valid digest" in failed[0]
    assert "Traceback" not in proc.stderr
    tags = reg.tags(REPO)
    assert tags["bx-9.1.0"] == digest_of(broken)  # image one's tag untouched
    assert "two-9.1.0" in tags  # image two went on


def test_verify_names_the_malformed_field(  # type: ignore[no-untyped-def]
    tmp_path: Path, reg: HostileRegistry, test_ca: LocalCA
) -> None:
    """verify against an index entry with an invalid digest, then against a platform image
    whose config has no ``os``: exit 2, one line naming the registry and the field."""
    catalog, env, descs = _world(tmp_path, reg, test_ca)
    build = _cannery(tmp_path, "build", "--catalog", str(catalog), "--backend", "buildx",
                     "--push", "--log-dir", str(tmp_path / "logs"), env=env)
    assert build.returncode == 0, build.stdout + build.stderr
    ref = f"{reg.host}/{REPO}:bx-9.1.0"
    verify = ("verify", ref, "--catalog", str(catalog), "--no-runtime")

    reg.fault("set", "GET", "/manifests/bx-9.1.0", arg='manifests.0.digest="sha256:zz"')
    proc = _cannery(tmp_path, *verify, env=env)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stdout + proc.stderr
    assert f"{reg.host}: malformed answer: " in lines[0]
    assert "index.manifests[0].digest: missing or not a valid digest" in lines[0]

    config = json.dumps({"architecture": "amd64", "config": {}}).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": reg.store_blob(config), "size": len(config)},
        "layers": []}).encode()
    amd64 = reg.store_manifest(REPO, manifest, OCI_MANIFEST)
    index = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
        {"mediaType": OCI_MANIFEST, "digest": amd64, "size": len(manifest),
         "platform": {"os": "linux", "architecture": "amd64"}},
        {**descs["arm64"], "platform": {"os": "linux", "architecture": "arm64"}}]}).encode()
    reg.store_manifest(REPO, index, OCI_INDEX, tag="bx-9.1.0")
    proc = _cannery(tmp_path, *verify, env=env)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stdout + proc.stderr
    assert f"{reg.host}: malformed answer: " in lines[0] and "(config).os: missing" in lines[0]


def test_verify_rebuild_reads_the_registry_manifest_strictly(  # type: ignore[no-untyped-def]
    reg: HostileRegistry, client: OCIClient, tmp_path: Path
) -> None:
    """`verify --rebuild` compares its layout with the registry's manifest: a manifest whose
    `layers` is not a list is one line naming the field (exit 2), never a crash."""
    from cannery.verify.rebuild import compare

    config = reg.store_blob(b'{"architecture":"amd64","os":"linux"}')
    body = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": "x",
                       "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                  "digest": config, "size": 37}}).encode()
    digest = reg.store_manifest(REPO, body, OCI_MANIFEST)
    layout = tmp_path / "layout"
    layout.mkdir()
    (layout / "manifest.json").write_text('{"schemaVersion":2,"layers":[]}')
    with pytest.raises(NetworkError) as exc:
        compare(client, Reference.parse(f"{reg.host}/{REPO}"), digest, layout, "linux/amd64")
    assert _one_line(exc).startswith(f"{reg.host}: malformed answer: ")
    assert ".layers: missing or not a list" in str(exc.value)
