"""Publishing one build to several registries, against real docker-registry processes: a
primary and an OCI mirror (TLS, the test CA), and a registry behind the SWR stand-in (refuses
OCI media types, as Huawei SWR does). The platform images are tiny ones pushed by cannery's own
client (``push_image_dir`` of a dir: layout, as a build leg does after buildah), not built:
what is under test is the order and the digests of the publish, not the build."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from cannery.builder.execute import current_children
from cannery.builder.jobs import INPUTS_LABEL, ImageJob, PlatformJob, plan_build
from cannery.builder.registries import (
    known_platforms,
    platform_tag,
    protect_platform,
    publish_everywhere,
)
from cannery.catalog.load import load_catalog
from cannery.errors import CommandError
from cannery.lock import Lock
from cannery.oci import Descriptor, OCIClient, Reference, push_image_dir
from cannery.oci.manifest import DOCKER_LIST, DOCKER_MANIFEST, OCI_INDEX
from cannery.oci.publish import LOCK_EPOCH
from cannery.plan import RegistryTarget, plan
from cannery.tls import ssl_context
from cannery.verify.mirrors import registry_parity_checks
from tests.services.bases import cert_dir_for
from tests.services.faultproxy import SWR_MESSAGE, FaultProxy, HubLike, SWRStandIn
from tests.services.registry import LocalRegistry, labelled_layout, write_dir_layout
from tests.services.tlsca import LocalCA

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def regs(
    tmp_path_factory: pytest.TempPathFactory, test_ca: LocalCA
) -> Iterator[dict[str, object]]:
    tls = (test_ca.server_cert, test_ca.server_key)
    primary = LocalRegistry(tmp_path_factory.mktemp("primary"), tls=tls)
    mirror = LocalRegistry(tmp_path_factory.mktemp("mirror"), tls=tls)
    behind = LocalRegistry(tmp_path_factory.mktemp("swr"))
    swr = SWRStandIn(behind.port)
    yield {"primary": primary, "mirror": mirror, "swr": swr, "behind": behind}
    swr.stop()
    for r in (primary, mirror, behind):
        r.stop()


@pytest.fixture
def client(test_ca: LocalCA) -> Iterator[OCIClient]:
    with OCIClient(ssl_context(test_ca.ca_cert), retry_budget=20, backoff=0.01) as c:
        yield c


def make_job(targets: list[tuple[str, str, str]], aliases: tuple[str, ...] = ()) -> ImageJob:
    """An image of the embedded catalog, published to ``targets`` (name, repository, types)."""
    cat = load_catalog(None).catalog
    spec = plan(cat, Lock(), ["qwen3-5-a2"])[0]
    where = tuple(RegistryTarget(*t) for t in targets)
    spec = replace(spec, repository=where[0].repository, registries=where, aliases=aliases)
    return plan_build(spec, "FROM scratch\n", Lock())


def leg_layout(root: Path, job: PlatformJob, note: str = "one") -> Path:
    """A dir: layout like buildah's: Docker v2s2, its config labelled with the input digest."""
    return labelled_layout(root, job.platform.split("/")[1], note,
                           {INPUTS_LABEL: job.input_digest})


def run_legs(tmp: Path, client: OCIClient, job: ImageJob, note: str = "one") -> list[Descriptor]:
    """What each CI leg does: push its platform by digest, protect it with TAG-<arch>."""
    repo = Reference.parse(job.repository)
    children = []
    for pj in job.platforms:
        desc = push_image_dir(client, repo, leg_layout(tmp / note, pj, note))
        protect_platform(client, repo, job, pj, desc)
        children.append(
            Descriptor(desc.media_type, desc.digest, desc.size, pj.os_arch,
                       {INPUTS_LABEL: pj.input_digest})
        )
    return children


def _name() -> str:
    return f"pub/{uuid.uuid4().hex[:10]}"


def _serves(client: OCIClient, repository: str, tag: str) -> Descriptor | None:
    return client.head_manifest(Reference.parse(repository).with_tag(tag))


