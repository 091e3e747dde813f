"""Tag moves report what happened (issue 13, item 4), against Debian's real docker-registry on
127.0.0.1, through the project's fault proxy where an answer must be lost: a PUT the registry
applied but whose answer never arrived is settled by reading the tag back; one whose read-back
fails too is reported as uncertain; a tag built from a newer lock is not moved back. Each test
reads the tags straight from the registry (not through the proxy) to check the report."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

import httpx
import pytest

from cannery.builder.execute import ImageResult
from cannery.commands.build import tag_summary
from cannery.oci import Descriptor, OCIClient, Reference, merge_index, move_tags, push_image_dir
from cannery.oci.manifest import MANIFEST_TYPES
from cannery.oci.publish import LOCK_EPOCH, TagMoves
from cannery.tls import ssl_context
from tests.services.faultproxy import FaultProxy
from tests.services.registry import LocalRegistry, write_dir_layout

pytestmark = pytest.mark.e2e


def _client() -> OCIClient:
    return OCIClient(ssl_context(), retry_budget=0.5, backoff=0.01, backoff_cap=0.05)


def _index(tmp: Path, client: OCIClient, repo: Reference, note: str, epoch: int) -> Descriptor:
    children = [
        push_image_dir(client, repo, write_dir_layout(tmp / f"{note}-{arch}", arch, note))
        for arch in ("amd64", "arm64")
    ]
    return merge_index(client, repo, children, {LOCK_EPOCH: str(epoch)})


def _tag(registry: LocalRegistry, repo: str, tag: str) -> str | None:
    r = httpx.get(f"{registry.url}/v2/{repo}/manifests/{tag}", headers={"Accept": MANIFEST_TYPES})
    if r.status_code == 404:
        return None
    r.raise_for_status()
    return "sha256:" + hashlib.sha256(r.content).hexdigest()


@pytest.fixture
def setup(registry: LocalRegistry, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A repository with tags t1, t2 on an old index (epoch 1000) and a new index (epoch 2000)
    pushed by digest only."""
    name = f"tags/{uuid.uuid4().hex[:8]}"
    with _client() as client:
        repo = Reference.parse(f"{registry.host}/{name}")
        old = _index(tmp_path, client, repo, "old", 1000)
        assert move_tags(client, repo, old, ["t1", "t2"]).moved == ["t1", "t2"]
        new = _index(tmp_path, client, repo, "new", 2000)
    return name, old, new


def test_a_lost_answer_is_settled_by_reading_the_tag_back(registry, setup) -> None:  # type: ignore[no-untyped-def]
    name, _old, new = setup
    # Every PUT of t1 reaches the registry, which applies it; the proxy drops each answer.
    proxy = FaultProxy(registry.port, script=["drop-after"] * 100,
                       when=lambda m, p: m == "PUT" and p.endswith("/manifests/t1"))
    try:
        with _client() as client:
            moves = move_tags(client, Reference.parse(f"{proxy.host}/{name}"), new, ["t1", "t2"],
                              lock_epoch=2000)
    finally:
        proxy.stop()
    assert proxy.counts["drop-after"] >= 1
    assert moves.error is None
    assert moves.moved == ["t1", "t2"] and moves.settled == ["t1"]
    assert _tag(registry, name, "t1") == _tag(registry, name, "t2") == new.digest
    result = ImageResult("img", name, ["t1", "t2"], tag_moves=moves)
    assert tag_summary(result).startswith("moved t1, t2 (t1: the registry's answer was lost")
    assert result.to_json()["tags_moved"] == ["t1", "t2"]


def test_an_unsettled_move_is_uncertain_and_stops_the_rest(registry, setup) -> None:  # type: ignore[no-untyped-def]
    name, old, new = setup
    put_seen: list[str] = []

    def when(method: str, path: str) -> bool:
        """From t1's first PUT on, every request for t1 is applied and its answer dropped."""
        if method == "PUT" and path.endswith("/manifests/t1"):
            put_seen.append(path)
        return bool(put_seen) and path.endswith("/manifests/t1")

    proxy = FaultProxy(registry.port, script=["drop-after"] * 200, when=when)
    try:
        with _client() as client:
            moves = move_tags(client, Reference.parse(f"{proxy.host}/{name}"), new, ["t1", "t2"],
                              lock_epoch=2000)
    finally:
        proxy.stop()
    assert moves.uncertain == ["t1"] and moves.not_moved == ["t2"] and moves.moved == []
    assert moves.error and "\n" not in moves.error and "may have moved" in moves.error
    assert moves.exit_code == 2
    # What the registry holds: t1 did move (the PUT was applied), t2 did not.
    assert _tag(registry, name, "t1") == new.digest
    assert _tag(registry, name, "t2") == old.digest
    summary = tag_summary(ImageResult("img", name, ["t1", "t2"], tag_moves=moves))
    assert "no tag moved" not in summary
    assert "UNCERTAIN t1" in summary and "not moved: t2" in summary
    js = ImageResult("img", name, ["t1", "t2"], tag_moves=moves, error=moves.error).to_json()
    assert (js["tags_moved"], js["tags_uncertain"], js["tags_not_moved"]) == ([], ["t1"], ["t2"])


def test_a_tag_built_from_a_newer_lock_is_not_moved_back(registry, setup, tmp_path) -> None:  # type: ignore[no-untyped-def]
    name, old, new = setup
    repo = Reference.parse(f"{registry.host}/{name}")
    with _client() as client:
        assert move_tags(client, repo, new, ["t1"], lock_epoch=2000).moved == ["t1"]
        # t1 is on the epoch-2000 index, t2 on none: every tag is checked before any PUT, so
        # the old build moves neither (t2 comes first, and is not moved either).
        assert httpx.delete(f"{registry.url}/v2/{name}/manifests/{old.digest}").status_code == 202
        third = _index(tmp_path, client, repo, "older", 1000)
        moves = move_tags(client, repo, third, ["t2", "t1"], lock_epoch=1000)
        assert moves.exit_code == 2 and moves.moved == []
        assert moves.error and "newer lock" in moves.error and "--force" in moves.error
        assert moves.not_moved == ["t2", "t1"]
        assert _tag(registry, name, "t1") == new.digest
        assert _tag(registry, name, "t2") is None
        assert tag_summary(ImageResult("i", name, [], tag_moves=moves)) == "no tag moved"
        # An equal lock epoch moves (the same lock, rebuilt); --force moves it anyway.
        again = _index(tmp_path, client, repo, "same-lock", 2000)
        assert move_tags(client, repo, again, ["t1"], lock_epoch=2000).moved == ["t1"]
        forced = move_tags(client, repo, third, ["t1"], lock_epoch=1000, force=True)
        assert forced.moved == ["t1"] and _tag(registry, name, "t1") == third.digest


def test_summary_wording_follows_what_was_checked() -> None:
    def s(**kw: object) -> str:
        return tag_summary(ImageResult("i", "r", [], tag_moves=TagMoves(**kw)))  # type: ignore[arg-type]

    assert tag_summary(ImageResult("i", "r", ["a"])) == "no tag moved"  # no PUT was sent
    assert s(moved=["a"], unchanged=["b"]) == "moved a; already there: b"
    assert s(unchanged=["a", "b"]) == "no tag moved; already there: a, b"
    assert s(moved=["a"], not_moved=["b"]) == "moved a; not moved: b"
    assert s(uncertain=["a"], not_moved=["b"]).startswith("UNCERTAIN a")
