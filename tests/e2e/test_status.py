"""`cannery status` against real registries: a family of four images published to two
docker-registry processes (a primary and a mirror) the way a build publishes them (tiny
platform images labelled with their input digests, pushed by cannery's own client, then
``publish_everywhere``: indexes with the lock epoch, per-platform tags, tags, the alias last).
What is under test is what status reads and how it judges it, not the build.

Then, one fault at a time on a fresh copy of the family: a lock input moves (stale, named), a
mirror's tag points at another image (diverged), a platform manifest and a tag are deleted
(missing), and a proxy answers 429 with ``Retry-After: 1`` twice (waited out, then clean).
Last, three of them at once in one run, each named, then the healthy family again."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from cannery.builder.jobs import INPUTS_LABEL, ImageJob, plan_build
from cannery.builder.registries import protect_platform, publish_everywhere
from cannery.catalog.load import load_catalog
from cannery.lock import read_lock
from cannery.oci import Descriptor, OCIClient, Reference, push_image_dir
from cannery.oci.publish import LOCK_EPOCH
from cannery.plan import plan
from cannery.render.dockerfile import render_dockerfile
from cannery.tls import ssl_context
from tests.services.faultproxy import FaultProxy, SWRStandIn
from tests.services.registry import LocalRegistry, free_port, labelled_layout

pytestmark = pytest.mark.e2e

DEB12 = "sha256:" + "1" * 64
DEB11 = "sha256:" + "2" * 64
MOVED = "sha256:" + "3" * 64

CATALOG = """\
[catalog]
name = "fam"
source = "https://example.com/fam"
registry = "primary"
mirrors = ["mirror"]

[registries.primary]
repository = "{primary}/{ns}/images"

[registries.mirror]
repository = "{mirror}/{ns}/images"

[bases.deb12]
image = "docker.io/library/debian:12"
os = "debian"
os_version = "12"

[bases.deb11]
image = "docker.io/library/debian:11"
os = "debian"
os_version = "11"

[images.a]
base = "deb12"
platforms = ["linux/amd64", "linux/arm64"]
tag = "a-1"
aliases = ["latest"]
packages = ["curl"]

[images.b]
base = "deb12"
platforms = ["linux/amd64", "linux/arm64"]
tag = "b-1"
packages = ["git"]

[[images.b.downloads]]
name = "tool"
url = "https://files.example.com/tool-{{uname_arch}}"
path = "/usr/local/bin/tool"

[images.c]
base = "deb12"
platforms = ["linux/amd64", "linux/arm64"]
tag = "c-1"
packages = ["make"]

[images.d]
base = "deb11"
platforms = ["linux/amd64", "linux/arm64"]
tag = "d-1"
packages = ["gcc"]
"""

LOCK = """\
version = 1

[bases."docker.io/library/debian:12"]
digest = "{deb12}"
resolved_at = "2026-11-01T00:00:00Z"

[bases."docker.io/library/debian:11"]
digest = "{deb11}"
resolved_at = "2026-11-02T00:00:00Z"

[urls."https://files.example.com/tool-x86_64"]
sha256 = "{sha_a}"
size = 10
resolved_at = "2026-11-01T00:00:00Z"

