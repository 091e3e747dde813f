"""Bounded reads (issues 13 and 33, item 2) against the hostile registry and an HTTPS server:
no answer can make cannery hold more than its caps in memory, inflate a bomb, or hash bytes
other than those sent. The memory tests run cannery as a child process that reports its own
peak resident memory (``VmHWM``, see tests/services/peak.py: not ``ru_maxrss``, which a child
forked from pytest inherits); the figures are printed."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import json
import os
import ssl
import tarfile
import tracemalloc
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from cannery.errors import NetworkError
from cannery.oci import Credentials, DigestMismatch, NotFound, OCIClient, Reference
from cannery.tls import ssl_context
from tests.e2e.test_build_buildx import catalog_text
from tests.services.hostile import OCI_MANIFEST, HostileRegistry
from tests.services.peak import Measured, run_measured
from tests.services.tlsca import HTTPSServer, LocalCA

pytestmark = pytest.mark.e2e


@pytest.fixture
def reg(tmp_path: Path, test_ca: LocalCA) -> Iterator[HostileRegistry]:
    r = HostileRegistry(tmp_path / "reg", test_ca)
    yield r
    r.stop()


@pytest.fixture
def client(tmp_path: Path, test_ca: LocalCA) -> Iterator[OCIClient]:
    with OCIClient(ssl_context(test_ca.ca_cert), retry_budget=2, backoff=0.01,
                   credentials=Credentials({}, tmp_path)) as c:
        yield c


INSTALL_ACTION = (
    '\n[ci]\ninstall_action = "example/setup-cannery@0123456789abcdef0123456789abcdef01234567"\n'
)


def _lock(tmp_path: Path, reg: HostileRegistry, ca: LocalCA) -> tuple[int, str, int]:
    """``cannery lock`` of a catalog whose one moving input is a base image in ``reg``, as a
    child process: (exit status, stderr, peak resident memory of that process in KiB)."""
    # CI's install of cannery pinned by an action: this lock's one input to resolve is the base
    (tmp_path / "catalog.toml").write_text(catalog_text(reg.host) + INSTALL_ACTION)
    (tmp_path / "cannery.lock").unlink(missing_ok=True)
    env = dict(os.environ, DOCKER_CONFIG=str(tmp_path / "no-docker"))
    run = run_measured(["lock", "--catalog", str(tmp_path / "catalog.toml"),
                        "--ca-cert", str(ca.ca_cert)], tmp_path, env)
    return run.code, run.err, run.peak_kib


@pytest.mark.parametrize("fault", ["gzip-bomb", "oversized-stream"])
def test_bomb_or_endless_manifest_is_one_line_exit_2_in_bounded_memory(  # type: ignore[no-untyped-def]
    fault: str, tmp_path: Path, reg: HostileRegistry, test_ca: LocalCA, capsys
) -> None:
    """A 204 KB gzip answer that inflates to 209 MB, and a 209 MB body with no Content-Length:
    each ends ``cannery lock`` with one line, exit 2, no lock written, and a peak RSS near the
    normal run's."""
    reg.store_image("bx/base", "amd64", tag="1")
    code, err, normal = _lock(tmp_path, reg, test_ca)
    assert code == 0, err
    reg.fault(fault, "GET", "/manifests/1", arg="200" if fault == "gzip-bomb" else str(200 << 20))
    code, err, peak = _lock(tmp_path, reg, test_ca)
    lines = [line for line in err.splitlines() if not line.startswith("lock: ")]  # progress
    assert code == 2 and len(lines) == 1, err
    want = ("Content-Encoding gzip although identity was asked for" if fault == "gzip-bomb"
            else "answer is over the 4 MiB limit")
    assert want in lines[0] and f"{reg.url}/v2/bx/base/manifests/1" in lines[0]
    assert not (tmp_path / "cannery.lock").exists()
    body = "204 KB gzip of 200 MiB" if fault == "gzip-bomb" else "200 MiB, no length"
    with capsys.disabled():
        print(f"\n{fault} ({body}): peak VmHWM of `cannery lock` {peak / 1024:.1f} MiB "
              f"(normal run {normal / 1024:.1f} MiB)")
    assert peak < normal + 16 * 1024, (peak, normal)  # KiB: within 16 MiB of a normal run


