"""A catalog image built FROM another of the same catalog, in one publish run, end to end (real
buildah, both arches, arm64 under qemu; the e2e world's TLS registry with a password, see
test_build.py).

`parent` is the stand-in base plus a file; `child` is `base = "image:parent"` and reads that
file in a step. One `cannery build --push` builds the parent, merges it, then builds the child
FROM the index it has just pushed (pulled with cannery's login, which buildah gets in a
temporary auth file). The child's config, provenance (checked by `verify`) and the lock name
the parent's new digest. A change to the parent's inputs rebuilds the child; a run with no
change rebuilds neither.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.buildenv import BuildWorld, cleanup_local_images, make_world, own_images
from tests.e2e.test_build import build, cannery, registry_get
from tests.services.tlsca import LocalCA

pytestmark = pytest.mark.e2e

IMAGES = """
[images.child]
base = "image:parent"
platforms = ["linux/amd64", "linux/arm64"]
tag = "child"
steps = [{{ run = "grep -q '{word}' /opt/parent.txt && uname -m > /opt/child.txt" }}]

[images.parent]
base = "standin"
platforms = ["linux/amd64", "linux/arm64"]
tag = "parent"
steps = [{{ run = "echo '{word}' > /opt/parent.txt" }}]
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, test_ca: LocalCA) -> Iterator[BuildWorld]:
    w = make_world(tmp_path_factory.mktemp("world"), test_ca)
    yield w
    w.stop()
    cleanup_local_images()


def _catalog(world: BuildWorld, word: str) -> Path:
    path = world.catalog(world.root / "family", repo="family")
    text = path.read_text()
    # (written child first: the build still starts with the parent)
    path.write_text(own_images(text, IMAGES.format(word=word)))
    return path


def _config(world: BuildWorld, repo: str, arch: str) -> dict:  # type: ignore[type-arg]
    """The image config of ``repo``'s tag ``repo`` for ``arch``, read from the registry."""
    index = registry_get(world, "family", repo).json()
    (entry,) = [m for m in index["manifests"] if m["platform"]["architecture"] == arch]
    manifest = registry_get(world, "family", entry["digest"]).json()
    blob = httpx.get(
        f"https://{world.push_registry.host}/v2/e2e/family/blobs/{manifest['config']['digest']}",
        auth=(world.user, world.password), verify=str(world.ca.ca_cert), follow_redirects=True,
    )
    return blob.json()  # type: ignore[no-any-return]


def test_the_child_is_built_from_the_index_the_same_run_pushed(world: BuildWorld) -> None:
    catalog = _catalog(world, "first")
    rc, summary, err = build(world, catalog)
    assert rc == 0, err[-4000:]
    names = [i["image"] for i in summary["images"]]
    assert names == ["parent", "child"], names  # parents first
    parent, child = summary["images"]
    digest = parent["index_digest"]
    assert digest and all(p["digest"] for p in child["platforms"])
    # The lock pins the parent's tag at the index just pushed (what `cannery lock` reads).
    lock = (catalog.parent / "cannery.lock").read_text()
    ref = f"{world.push_registry.host}/e2e/family:parent"
    assert f'[bases."{ref}"]\ndigest = "{digest}"' in lock, lock[:3000]
    assert f"pinned image parent's base entry at {digest}" in err
    # The plan and verify read it from there: the base label and the provenance's base
    # material are the parent's digest, and the child's step saw the parent's file.
    plan = json.loads(cannery(world, "plan", "--catalog", str(catalog), "--json").stdout)
    (spec,) = [s for s in plan["images"] if s["name"] == "child"]
    assert spec["base"] == {"image": ref, "digest": digest, "catalog_image": "parent"}
    child_ref = f"{world.push_registry.host}/e2e/family:child"
    proc = cannery(world, "verify", child_ref, "--catalog", str(catalog), "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert any("provenance" in c["name"] for c in json.loads(proc.stdout)["checks"])
    for platform in ("amd64", "arm64"):
        labels = _config(world, "child", platform)["config"]["Labels"]
        assert labels["org.opencontainers.image.base.digest"] == digest
        assert labels["org.opencontainers.image.base.name"] == ref


def test_a_change_to_the_parent_rebuilds_the_child_and_no_change_rebuilds_nothing(
    world: BuildWorld,
) -> None:
    catalog = _catalog(world, "first")
    rc, _, err = build(world, catalog)  # (a no-op after the first test; this file alone: built)
    assert rc == 0, err[-4000:]
    rc, summary, err = build(world, catalog)
    assert rc == 0, err[-4000:]
    for image in summary["images"]:
        assert all(p["skipped"] for p in image["platforms"]), image  # nothing moved
    catalog = _catalog(world, "second")
    rc, summary, err = build(world, catalog)
    assert rc == 0, err[-4000:]
    parent, child = summary["images"]
    assert not any(p["skipped"] for p in parent["platforms"]), parent
    assert not any(p["skipped"] for p in child["platforms"]), child  # its base moved
    lock = (catalog.parent / "cannery.lock").read_text()
    assert parent["index_digest"] in lock


def test_a_child_alone_takes_the_digest_it_is_given_and_the_lock_keeps_its_own(
    world: BuildWorld,
) -> None:
    """Building only the child (as CI's legs do) with --base-digest pins the parent there for
    that run, --locked, and writes nothing into the lock; a bad --base-digest is refused,
    checked as a digest and as a catalog image others are built FROM; and a parent and its
    child cannot go to a layout in one run."""
    catalog = _catalog(world, "second")
    rc, summary, err = build(world, catalog)
    assert rc == 0, err[-4000:]
    digest = summary["images"][0]["index_digest"]
    lock_before = (catalog.parent / "cannery.lock").read_text()
    rc, summary, err = build(world, catalog, "child", "--locked", "--base-digest",
                             f"parent={digest}")
    assert rc == 0, err[-4000:]
    assert [i["image"] for i in summary["images"]] == ["child"]
    assert (catalog.parent / "cannery.lock").read_text() == lock_before
    proc = cannery(world, "build", "child", "--catalog", str(catalog), "--push", "--locked",
                   "--base-digest", "child=sha256:" + "0" * 64)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "cannery: error: --base-digest child: no image of the catalog is built FROM image child "
        "(built FROM: parent)")
    proc = cannery(world, "build", "child", "--catalog", str(catalog), "--push", "--locked",
                   "--base-digest", "parent=latest")
    assert proc.returncode == 2 and "not a sha256 digest" in proc.stderr
    proc = cannery(world, "build", "--catalog", str(catalog), "--output", "oci:" +
                   str(world.root / "layout"))
    assert proc.returncode == 2
    assert "child is built FROM image parent of the same build" in proc.stderr