[urls."https://files.example.com/tool-aarch64"]
sha256 = "{sha_b}"
size = 10
resolved_at = "2026-11-01T00:00:00Z"
"""


@pytest.fixture(scope="module")
def regs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalRegistry, LocalRegistry]]:
    primary = LocalRegistry(tmp_path_factory.mktemp("primary"))
    mirror = LocalRegistry(tmp_path_factory.mktemp("mirror"))
    yield primary, mirror
    primary.stop()
    mirror.stop()


@dataclass
class Family:
    root: Path
    catalog: Path
    lock: Path
    ns: str
    primary: LocalRegistry
    mirror: LocalRegistry

    def repo(self, where: LocalRegistry) -> str:
        return f"{where.host}/{self.ns}/images"


def _publish(client: OCIClient, job: ImageJob, work: Path) -> None:
    """What a build's legs and merge write: each platform by digest (with TAG-<arch>), then
    the index with the lock epoch in every registry, the tag, then the alias."""
    repo = Reference.parse(job.repository)
    children = []
    for pj in job.platforms:
        labels = {INPUTS_LABEL: pj.input_digest}
        if job.spec.base_digest:
            labels["org.opencontainers.image.base.digest"] = job.spec.base_digest
        arch = pj.platform.split("/")[1]
        desc = push_image_dir(client, repo, labelled_layout(work, arch, job.name, labels))
        protect_platform(client, repo, job, pj, desc)
        children.append(Descriptor(desc.media_type, desc.digest, desc.size, pj.os_arch,
                                   {INPUTS_LABEL: pj.input_digest}))
    results = publish_everywhere(client, job, children,
                                 annotations={LOCK_EPOCH: str(job.lock_epoch)},
                                 lock_epoch=job.lock_epoch)
    assert [r.error for r in results] == [None, None]


def _publish_family(root: Path, primary: str, mirror: str, ns: str,
                    mirror_types: str = "oci") -> tuple[Path, Path]:
    """The four images, published fresh to ``primary`` and ``mirror`` (hosts); the catalog's
    and the lock's paths."""
    catalog = root / "cannery.toml"
    text = CATALOG.format(primary=primary, mirror=mirror, ns=ns)
    if mirror_types != "oci":
        where = f'repository = "{mirror}/{ns}/images"\n'
        text = text.replace(where, f'{where}media_types = "{mirror_types}"\n')
    catalog.write_text(text)
    lock = root / "cannery.lock"
    lock.write_text(LOCK.format(deb12=DEB12, deb11=DEB11, sha_a="a" * 64, sha_b="b" * 64))
    lk = read_lock(lock)
    with OCIClient(ssl_context(), retry_budget=20, backoff=0.01) as client:
        for spec in plan(load_catalog(catalog).catalog, lk):
            _publish(client, plan_build(spec, render_dockerfile(spec), lk), root / "legs")
    return catalog, lock


@pytest.fixture
def family(tmp_path: Path, regs: tuple[LocalRegistry, LocalRegistry]) -> Family:
    """The four images, fresh in both registries (a namespace of their own per test)."""
    primary, mirror = regs
    ns = f"status{uuid.uuid4().hex[:8]}"
    catalog, lock = _publish_family(tmp_path, primary.host, mirror.host, ns)
    return Family(tmp_path, catalog, lock, ns, primary, mirror)


def _status(cli, fam: Family, *extra: str, catalog: Path | None = None):  # type: ignore[no-untyped-def]
    return cli("status", "--catalog", str(catalog or fam.catalog), "--lock", str(fam.lock),
               *extra)


def _json(cli, fam: Family, *extra: str, catalog: Path | None = None) -> tuple[int, dict]:  # type: ignore[no-untyped-def, type-arg]
    res = _status(cli, fam, "--json", *extra, catalog=catalog)
    assert res.code in (0, 1), res.err
    return res.code, json.loads(res.out)


def _states(doc: dict) -> dict[tuple[str, str, str], str]:  # type: ignore[type-arg]
    return {(img["image"], e["platform"], e["registry"]): e["state"]
            for img in doc["images"] for e in img["entries"]}


def _entry(doc: dict, image: str, platform: str, registry: str) -> dict:  # type: ignore[type-arg]
    img = next(i for i in doc["images"] if i["image"] == image)
    return next(e for e in img["entries"]
                if e["platform"] == platform and e["registry"] == registry)


def test_fresh_family_exits_0_in_table_json_and_markdown(cli, family: Family) -> None:  # type: ignore[no-untyped-def]
    page = family.root / "docs" / "STATUS.md"
    res = _status(cli, family, "--markdown", str(page))
    assert res.code == 0, res.err
    # 4 images × 2 platforms × 2 registries, and the alias in each registry
    assert "4 image(s): 18 fresh (all fresh)" in res.out
    assert "stale" not in res.out and "missing" not in res.out
    text = page.read_text()
    assert text.startswith("# Image status: fam\n")
    assert text.count("| fresh |") == 18 and "## Aliases" in text
    code, doc = _json(cli, family)
    assert code == 0 and doc["ok"] is True
    assert set(_states(doc).values()) == {"fresh"} and len(_states(doc)) == 16
    a = _entry(doc, "a", "linux/arm64", "mirror")
    assert a["inputs"] == a["planned_inputs"] and a["inputs_locked_at"] == "2026-11-01T00:00:00Z"
    assert a["age_seconds"] > 0
    primary = _entry(doc, "a", "linux/arm64", "primary")
    assert a["digest"] == primary["digest"] and a["index_digest"] == primary["index_digest"]
    alias = next(i for i in doc["images"] if i["image"] == "a")["alias_entries"]
    assert [(x["alias"], x["registry"], x["state"], x["names"]) for x in alias] == [
        ("latest", "primary", "fresh", "a"), ("latest", "mirror", "fresh", "a")]