def test_manifest_over_4_mib_is_refused_by_its_length(
    reg: HostileRegistry, client: OCIClient
) -> None:
    reg.store_image("team/app", "amd64", tag="t")
    reg.fault("oversized", "GET", "/manifests/t", arg=str((4 << 20) + 1))
    with pytest.raises(NetworkError) as exc:
        client.get_manifest(Reference.parse(f"{reg.host}/team/app:t"))
    assert str(exc.value) == (f"{reg.url}/v2/team/app/manifests/t: answer of "
                              f"{(4 << 20) + 1} bytes is over the 4 MiB limit")
    reg.fault("oversized", "GET", "/manifests/t", arg=str(4 << 20))  # at the cap: accepted
    body, _ = client.get_manifest(Reference.parse(f"{reg.host}/team/app:t"))
    assert len(body) == 4 << 20


def test_config_over_the_configured_cap_is_refused(  # type: ignore[no-untyped-def]
    tmp_path: Path, reg: HostileRegistry, test_ca: LocalCA
) -> None:
    small = reg.store_blob(b"{}" + b" " * 1000)
    big = reg.store_blob(b"{}" + b" " * 5000)
    repo = Reference.parse(f"{reg.host}/team/app:t")
    with OCIClient(ssl_context(test_ca.ca_cert), max_config=4096,
                   credentials=Credentials({}, tmp_path)) as c:
        assert len(c.get_blob(repo, small)) == 1002
        with pytest.raises(NetworkError) as exc:
            c.get_blob(repo, big)
    assert str(exc.value).endswith("answer of 5002 bytes is over the 4096 bytes limit")
    assert exc.value.exit_code == 2


