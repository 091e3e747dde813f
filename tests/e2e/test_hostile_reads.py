"""Bounded reads (issue 13, item 2) against the hostile registry: no answer can make cannery
hold more than its caps in memory. The gzip-bomb and oversized-body tests run ``cannery lock``
as a child process and compare its peak RSS (``getrusage(RUSAGE_SELF)`` of that process, read
as it exits) with a normal run's; the figures are printed."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from cannery.errors import NetworkError
from cannery.oci import Credentials, DigestMismatch, NotFound, OCIClient, Reference
from cannery.tls import ssl_context
from tests.e2e.test_build_buildx import CATALOG
from tests.services.hostile import HostileRegistry
from tests.services.tlsca import LocalCA

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


# `python -m cannery` that writes its own peak RSS (RUSAGE_SELF: the cannery process alone, not
# a child it starts such as uv) to the file named first, as it exits.
_MEASURED = (
    "import atexit, resource, runpy, sys\n"
    "out = sys.argv.pop(1)\n"
    "atexit.register(lambda: open(out, 'w').write(\n"
    "    str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)))\n"
    "sys.argv[0] = 'cannery'\n"
    "runpy.run_module('cannery', run_name='__main__', alter_sys=True)\n"
)


def _lock(tmp_path: Path, reg: HostileRegistry, ca: LocalCA) -> tuple[int, str, int]:
    """``cannery lock`` of a catalog whose one moving input is a base image in ``reg``, as a
    child process: (exit status, stderr, peak RSS of the cannery process in KiB)."""
    (tmp_path / "catalog.toml").write_text(CATALOG.format(host=reg.host))
    (tmp_path / "cannery.lock").unlink(missing_ok=True)
    env = dict(os.environ, DOCKER_CONFIG=str(tmp_path / "no-docker"))
    rss = tmp_path / "rss"
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURED, str(rss), "lock", "--catalog",
         str(tmp_path / "catalog.toml"), "--ca-cert", str(ca.ca_cert)],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, check=False, timeout=300,
    )
    return proc.returncode, proc.stderr, int(rss.read_text())


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
        print(f"\n{fault} ({body}): peak RSS of `cannery lock` {peak / 1024:.1f} MiB "
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