def test_a_moved_lock_input_makes_its_image_stale_naming_it(cli, family: Family) -> None:  # type: ignore[no-untyped-def]
    # What `cannery lock --update deb11` writes when the tag moved: a new digest, a new time.
    text = family.lock.read_text().replace(DEB11, MOVED).replace(
        "2026-11-02T00:00:00Z", "2026-12-01T00:00:00Z")
    family.lock.write_text(text)
    code, doc = _json(cli, family)
    assert code == 1 and doc["ok"] is False
    states = _states(doc)
    assert {k: v for k, v in states.items() if v != "fresh"} == {
        ("d", p, r): "stale" for p in ("linux/amd64", "linux/arm64") for r in ("primary", "mirror")
    }
    d = _entry(doc, "d", "linux/amd64", "mirror")
    assert d["moved"] == ["base docker.io/library/debian:11: 222222222222 → 333333333333"]
    assert d["inputs"] != d["planned_inputs"]
    res = _status(cli, family)
    assert res.code == 1 and "4 stale, 14 fresh (not all fresh)" in res.out


def test_a_moved_download_is_named_from_the_lock_times(cli, family: Family) -> None:  # type: ignore[no-untyped-def]
    """No label records a download's sha256: the URL entry is named because the lock resolved
    it after the pushed index's lock epoch. Both platforms are stale: the Dockerfile carries
    every platform's sha256."""
    aarch64 = 'sha256 = "' + "b" * 64 + '"\nsize = 10\nresolved_at = "2026-11-01T00:00:00Z"'
    assert aarch64 in family.lock.read_text()
    family.lock.write_text(family.lock.read_text().replace(
        aarch64, 'sha256 = "' + "c" * 64 + '"\nsize = 10\nresolved_at = "2026-12-01T00:00:00Z"'))
    code, doc = _json(cli, family, "b")
    assert code == 1 and [i["image"] for i in doc["images"]] == ["b"]
    assert {k: v for k, v in _states(doc).items() if v != "fresh"} == {
        ("b", p, r): "stale" for p in ("linux/amd64", "linux/arm64") for r in ("primary", "mirror")}
    for platform in ("linux/amd64", "linux/arm64"):
        b = _entry(doc, "b", platform, "primary")
        assert b["moved"] == ["url:https://files.example.com/tool-aarch64 (locked 2026-12-01, "
                              "after the pushed build's lock)"]
    # The same value edited by hand with its old time: nothing recorded names it; status
    # says the inputs differ, and where to look.
    family.lock.write_text(family.lock.read_text().replace("2026-12-01T00:00:00Z",
                                                          "2026-11-01T00:00:00Z"))
    code, doc = _json(cli, family, "b")
    b = _entry(doc, "b", "linux/arm64", "primary")
    assert code == 1 and b["state"] == "stale" and b["moved"] == []
    assert b["detail"].startswith("inputs differ; no input the image records moved")


def _put_tag(where: LocalRegistry, repo: str, tag: str, digest: str) -> None:
    """Point ``tag`` at the manifest ``digest`` (its bytes read back and PUT under the tag)."""
    path = repo.partition("/")[2]
    accept = ("application/vnd.oci.image.index.v1+json, "
              "application/vnd.docker.distribution.manifest.list.v2+json")
    with httpx.Client() as c:
        got = c.get(f"{where.url}/v2/{path}/manifests/{digest}", headers={"Accept": accept})
        got.raise_for_status()
        c.put(f"{where.url}/v2/{path}/manifests/{tag}", content=got.content,
              headers={"Content-Type": got.headers["content-type"]}).raise_for_status()