def test_three_registries_same_platform_digests_tags_last_second_run_writes_nothing(
    tmp_path: Path, regs: dict[str, LocalRegistry], client: OCIClient
) -> None:
    name = _name()
    primary = f"{regs['primary'].host}/{name}"
    mirror = f"{regs['mirror'].host}/{name}"
    swr = f"{regs['swr'].host}/{name}"
    job = make_job(
        [("quay", primary, "oci"), ("ghcr", mirror, "oci"), ("swr", swr, "docker")],
        aliases=("latest",),
    )
    tag = job.tags[0]
    children = run_legs(tmp_path, client, job)
    results = publish_everywhere(client, job, children)
    assert [r.error for r in results] == [None, None, None]
    assert all(r.has_new_tags for r in results)
    assert [r.tags_moved for r in results] == [[tag, "latest"]] * 3
    oci = {r.index_digest for r in results if r.media_types == "oci"}
    assert len(oci) == 1 and results[2].index_digest not in oci
    want = sorted(c.digest for c in children)
    for repository, media_type in ((primary, OCI_INDEX), (mirror, OCI_INDEX), (swr, DOCKER_LIST)):
        ref = Reference.parse(repository)
        body, desc = client.get_manifest(ref.with_tag(tag))
        assert desc.media_type == media_type
        listed = json.loads(body)["manifests"]
        # byte-identical platform manifests in every registry (Docker v2s2 everywhere)
        assert sorted(m["digest"] for m in listed) == want
        assert {m["mediaType"] for m in listed} == {DOCKER_MANIFEST}
        latest = _serves(client, repository, "latest")
        assert latest is not None and latest.digest == desc.digest
        for pj in job.platforms:  # per-platform tags in every registry
            leg = _serves(client, repository, platform_tag(tag, pj.platform))
            assert leg is not None and leg.digest in want
    # A second publish writes nothing anywhere.
    again = publish_everywhere(client, job, children)
    assert [r.tags_moved for r in again] == [[], [], []]
    for r in again[1:]:
        assert r.copied is not None and r.copied["manifests_written"] == 0
        assert r.copied["blobs_copied"] == 0

    # verify --all-registries: knows which index digest each registry should serve.
    checks = registry_parity_checks(client, Reference.parse(primary).with_tag(tag), job.spec)
    assert [(c.name, c.ok) for c in checks] == [
        ("registry quay", True), ("registry ghcr", True), ("registry swr", True)
    ], checks
    assert checks[2].detail.endswith(str(results[2].index_digest))
    # A registry serving another index type than the catalog says fails, naming both.
    swapped = make_job([("quay", primary, "oci"), ("ghcr", mirror, "docker")])
    bad = registry_parity_checks(client, Reference.parse(primary).with_tag(tag), swapped.spec)
    assert [c.ok for c in bad] == [True, False]
    assert f"serves {OCI_INDEX}, catalog says {DOCKER_LIST}" in bad[1].detail


def test_swr_refusing_oci_gets_one_line_naming_the_setting_and_no_tag_moves(
    tmp_path: Path, regs: dict[str, LocalRegistry], client: OCIClient
) -> None:
    name = _name()
    primary = f"{regs['primary'].host}/{name}"
    swr = f"{regs['swr'].host}/{name}"
    job = make_job([("quay", primary, "oci"), ("swr", swr, "oci")])
    results = publish_everywhere(client, job, run_legs(tmp_path, client, job))
    error = results[1].error
    assert error is not None and "\n" not in error
    assert 'registries.swr.media_types = "docker"' in error
    assert "refused a manifest of media type application/vnd.oci.image.index.v1+json" in error
    assert results[0].error is None
    # Every registry had to be complete before any tag moved: none did.
    assert not any(r.has_new_tags for r in results)
    assert _serves(client, primary, job.tags[0]) is None
    # (the stand-in answers as SWR does)
    assert regs["swr"].counts["refused"] >= 1 and SWR_MESSAGE