def test_huge_error_body_is_not_read(reg: HostileRegistry, client: OCIClient) -> None:
    """A 404 with a 200 MiB body (no length): one line, and the client kept at most the
    64 KiB it reads of an error."""
    reg.fault("huge-error", "GET", "/manifests/t")
    tracemalloc.start()
    try:
        with pytest.raises(NotFound) as exc:
            client.get_manifest(Reference.parse(f"{reg.host}/team/app:t"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(exc.value) == f"{reg.host}/team/app:t: not found in the registry"
    assert peak < 4 << 20, peak


def test_token_answer_over_its_cap_is_refused(tmp_path: Path, test_ca: LocalCA) -> None:
    reg = HostileRegistry(tmp_path / "bearer", test_ca, auth="bearer")
    reg.fault("oversized-stream", "GET", "^/token", arg=str(50 << 20))
    try:
        with OCIClient(ssl_context(test_ca.ca_cert), credentials=Credentials({}, tmp_path)) as c, \
                pytest.raises(NetworkError) as exc:
            c.head_manifest(Reference.parse(f"{reg.host}/team/app:t"))
        assert str(exc.value) == (f"{reg.url}/token: answer is over the 1 MiB limit")
    finally:
        reg.stop()


def test_fetch_blob_streams_to_disk_and_checks_the_digest(  # type: ignore[no-untyped-def]
    tmp_path: Path, reg: HostileRegistry, client: OCIClient
) -> None:
    data = os.urandom(1 << 16) * 320  # 20 MiB
    digest = reg.store_blob(data)
    repo = Reference.parse(f"{reg.host}/team/app:t")
    dest = tmp_path / "blob"
    tracemalloc.start()
    try:
        assert client.fetch_blob(repo, digest, dest, size=len(data)) == len(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 6 << 20, peak  # a few 1 MiB chunks, never the 20 MiB blob
    assert hashlib.sha256(dest.read_bytes()).hexdigest() == digest.partition(":")[2]

    # Other bytes under a digest: refused, and nothing lands at the destination.
    forged = "sha256:" + "1" * 64
    (reg.root / "blobs" / forged.partition(":")[2]).write_bytes(b"not what the digest says")
    with pytest.raises(DigestMismatch):
        client.fetch_blob(repo, forged, tmp_path / "forged")
    with pytest.raises(NetworkError, match="answer of 20971520 bytes is over the 5 bytes limit"):
        client.fetch_blob(repo, digest, tmp_path / "short", size=5)
    with pytest.raises(NetworkError, match="registry sent 20971520 bytes, the descriptor says"):
        client.fetch_blob(repo, digest, tmp_path / "long", size=len(data) + 1)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "reg") == ["blob"]


def test_get_blob_checks_the_digest(reg: HostileRegistry, client: OCIClient) -> None:
    forged = "sha256:" + "2" * 64
    (reg.root / "blobs").mkdir(exist_ok=True)
    (reg.root / "blobs" / forged.partition(":")[2]).write_bytes(b'{"architecture":"arm64"}')
    with pytest.raises(DigestMismatch) as exc:
        client.get_blob(Reference.parse(f"{reg.host}/team/app:t"), forged)
    assert exc.value.exit_code == 2 and "content hashes to sha256:" in str(exc.value)


def test_head_without_content_length_never_gives_size_0(
    reg: HostileRegistry, client: OCIClient
) -> None:
    digest, size = reg.store_image("team/app", "arm64", tag="t")
    repo = Reference.parse(f"{reg.host}/team/app:t")
    for ref in (repo, repo.with_digest(digest)):
        reg.fault("no-length", "HEAD", "/manifests/")
        found = client.head_manifest(ref)
        assert found is not None and (found.digest, found.size) == (digest, size)
    assert [s.method for s in reg.seen][-2:] == ["HEAD", "GET"]  # the size came from the bytes


# ------------------------------------------------------- verify --rebuild's layers (issue 33)


def _zeros_layer(mib: int, noise: int = 0) -> bytes:
    """A gzip tar layer holding one file ``big`` of ``mib`` MiB, each MiB ``noise`` random
    bytes then zeros, compressed a MiB at a time (never whole in memory): without noise,
    1 GiB is about 1 MiB on the wire; 12 KiB of noise a MiB keeps it within the ratio cap."""
    comp = zlib.compressobj(9 if not noise else 1, zlib.DEFLATED, 31)
    info = tarfile.TarInfo("big")
    info.size, info.mode = mib << 20, 0o644
    zeros = bytes((1 << 20) - noise)
    parts = [comp.compress(info.tobuf())]
    for _ in range(mib):
        parts += [comp.compress(os.urandom(noise)), comp.compress(zeros)]
    parts.append(comp.compress(bytes(1024)))  # the end-of-archive blocks
    return b"".join(parts) + comp.flush()


def _small_layer(data: bytes) -> bytes:
    raw = tarfile.TarInfo("big")
    raw.size, raw.mode = len(data), 0o644
    return gzip.compress(raw.tobuf() + data + bytes(-len(data) % 512) + bytes(1024), mtime=0)


def _manifest(config: str, layer: str, size: int) -> bytes:
    return json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": config, "size": 37},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": layer, "size": size}],
    }).encode()


def _served(reg: HostileRegistry, layer: bytes) -> tuple[str, str]:
    """The registry's platform manifest (one layer): (its digest, the layer's digest)."""
    config = reg.store_blob(b'{"architecture":"amd64","os":"linux"}')
    digest = reg.store_blob(layer)
    return reg.store_manifest("team/app", _manifest(config, digest, len(layer)),
                              OCI_MANIFEST), digest


def _rebuilt(tmp_path: Path) -> Path:
    """A rebuilt `dir:` layout whose one layer differs from the registry's."""
    layout = tmp_path / "layout"
    layout.mkdir(exist_ok=True)
    config = b'{"architecture":"amd64","os":"linux"}'
    layer = _small_layer(b"rebuilt")
    for blob in (config, layer):
        (layout / hashlib.sha256(blob).hexdigest()).write_bytes(blob)
    (layout / "manifest.json").write_bytes(_manifest(
        "sha256:" + hashlib.sha256(config).hexdigest(),
        "sha256:" + hashlib.sha256(layer).hexdigest(), len(layer)))
    return layout