def _delete(where: LocalRegistry, repo: str, digest: str) -> None:
    with httpx.Client() as c:
        r = c.delete(f"{where.url}/v2/{repo.partition('/')[2]}/manifests/{digest}")
        assert r.status_code == 202, r.text


def test_a_mirror_tag_pointing_elsewhere_is_diverged(cli, family: Family) -> None:  # type: ignore[no-untyped-def]
    _, doc = _json(cli, family)
    c_index = _entry(doc, "c", "linux/amd64", "mirror")["index_digest"]
    repo = family.repo(family.mirror)
    _put_tag(family.mirror, repo, "b-1", c_index)
    _put_tag(family.mirror, repo, "latest", c_index)
    code, doc = _json(cli, family)
    assert code == 1
    bad = {k: v for k, v in _states(doc).items() if v != "fresh"}
    assert bad == {("b", "linux/amd64", "mirror"): "diverged",
                   ("b", "linux/arm64", "mirror"): "diverged"}
    assert "differs from primary's" in _entry(doc, "b", "linux/amd64", "mirror")["detail"]
    alias = next(i for i in doc["images"] if i["image"] == "a")["alias_entries"]
    assert [(x["registry"], x["state"], x["names"]) for x in alias] == [
        ("primary", "fresh", "a"), ("mirror", "diverged", "c")]
    res = _status(cli, family)
    assert res.code == 1 and "names c, not a's index" in res.out


def test_a_deleted_platform_manifest_and_a_deleted_tag_are_missing(cli, family: Family) -> None:  # type: ignore[no-untyped-def]
    _, doc = _json(cli, family)
    repo = family.repo(family.mirror)
    _delete(family.mirror, repo, _entry(doc, "c", "linux/arm64", "mirror")["digest"])
    _delete(family.mirror, repo, _entry(doc, "d", "linux/amd64", "mirror")["index_digest"])
    code, doc = _json(cli, family)
    assert code == 1
    bad = {k: v for k, v in _states(doc).items() if v != "fresh"}
    assert bad == {("c", "linux/arm64", "mirror"): "missing",
                   ("d", "linux/amd64", "mirror"): "missing",
                   ("d", "linux/arm64", "mirror"): "missing"}
    assert "no longer has its manifest" in _entry(doc, "c", "linux/arm64", "mirror")["detail"]
    assert _entry(doc, "d", "linux/arm64", "mirror")["detail"] == "no such tag"
    assert doc["counts"] == {"missing": 3, "diverged": 0, "stale": 0, "fresh": 15}


def test_a_docker_media_types_mirror_is_fresh_not_diverged(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path, regs: tuple[LocalRegistry, LocalRegistry]
) -> None:
    """A mirror that takes only Docker media types (the SWR stand-in) serves a manifest list
    of the same entries: another index digest, the same platform digests. Not a divergence."""
    primary, mirror = regs
    swr = SWRStandIn(mirror.port)
    try:
        ns = f"status{uuid.uuid4().hex[:8]}"
        catalog, lock = _publish_family(tmp_path, primary.host, swr.host, ns, "docker")
        res = cli("status", "--catalog", str(catalog), "--lock", str(lock), "--json")
    finally:
        swr.stop()
    assert res.code == 0, res.err + res.out
    doc = json.loads(res.out)
    a = next(i for i in doc["images"] if i["image"] == "a")
    by_registry = {e["registry"]: e for e in a["entries"] if e["platform"] == "linux/arm64"}
    assert by_registry["primary"]["index_digest"] != by_registry["mirror"]["index_digest"]
    assert by_registry["primary"]["digest"] == by_registry["mirror"]["digest"]
    assert doc["counts"] == {"missing": 0, "diverged": 0, "stale": 0, "fresh": 18}


class TimedProxy(FaultProxy):
    """The fault proxy, with when each request arrived."""

    def __init__(self, *args: object, **kw: object) -> None:
        self.times: list[float] = []
        super().__init__(*args, **kw)  # type: ignore[arg-type]

    def _record(self, method: str, path: str, action: str) -> None:
        self.times.append(time.monotonic())
        super()._record(method, path, action)