def test_failing_mirror_reports_then_rerun_completes_without_rebuilding(
    tmp_path: Path, regs: dict[str, LocalRegistry], client: OCIClient, test_ca: LocalCA
) -> None:
    """A mirror that keeps failing (5xx, dropped connections on its index PUT): no tag moves
    anywhere, no registry serves a partial index; the re-run finds the platforms by their
    per-platform tags (the build would skip them) and completes."""
    name = _name()
    behind = regs["behind"]
    flaky = FaultProxy(behind.port, script=["503", "drop-before", "500"] * 20,
                       when=lambda method, path: method == "PUT" and "/manifests/sha256" in path)
    try:
        primary = f"{regs['primary'].host}/{name}"
        mirror = f"{flaky.host}/{name}"
        job = make_job([("quay", primary, "oci"), ("cn", mirror, "docker")])
        children = run_legs(tmp_path, client, job)
        with OCIClient(ssl_context(test_ca.ca_cert), retry_budget=1, backoff=0.01) as short:
            results = publish_everywhere(short, job, children)
        assert results[0].error is None and results[1].error
        assert "gave up" in results[1].error
        assert [r.has_new_tags for r in results] == [False, False]
        assert _serves(client, primary, job.tags[0]) is None
        assert _serves(client, mirror, job.tags[0]) is None  # no index, partial or whole
        # Re-run: what a build would start from finds every platform by its TAG-<arch>.
        repo = Reference.parse(primary)
        found = known_platforms(client, repo, job, current_children(client, repo, job.tags[0]))
        assert {p: d.digest for p, d in found.items()} == {
            platform_string: c.digest
            for platform_string, c in zip((j.platform for j in job.platforms), children,
                                          strict=True)
        }
        flaky.script.clear()
        done = publish_everywhere(client, job, list(found.values()))
        assert [r.error for r in done] == [None, None]
        assert all(r.has_new_tags for r in done)
    finally:
        flaky.stop()


def test_docker_hub_like_rate_limit_is_waited_out(
    tmp_path: Path, regs: dict[str, LocalRegistry], client: OCIClient
) -> None:
    name = _name()
    hub = HubLike(regs["behind"].port, seed=7, rate=0.3)
    try:
        primary = f"{regs['primary'].host}/{name}"
        job = make_job([("quay", primary, "oci"), ("hub", f"{hub.host}/{name}", "oci")])
        results = publish_everywhere(client, job, run_legs(tmp_path, client, job))
        assert [r.error for r in results] == [None, None]
        assert hub.counts["429"] > 0
        assert all(r.has_new_tags for r in results)
    finally:
        hub.stop()


# ---------------------------------------------------------------- GC (item 4)


def _skopeo_copy_all(ref: str, certs: Path, dest: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["skopeo", "copy", "--quiet", "--all", "--src-cert-dir", str(certs),
         f"docker://{ref}", f"oci:{dest}"],
        capture_output=True, text=True, check=False,
    )


