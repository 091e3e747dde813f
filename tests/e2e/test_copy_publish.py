"""`cannery copy` keeps the publish path's guarantees, against real registries (Debian's
docker-registry; the source behind the project's proxy where the test moves its tag): SRC is
read once, so every target gets one digest even when SRC's tag moves mid-run; a target tag on an
index from a newer lock is not moved back (exit 2, nothing written anywhere) unless --force."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cannery.oci import Descriptor, OCIClient, Reference, merge_index, move_tags, push_image_dir
from cannery.oci.manifest import OCI_INDEX
from cannery.oci.publish import LOCK_EPOCH
from cannery.tls import ssl_context
from tests.services.faultproxy import FaultProxy
from tests.services.registry import LocalRegistry, write_dir_layout

pytestmark = pytest.mark.e2e


@pytest.fixture
def client() -> Iterator[OCIClient]:
    with OCIClient(ssl_context(), retry_budget=5, backoff=0.01) as c:
        yield c


def _repo(reg: LocalRegistry | FaultProxy, tag: str = "v1") -> Reference:
    return Reference.parse(f"{reg.host}/copy/{uuid.uuid4().hex[:10]}:{tag}")


def _index(tmp: Path, client: OCIClient, repo: Reference, note: str, epoch: int) -> Descriptor:
    """A two-platform index by digest, as `cannery build` writes it (its lock epoch
    annotated); no tag moved."""
    children = [
        push_image_dir(client, repo, write_dir_layout(tmp / note / a, a, note, docker=True))
        for a in ("amd64", "arm64")
    ]
    return merge_index(client, repo, children, {LOCK_EPOCH: str(epoch)})


def _move_behind(reg: LocalRegistry, path: str, index: bytes) -> None:
    """Point ``path``'s tag v1 at ``index`` straight in ``reg`` (the registry behind the
    proxy), as a newer build finishing mid-run would."""
    put = httpx.put(f"http://{reg.host}/v2/{path}/manifests/v1", content=index,
                    headers={"Content-Type": OCI_INDEX})
    put.raise_for_status()


def _tag(client: OCIClient, ref: Reference) -> str | None:
    found = client.head_manifest(ref)
    return found.digest if found else None


def test_src_is_read_once_so_a_tag_moved_mid_run_gives_every_target_one_digest(
    tmp_path: Path, client: OCIClient, registry: LocalRegistry, cli
) -> None:  # type: ignore[no-untyped-def]
    """Once the copy has read SRC's tag and asks for anything else, a hook in the proxy in
    front of the source registry points the tag at another index (a newer build finishing
    mid-run). Both targets still get the index the tag named when the copy read it."""
    (tmp_path / "src").mkdir()
    backing = LocalRegistry(tmp_path / "src")
    src_path = f"copy/{uuid.uuid4().hex[:10]}"
    seen_tag = threading.Event()
    moved = threading.Event()
    retag: list[bytes] = []

    def hook(method: str, path: str) -> bool:
        """Called by the proxy before it forwards each request (never a fault: False)."""
        if path == f"/v2/{src_path}/manifests/v1" and method == "GET":
            seen_tag.set()
        elif seen_tag.is_set() and not moved.is_set() and retag:
            _move_behind(backing, src_path, retag[0])
            moved.set()
        return False

    proxy = FaultProxy(backing.port, when=hook)
    try:
        src = Reference.parse(f"{proxy.host}/{src_path}:v1")
        first = _index(tmp_path, client, src, "first", 100)
        second = _index(tmp_path, client, src, "second", 200)
        move_tags(client, src, first, ["v1"])
        retag.append(client.get_manifest(src.with_digest(second.digest))[0])
        one, two = _repo(registry), _repo(registry)
        res = cli("copy", str(src), one.name, two.name, "--json")
        assert res.code == 0, res.err
        assert moved.is_set() and _tag(client, src) == second.digest  # the tag did move
        got = {t["target"]: t["digest"] for t in json.loads(res.out)["targets"]}
        assert got == {f"{one.name}:v1": first.digest, f"{two.name}:v1": first.digest}
        assert _tag(client, one) == _tag(client, two) == first.digest
        # Read once: one GET of the tag, whatever the number of targets.
        tag_reads = [p for m, p, _ in proxy.log if p.endswith("/manifests/v1") and m == "GET"]
        assert len(tag_reads) == 1, proxy.log
    finally:
        proxy.stop()
        backing.stop()


def test_a_target_tag_on_a_newer_lock_is_not_moved_back_and_nothing_is_written(
    tmp_path: Path, client: OCIClient, registry: LocalRegistry, tls_registry: LocalRegistry,
    test_ca, cli,
) -> None:  # type: ignore[no-untyped-def]
    """SRC's index is from lock epoch 100. Of two targets, the first is empty and the second's
    tag is on an index from epoch 200: exit 2, one line naming that tag, and neither target
    holds SRC's index even by digest (the refusal comes before any copy). An older target
    tag moves; --force moves the newer one back, as `cannery build --force` does."""
    src = _repo(registry)
    old = _index(tmp_path, client, src, "old", 100)
    move_tags(client, src, old, ["v1"])
    empty = _repo(registry)
    with OCIClient(ssl_context(test_ca.ca_cert)) as tls:
        newer_target = _repo(tls_registry)
        newer = _index(tmp_path, tls, newer_target, "new", 200)
        move_tags(tls, newer_target, newer, ["v1"])

        res = cli("copy", str(src), empty.name, newer_target.name,
                  "--ca-cert", str(test_ca.ca_cert))
        assert res.code == 2, res.err
        lines = res.err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in res.err, res.err
        assert f"{newer_target.name}:v1 points at {newer.digest}" in lines[0]
        assert f"{LOCK_EPOCH} 200 > 100" in lines[0] and "nothing copied, no tag moved" in lines[0]
        assert _tag(client, empty) is None
        assert _tag(client, empty.with_digest(old.digest)) is None
        assert _tag(tls, newer_target) == newer.digest
        assert _tag(tls, newer_target.with_digest(old.digest)) is None

        # An older target tag (epoch 50) is moved forward.
        older_target = _repo(tls_registry)
        older = _index(tmp_path, tls, older_target, "older", 50)
        move_tags(tls, older_target, older, ["v1"])
        res = cli("copy", str(src), empty.name, older_target.name,
                  "--ca-cert", str(test_ca.ca_cert))
        assert res.code == 0, res.err
        assert f"{older_target.name}:v1@{old.digest} (tag moved)" in res.out
        assert _tag(client, empty) == _tag(tls, older_target) == old.digest

        res = cli("copy", str(src), newer_target.name, "--ca-cert", str(test_ca.ca_cert),
                  "--force")
        assert res.code == 0, res.err
        assert _tag(tls, newer_target) == old.digest


def test_a_tag_refused_mid_move_stops_the_rest_and_says_where_tags_moved(
    tmp_path: Path, client: OCIClient, registry: LocalRegistry, cli
) -> None:  # type: ignore[no-untyped-def]
    """The check before the copy passed, then a newer build moved the second target's tag
    (here: between the copy and the tag moves, by a hook in a proxy in front of it): move_tags'
    own check refuses it, exit 2, and the line says which targets' tag is on the copy."""
    src = _repo(registry)
    old = _index(tmp_path, client, src, "old", 100)
    move_tags(client, src, old, ["v1"])
    (tmp_path / "late").mkdir()
    late = LocalRegistry(tmp_path / "late")
    late_path = f"copy/{uuid.uuid4().hex[:10]}"
    newer_body: list[bytes] = []
    done = threading.Event()

    def hook(method: str, path: str) -> bool:
        # The first manifest PUT by digest in the late target: the copy is under way there.
        if method == "PUT" and "/manifests/sha256:" in path and newer_body and not done.is_set():
            _move_behind(late, late_path, newer_body[0])
            done.set()
        return False

    proxy = FaultProxy(late.port, when=hook)
    try:
        target = Reference.parse(f"{proxy.host}/{late_path}:v1")
        newer = _index(tmp_path, client, target, "new", 200)
        newer_body.append(client.get_manifest(target.with_digest(newer.digest))[0])
        first = _repo(registry)
        res = cli("copy", str(src), first.name, target.name)
        assert res.code == 2, res.err
        assert done.is_set()
        assert f"{target.name}:v1 points at {newer.digest}" in res.err, res.err
        assert f"(the tag is on the copy in: {first.name}:v1; not in: {target.name}:v1)" \
            in res.err, res.err
        assert _tag(client, first) == old.digest
        assert _tag(client, target) == newer.digest
    finally:
        proxy.stop()
        late.stop()