def test_429_with_retry_after_is_waited_out_then_clean(cli, family: Family) -> None:  # type: ignore[no-untyped-def]
    """Fails without Retry-After handling: the client's own first backoff is at most 0.5 s."""
    proxy = TimedProxy(family.primary.port, script=["429:1", "429:1"])
    try:
        catalog = family.root / "proxied.toml"
        catalog.write_text(family.catalog.read_text().replace(
            f'repository = "{family.primary.host}/', f'repository = "{proxy.host}/'))
        # One worker: the first request meets both 429s, so the waits are its retries'.
        res = _status(cli, family, "--workers", "1", catalog=catalog)
    finally:
        proxy.stop()
    assert res.code == 0, res.err + res.out
    assert "18 fresh (all fresh)" in res.out
    assert [a for _, _, a in proxy.log[:3]] == ["429", "429", "forward"]
    first, second, third = proxy.times[:3]
    assert second - first >= 1.0 and third - second >= 1.0  # Retry-After: 1, each time
    assert proxy.counts["429"] == 2


def test_an_unreachable_registry_is_one_line_and_exit_2(cli, family: Family) -> None:  # type: ignore[no-untyped-def]
    catalog = family.root / "gone.toml"
    catalog.write_text(family.catalog.read_text().replace(
        family.mirror.host, f"127.0.0.1:{free_port()}"))
    res = _status(cli, family, catalog=catalog)
    assert res.code == 2 and res.out == ""
    assert len(res.err.strip().splitlines()) == 1 and "registry unreachable" in res.err
    assert "Traceback" not in res.err
    res = _status(cli, family, "nope")
    assert res.code == 2 and "unknown image nope" in res.err
    # a page that cannot be written: one line, exit 2, nothing printed as if it had worked
    res = _status(cli, family, "--markdown", str(family.catalog / "STATUS.md"))
    assert res.code == 2 and res.out == "" and len(res.err.strip().splitlines()) == 1
    assert "cannery.toml: exists and is not a directory" in res.err


def test_three_faults_at_once_are_each_named(cli, family: Family) -> None:  # type: ignore[no-untyped-def]
    """The issue's sequence on one family in one run: one platform's manifest deleted in the
    mirror, a lock input moved, and the primary behind a proxy that answers 429 with
    ``Retry-After: 1`` first. status waits the 429 out and names both other faults, exit 1;
    undone, the same family is all fresh again, exit 0."""
    _, doc = _json(cli, family)
    repo = family.repo(family.mirror)
    _delete(family.mirror, repo, _entry(doc, "c", "linux/arm64", "mirror")["digest"])
    healthy_lock = family.lock.read_text()
    family.lock.write_text(healthy_lock.replace(DEB11, MOVED).replace(
        "2026-11-02T00:00:00Z", "2026-12-01T00:00:00Z"))
    proxy = TimedProxy(family.primary.port, script=["429:1"])
    try:
        catalog = family.root / "proxied.toml"
        catalog.write_text(family.catalog.read_text().replace(
            f'repository = "{family.primary.host}/', f'repository = "{proxy.host}/'))
        code, doc = _json(cli, family, "--workers", "1", catalog=catalog)
    finally:
        proxy.stop()
    assert code == 1 and doc["ok"] is False
    assert [a for _, _, a in proxy.log[:2]] == ["429", "forward"]
    assert proxy.times[1] - proxy.times[0] >= 1.0  # waited out, not hammered
    bad = {k: v for k, v in _states(doc).items() if v != "fresh"}
    assert bad == {("c", "linux/arm64", "mirror"): "missing",
                   **{("d", p, r): "stale" for p in ("linux/amd64", "linux/arm64")
                      for r in ("primary", "mirror")}}
    assert "no longer has its manifest" in _entry(doc, "c", "linux/arm64", "mirror")["detail"]
    assert _entry(doc, "d", "linux/amd64", "primary")["moved"] == [
        "base docker.io/library/debian:11: 222222222222 → 333333333333"]
    # The healthy family, read again: the lock put back and the manifest pushed again.
    family.lock.write_text(healthy_lock)
    _publish_family(family.root, family.primary.host, family.mirror.host, family.ns)
    res = _status(cli, family)
    assert res.code == 0, res.out + res.err
    assert "18 fresh (all fresh)" in res.out