def test_gc_delete_untagged_between_legs_and_merge_and_after(
    tmp_path: Path, test_ca: LocalCA, client: OCIClient
) -> None:
    """CI order: legs push by digest (and tag TAG-<arch>), `garbage-collect --delete-untagged`
    runs (registry stopped, restarted), the merge publishes to both registries, GC runs again
    on both; then every tag of every registry copies whole with `skopeo copy --all`. The
    control: an index whose platforms carry no tag of their own loses them to the same GC."""
    tls = (test_ca.server_cert, test_ca.server_key)
    certs = cert_dir_for(test_ca, tmp_path / "certs")
    for d in ("one", "two"):
        (tmp_path / d).mkdir()
    one = LocalRegistry(tmp_path / "one", tls=tls)
    two = LocalRegistry(tmp_path / "two", tls=tls)
    try:
        name = _name()
        job = make_job([("a", f"{one.host}/{name}", "oci"), ("b", f"{two.host}/{name}", "oci")],
                       aliases=("latest",))
        children = run_legs(tmp_path, client, job)
        # The control, unprotected: platforms by digest and a tagged index, as before.
        bare = Reference.parse(f"{one.host}/bare/{uuid.uuid4().hex[:8]}")
        bare_children = [
            push_image_dir(client, bare, write_dir_layout(tmp_path / "bare" / a, a, "bare"))
            for a in ("amd64", "arm64")
        ]
        from cannery.oci import merge_index, move_tags

        bare_index = merge_index(client, bare, bare_children, {})
        move_tags(client, bare, bare_index, ["v1"])

        one.garbage_collect()  # between the legs and the merge
        results = publish_everywhere(client, job, children)
        assert [r.error for r in results] == [None, None]
        printed = one.garbage_collect() + two.garbage_collect()  # and after
        assert "eligible for deletion" in printed  # GC did delete something (the control)

        for n, host in enumerate((one.host, two.host)):
            legs = [platform_tag(job.tags[0], p.platform) for p in job.platforms]
            tags = [*job.tags, "latest", *legs]
            for tag in tags:
                done = _skopeo_copy_all(f"{host}/{name}:{tag}", certs, tmp_path / f"o{n}{tag}")
                assert done.returncode == 0, (tag, done.stderr)
        control = _skopeo_copy_all(f"{bare}:v1", certs, tmp_path / "control")
        assert control.returncode != 0  # GC took the unprotected platforms
    finally:
        one.stop()
        two.stop()