# The step of `cannery verify --rebuild` that reads the registry's layer (compare(), after the
# rebuild), as a child process, errors shown as the CLI shows them. Not the whole command: its
# first step rebuilds the image with buildah, minutes under qemu, and reads no registry layer.
_COMPARE = """\
import sys
from pathlib import Path
from cannery.errors import FatalError
from cannery.oci import Credentials, OCIClient, Reference
from cannery.tls import ssl_context
from cannery.verify.rebuild import compare
ca, repo, digest, layout = sys.argv[1:]
with OCIClient(ssl_context(Path(ca)), credentials=Credentials({}, Path(layout))) as client:
    try:
        print(compare(client, Reference.parse(repo), digest, Path(layout), "linux/amd64").detail)
    except FatalError as exc:
        print(f"cannery: error: {exc.message}", file=sys.stderr)
        sys.exit(exc.exit_code)
"""


def _compare_in_child(
    tmp_path: Path, reg: HostileRegistry, ca: LocalCA, layer: bytes
) -> tuple[str, Measured]:
    """The rebuilt layout against a registry manifest whose one layer is ``layer``, compared
    in a child that measures its own peak: (the layer's digest, the run)."""
    script = tmp_path / "compare.py"
    script.write_text(_COMPARE)
    digest, layer_digest = _served(reg, layer)
    env = dict(os.environ, DOCKER_CONFIG=str(tmp_path / "no-docker"))
    return layer_digest, run_measured(
        ["--script", str(script), str(ca.ca_cert), f"{reg.host}/team/app", digest,
         str(_rebuilt(tmp_path))], tmp_path, env)


def test_verify_rebuild_refuses_a_layer_bomb_in_bounded_memory(  # type: ignore[no-untyped-def]
    tmp_path: Path, reg: HostileRegistry, test_ca: LocalCA, capsys
) -> None:
    """A 1 MiB layer under a valid digest that inflates to 1 GiB of zeros: the comparison
    stops at the inflation ratio, one line naming the layer, exit 2, in well under 200 MiB
    (it used to inflate it whole: 2 GiB). A normal layer's comparison is measured beside it."""
    _, normal = _compare_in_child(tmp_path, reg, test_ca, _small_layer(b"registry"))
    assert normal.code == 0 and "first differing layer 1 of 1: big (content)" in normal.out, \
        normal.err
    bomb = _zeros_layer(1024)
    layer_digest, run = _compare_in_child(tmp_path, reg, test_ca, bomb)
    with capsys.disabled():
        print(f"\nverify --rebuild, a {len(bomb) / (1 << 20):.2f} MiB layer of 1 GiB: peak "
              f"VmHWM {run.peak_mib:.1f} MiB (a normal layer: {normal.peak_mib:.1f} MiB)")
    assert run.peak_kib < 200 << 10, run.peak_kib
    lines = run.err.strip().splitlines()
    assert run.code == 2 and len(lines) == 1, run.out + run.err
    assert lines[0] == (f"cannery: error: {reg.host}/team/app@{layer_digest} (layer 1 of 1): "
                        "inflates to more than 100 times its compressed size "
                        "(a decompression bomb?)")


def test_verify_rebuild_hashes_a_large_file_a_chunk_at_a_time(  # type: ignore[no-untyped-def]
    tmp_path: Path, reg: HostileRegistry, test_ca: LocalCA, capsys
) -> None:
    """A 300 MiB file in a 5 MiB layer (within the ratio cap): compared, naming the file, in
    well under the file's size of memory: it is hashed as it is inflated, never held whole."""
    layer = _zeros_layer(300, noise=12 << 10)
    _, run = _compare_in_child(tmp_path, reg, test_ca, layer)
    with capsys.disabled():
        print(f"\nverify --rebuild, a 300 MiB file in a {len(layer) / (1 << 20):.1f} MiB layer: "
              f"peak VmHWM {run.peak_mib:.1f} MiB")
    assert run.code == 0 and "first differing layer 1 of 1: big (content)" in run.out, run.err
    assert run.peak_kib < 200 << 10, run.peak_kib


