"""The no-op nightly against real registries: `cannery build --locked --push` over a family
already published (tests/e2e/test_status.py's four images, two docker-registry processes, a
primary and a mirror, each behind a counting proxy of the project's own) builds nothing and,
when every registry already serves the index a publish would write, writes nothing and reads
only the tags: the skip decision and ``already_published`` (builder/registries.py).

Then registries that do not serve it: a mirror whose alias names an index that claims the
same inputs (its entries carry the right ``io.cannery.inputs`` annotations) but lists other
manifests, and a mirror whose per-platform tag names another manifest. Each is noticed and
put right by the full publish; a check that trusted the annotations, or only that the tags
exist, would leave them (see test_lying_mirror_is_put_right)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cannery.builder.jobs import INPUTS_LABEL
from cannery.oci import Descriptor, OCIClient, Reference, push_image_dir
from cannery.oci.manifest import OCI_INDEX, index_bytes
from cannery.tls import ssl_context
from tests.e2e.test_status import Family, _publish_family
from tests.services.faultproxy import FaultProxy
from tests.services.registry import LocalRegistry, labelled_layout

pytestmark = pytest.mark.e2e

WRITES = {"PUT", "POST", "PATCH", "DELETE"}


@pytest.fixture(scope="module")
def regs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalRegistry, LocalRegistry]]:
    primary = LocalRegistry(tmp_path_factory.mktemp("primary"))
    mirror = LocalRegistry(tmp_path_factory.mktemp("mirror"))
    yield primary, mirror
    primary.stop()
    mirror.stop()


def _family(tmp_path: Path, regs: tuple[LocalRegistry, LocalRegistry],
            mirror_types: str = "oci") -> Family:
    primary, mirror = regs
    ns = f"nightly{uuid.uuid4().hex[:8]}"
    catalog, lock = _publish_family(tmp_path, primary.host, mirror.host, ns, mirror_types)
    return Family(tmp_path, catalog, lock, ns, primary, mirror)


def _first_nightly(cli, fam: Family) -> dict:  # type: ignore[no-untyped-def, type-arg]
    """The first nightly after the family's publish, which attached no attestations: it
    attaches each platform's provenance (the default ``--attest``), so it publishes again."""
    res = cli("build", "--catalog", str(fam.catalog), "--lock", str(fam.lock), "--locked",
              "--push", "--log-dir", str(fam.root / "logs"), "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert all(p["skipped"] for i in doc["images"] for p in i["platforms"])
    assert all(r["copied"] is not None for i in doc["images"] for r in i["registries"][1:])
    return doc  # type: ignore[no-any-return]


def _nightly(cli, fam: Family) -> tuple[dict, FaultProxy, FaultProxy]:  # type: ignore[no-untyped-def, type-arg]
    """The nightly, each registry behind a proxy that forwards everything and logs it."""
    front = FaultProxy(fam.primary.port)
    back = FaultProxy(fam.mirror.port)
    catalog = fam.root / "nightly.toml"
    catalog.write_text(fam.catalog.read_text()
                       .replace(f'"{fam.primary.host}/', f'"{front.host}/')
                       .replace(f'"{fam.mirror.host}/', f'"{back.host}/'))
    try:
        res = cli("build", "--catalog", str(catalog), "--lock", str(fam.lock), "--locked",
                  "--push", "--log-dir", str(fam.root / "logs"), "--json")
    finally:
        front.stop()
        back.stop()
    assert res.code == 0, res.err
    return json.loads(res.out), front, back


def _manifest_reads(proxy: FaultProxy) -> list[tuple[str, str]]:
    return [(m, p) for m, p, _ in proxy.log if "/manifests/" in p]


@pytest.mark.parametrize("mirror_types", ["oci", "docker"])
def test_noop_nightly_writes_nothing_and_reads_only_the_tags(
    cli, tmp_path: Path, regs: tuple[LocalRegistry, LocalRegistry], mirror_types: str
) -> None:
    fam = _family(tmp_path, regs, mirror_types)
    _first_nightly(cli, fam)
    doc, front, back = _nightly(cli, fam)
    images = doc["images"]
    assert sorted(i["image"] for i in images) == ["a", "b", "c", "d"]
    for image in images:
        assert all(p["skipped"] for p in image["platforms"]), image
        assert image["tags_moved"] == [] and image["error"] is None
        for reg in image["registries"]:
            assert reg["has_new_tags"] and reg["tags_moved"] == []
            assert reg["tags_unchanged"] == image["tags"]
            assert reg["copied"] is None  # nothing was read for a copy
    # Nothing written anywhere, and no blob read: manifests, tags and (the attester's, in the
    # primary) one referrers list per platform manifest.
    for proxy in (front, back):
        assert not [r for r in proxy.log if r[0] in WRITES], proxy.log
    others = [p for _, p, _ in front.log if "/manifests/" not in p and p != "/v2/"]
    assert len(others) == 4 * 2 and all("/referrers/sha256:" in p for p in others)
    assert [p for _, p, _ in back.log if "/manifests/" not in p and p != "/v2/"] == []
    # In each registry a HEAD per tag and per per-platform tag (4 images, 1 alias: 5 tags).
    # The primary also answers the skip decision (a GET of the tag, a HEAD of each entry)
    # and the attester's reads (each platform's referrers and the provenance they list).
    tags, platforms = 5, 2
    tag_reads = [(m, p) for m, p in _manifest_reads(front)
                 if m == "HEAD" and "/sha256" not in p and "sha256-" not in p]
    assert len(tag_reads) == tags * (1 + platforms)
    # The attester, per platform manifest: the fallback tag list (GET, HEAD), the provenance
    # manifest it lists, the provenance's keep tag. Nothing else.
    skip, attester = 4 * (1 + platforms), 4 * platforms * 4
    assert len(_manifest_reads(front)) == tags * (1 + platforms) + skip + attester
    # A Docker-typed mirror's index lists the Docker forms of OCI manifests; these are Docker
    # already (buildah pushes Docker v2s2), so nothing is converted and nothing more is read.
    assert len(_manifest_reads(back)) == tags * (1 + platforms)
    # The index digest each registry reports is the one its tags name.
    with OCIClient(ssl_context()) as client:
        for image in images:
            for reg in image["registries"]:
                repo = Reference.parse(reg["repository"].replace(front.host, fam.primary.host)
                                       .replace(back.host, fam.mirror.host))
                for tag in image["tags"]:
                    found = client.head_manifest(repo.with_tag(tag))
                    assert found is not None and found.digest == reg["index_digest"]


def test_lying_mirror_is_put_right(
    cli, tmp_path: Path, regs: tuple[LocalRegistry, LocalRegistry]
) -> None:
    """The mirror's ``latest`` (image a's alias) is moved to an index whose entries carry
    image a's very input annotations and platforms but name other manifests; image b's
    ``b-1-amd64`` to another manifest. The nightly must not take either for published: it
    publishes both images again (nothing rebuilt: the primary is right) and moves exactly
    those tags back."""
    fam = _family(tmp_path, regs)
    _first_nightly(cli, fam)
    mirror = Reference.parse(fam.repo(fam.mirror))
    with OCIClient(ssl_context()) as client:
        good, _ = client.get_manifest(mirror.with_tag("latest"))
        entries = json.loads(good)["manifests"]
        fakes = []
        for entry in entries:
            arch = entry["platform"]["architecture"]
            labels = {INPUTS_LABEL: entry["annotations"][INPUTS_LABEL]}
            desc = push_image_dir(client, mirror, labelled_layout(tmp_path / "fake", arch, "fake",
                                                          labels))
            fakes.append(Descriptor(desc.media_type, desc.digest, desc.size, entry["platform"],
                                    entry["annotations"]))
        annotations = json.loads(good).get("annotations") or {}
        lie = index_bytes(fakes, annotations, OCI_INDEX)
        client.put_manifest(mirror.with_tag("latest"), lie, OCI_INDEX)
        client.put_manifest(mirror.with_tag("b-1-amd64"),
                            *_manifest_of(client, mirror, fakes[0]))
    doc, _, back = _nightly(cli, fam)
    by_name = {i["image"]: i for i in doc["images"]}
    moved = {name: [r["tags_moved"] for r in i["registries"]] for name, i in by_name.items()}
    assert moved["a"] == [[], ["latest"]]  # the primary was right; the mirror's alias moves
    assert moved["c"] == moved["d"] == [[], []]
    assert all(p["skipped"] for i in by_name.values() for p in i["platforms"])
    assert [m for m, p, _ in back.log if m == "PUT" and p.endswith("/b-1-amd64")] == ["PUT"]
    with OCIClient(ssl_context()) as client:
        now = client.head_manifest(mirror.with_tag("latest"))
        tagged = client.head_manifest(mirror.with_tag("a-1"))
        assert now is not None and tagged is not None and now.digest == tagged.digest
        platform = client.head_manifest(mirror.with_tag("b-1-amd64"))
        b_index, _ = client.get_manifest(mirror.with_tag("b-1"))
        amd64 = [m["digest"] for m in json.loads(b_index)["manifests"]
                 if m["platform"]["architecture"] == "amd64"]
        assert platform is not None and [platform.digest] == amd64


def _manifest_of(client: OCIClient, repo: Reference, desc: Descriptor) -> tuple[bytes, str]:
    body, found = client.get_manifest(repo.with_digest(desc.digest))
    return body, found.media_type