def _whole_or_absent(client: OCIClient, repository: str, tag: str) -> bool:
    """The tag names nothing, or an index every platform of which the registry serves."""
    ref = Reference.parse(repository).with_tag(tag)
    if client.head_manifest(ref) is None:
        return True
    body, _ = client.get_manifest(ref)
    entries = json.loads(body)["manifests"]
    return len(entries) == 2 and all(
        client.head_manifest(ref.with_digest(m["digest"])) is not None for m in entries
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_faults_on_a_mirror_never_leave_a_partial_index(
    tmp_path: Path, regs: dict[str, LocalRegistry], client: OCIClient, test_ca: LocalCA,
    seed: int,
) -> None:
    """Seeded drops and 5xx/429 on a third of the mirror's requests, a short retry budget:
    whether the publish succeeds or not, no registry's tag names a partial index; a re-run
    without faults completes."""
    name = _name()
    proxy = FaultProxy(regs["behind"].port, seed=seed, rate=0.33)
    try:
        primary = f"{regs['primary'].host}/{name}"
        mirror = f"{proxy.host}/{name}"
        job = make_job([("quay", primary, "oci"), ("cn", mirror, "docker")],
                       aliases=("latest",))
        children = run_legs(tmp_path, client, job)
        with OCIClient(ssl_context(test_ca.ca_cert), retry_budget=0.5, backoff=0.01) as short:
            first = publish_everywhere(short, job, children)
        assert proxy.faults > 0
        for repository in (primary, mirror):
            for tag in (job.tags[0], "latest"):
                assert _whole_or_absent(client, repository, tag)
        if any(r.error for r in first):
            assert not all(r.has_new_tags for r in first)
        proxy.rate = 0.0
        done = publish_everywhere(client, job, children)
        assert [r.error for r in done] == [None, None] and all(r.has_new_tags for r in done)
    finally:
        proxy.stop()


def test_an_older_lock_moves_no_tag_back_in_any_registry(
    tmp_path: Path, regs: dict[str, LocalRegistry], client: OCIClient
) -> None:
    """Every registry's tag names an index from a newer lock (its io.cannery.lock-epoch): a
    build from an older lock moves no tag anywhere (exit 2, the refusal named); --force (force)
    moves them in every registry."""
    name = _name()
    primary, mirror = f"{regs['primary'].host}/{name}", f"{regs['mirror'].host}/{name}"
    job = make_job([("quay", primary, "oci"), ("ghcr", mirror, "oci")])
    tag = job.tags[0]
    newer = publish_everywhere(
        client, job, run_legs(tmp_path, client, job, "new"),
        annotations={LOCK_EPOCH: "2000"}, lock_epoch=2000,
    )
    assert [r.error for r in newer] == [None, None]
    older = run_legs(tmp_path, client, job, "old")
    back = publish_everywhere(
        client, job, older, annotations={LOCK_EPOCH: "1000"}, lock_epoch=1000
    )
    assert back[0].error is not None and "newer lock" in back[0].error
    assert back[0].exit_code == 2
    assert [r.tags_moved for r in back] == [[], []]
    assert back[0].tag_moves is not None and back[0].tag_moves.not_moved == [tag]
    for repository, r in ((primary, newer[0]), (mirror, newer[1])):
        now = _serves(client, repository, tag)
        assert now is not None and now.digest == r.index_digest  # still the newer lock's
    # The mirror alone holds the newer lock's index: the refusal holds there too.
    client.put_manifest(  # the primary's tag moved back by hand (as by an older cannery)
        Reference.parse(primary).with_tag(tag),
        client.get_manifest(Reference.parse(primary).with_digest(str(back[0].index_digest)))[0],
        OCI_INDEX,
    )
    again = publish_everywhere(
        client, job, older, annotations={LOCK_EPOCH: "1000"}, lock_epoch=1000
    )
    assert again[0].error is None and again[1].error is not None
    assert "newer lock" in again[1].error and again[1].exit_code == 2
    mirrored = _serves(client, mirror, tag)
    assert mirrored is not None and mirrored.digest == newer[1].index_digest
    forced = publish_everywhere(
        client, job, older, annotations={LOCK_EPOCH: "1000"}, lock_epoch=1000, force=True
    )
    assert [r.error for r in forced] == [None, None]
    assert [r.tags_moved for r in forced] == [[], [tag]]
    for repository, r in ((primary, forced[0]), (mirror, forced[1])):
        now = _serves(client, repository, tag)
        assert now is not None and now.digest == r.index_digest


def test_platform_attestations_beside_the_index_write_move_no_tag_when_they_fail(
    tmp_path: Path, regs: dict[str, LocalRegistry], client: OCIClient
) -> None:
    """``attest_platforms`` runs in a thread beside the first registry's index write (it
    needs only the platform manifests); it is waited for before ``attest`` and before any tag:
    when it fails, the failure is the registry's error and no tag moves in any registry,
    exactly as when ``attest`` itself fails. When it succeeds, ``attest`` runs after it."""
    name = _name()
    primary = f"{regs['primary'].host}/{name}"
    mirror = f"{regs['mirror'].host}/{name}"
    job = make_job([("quay", primary, "oci"), ("ghcr", mirror, "oci")])
    tag = job.tags[0]
    children = run_legs(tmp_path, client, job)
    order: list[str] = []

    def fails(_job: object, kids: list[Descriptor]) -> None:
        order.append(f"platforms {len(kids)}")
        raise CommandError("provenance: the registry refused the artifact")

    def index(_job: object, _index: Descriptor, _kids: list[Descriptor]) -> None:
        order.append("index")

    results = publish_everywhere(client, job, children, index, attest_platforms=fails)
    assert results[0].error == "provenance: the registry refused the artifact"
    assert order == [f"platforms {len(children)}"]  # attest never ran, nothing after it
    assert [r.tags_moved for r in results] == [[], []]
    assert _serves(client, primary, tag) is None and _serves(client, mirror, tag) is None
    assert not results[1].index_digest  # the mirror was not touched

    order.clear()
    done = publish_everywhere(client, job, children, index,
                              attest_platforms=lambda j, kids: order.append("platforms"))
    assert [r.error for r in done] == [None, None]
    assert order == ["platforms", "index"]
    assert [r.tags_moved for r in done] == [[tag], [tag]]