def test_verify_rebuild_reads_no_more_of_a_layer_than_its_descriptor_says(
    tmp_path: Path, reg: HostileRegistry, client: OCIClient
) -> None:
    """A registry that streams a layer past the size its manifest gives (without a length)
    is cut off at that size, one line naming the blob: never read to the end."""
    from cannery.verify.rebuild import compare

    layer = _small_layer(b"registry")
    digest, layer_digest = _served(reg, layer)
    reg.fault("oversized-stream", "GET", f"/blobs/{layer_digest}", arg=str(64 << 20))
    with pytest.raises(NetworkError) as exc:
        compare(client, Reference.parse(f"{reg.host}/team/app"), digest, _rebuilt(tmp_path),
                "linux/amd64")
    assert str(exc.value) == (f"{reg.url}/v2/team/app/blobs/{layer_digest}: answer is over "
                              f"the {len(layer)} bytes limit")
    assert exc.value.exit_code == 2


# ------------------------------------------------------------ lock's URL resolver (issue 33)


class _Encoded(http.server.BaseHTTPRequestHandler):
    """``/honest``: gzip (Content-Encoding) only when the request accepts it, as a CDN does;
    ``/forced``: gzip whatever was asked; ``/stream``: ``BODY`` with no Content-Length.
    Records each request's Accept-Encoding."""

    BODY = b"#!/bin/sh\n" + b"echo stand-in\n" * 4000
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        accept = self.headers.get("Accept-Encoding", "")
        self.seen.append(accept)
        gzipped = self.path == "/forced" or (self.path == "/honest" and "gzip" in accept)
        body = gzip.compress(self.BODY, mtime=0) if gzipped else self.BODY
        self.send_response(200)
        if gzipped:
            self.send_header("Content-Encoding", "gzip")
        if self.path != "/stream":
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        if self.path == "/stream":
            self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def encoded(test_ca: LocalCA) -> Iterator[str]:
    server = HTTPSServer(_Encoded, test_ca)
    _Encoded.seen.clear()
    yield server.url
    server.stop()


def test_url_resolver_asks_for_identity_and_hashes_the_bytes_as_sent(
    encoded: str, test_ca: LocalCA
) -> None:
    """The lock's sha256 of a `url` input (resolve_url's) is of the bytes the build's `curl`
    saves: the resolver asks for no encoding, so a server that compresses on request sends
    the file as it is."""
    from cannery.download import resolve_url

    ctx = ssl.create_default_context(cafile=str(test_ca.ca_cert))
    sha, size = resolve_url(f"{encoded}/honest", ctx)
    assert (sha, size) == (hashlib.sha256(_Encoded.BODY).hexdigest(), len(_Encoded.BODY))
    assert _Encoded.seen == ["identity"]


def test_url_resolver_refuses_an_answer_in_another_encoding(
    encoded: str, test_ca: LocalCA, tmp_path: Path
) -> None:
    """A server that gzips although identity was asked: one line naming the URL and the
    encoding, exit 2; nothing inflated, nothing kept."""
    from cannery.download import resolve_url

    ctx = ssl.create_default_context(cafile=str(test_ca.ca_cert))
    with pytest.raises(NetworkError) as exc:
        resolve_url(f"{encoded}/forced", ctx, into=tmp_path / "kept")
    assert str(exc.value) == (f"{encoded}/forced: answered with Content-Encoding gzip although "
                              "identity was asked for")
    assert exc.value.exit_code == 2
    assert not (tmp_path / "kept").exists()


def test_url_resolver_stops_at_its_size_limit(encoded: str, test_ca: LocalCA) -> None:
    """An answer past the limit is refused by its Content-Length before it is read, and,
    sent without one, as soon as it passes the limit."""
    from cannery.download import resolve_url

    ctx = ssl.create_default_context(cafile=str(test_ca.ca_cert))
    limit = len(_Encoded.BODY) - 1
    with pytest.raises(NetworkError) as exc:
        resolve_url(f"{encoded}/honest", ctx, limit=limit)
    assert str(exc.value) == (f"{encoded}/honest: answer of {len(_Encoded.BODY)} bytes is "
                              f"over the {limit} bytes limit")
    with pytest.raises(NetworkError) as exc:
        resolve_url(f"{encoded}/stream", ctx, limit=limit)
    assert str(exc.value) == f"{encoded}/stream: answer is over the {limit} bytes limit"
    assert resolve_url(f"{encoded}/stream", ctx, limit=len(_Encoded.BODY))[1] == len(
        _Encoded.BODY)
