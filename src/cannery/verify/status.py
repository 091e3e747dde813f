"""The family at a glance (``cannery status``): what every registry of every catalog image
serves under its tag, judged against what the current catalog and lock would build.

Per image × platform × registry an entry is, worst first:

- ``missing``: the tag names nothing, the index lists no such platform, or the platform's
  manifest is gone (a registry's garbage collection);
- ``diverged``: the platform digest, or the index digest (in the registry's media type), differs
  from the image's first registry that has the tag;
- ``stale``: the entry's ``io.cannery.inputs`` annotation is not the input digest the current
  catalog and lock give that platform; the inputs that moved are named where the pushed image
  records them (its base digest and component labels), or where the lock resolved them after
  the pushed index's ``io.cannery.lock-epoch`` (a lock entry only gets a newer time when its
  value changed);
- ``fresh``.

Each alias of an image must name the same index as its tag, in every registry. The registries
are the build's (``builder.registries.targets``: the image's registry and its mirrors). Reads
run side by side (``workers`` threads, one task per image and registry) on one
:class:`~cannery.oci.OCIClient`, whose retries honour ``Retry-After``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace

from cannery.builder.jobs import INPUTS_LABEL, ImageJob
from cannery.builder.registries import targets
from cannery.lock import Lock, parse_time
from cannery.oci import NotFound, OCIClient, Reference
from cannery.oci.client import malformed
from cannery.oci.manifest import (
    INDEX_TYPES,
    Descriptor,
    MalformedManifest,
    digest_of,
    index_bytes,
    parse_index,
    platform_string,
)
from cannery.oci.publish import LOCK_EPOCH
from cannery.plan import RegistryTarget, lock_entries

# Worst first: an image's state is its worst entry's.
STATES = ("missing", "diverged", "stale", "fresh")
BASE_DIGEST_LABEL = "org.opencontainers.image.base.digest"
WORKERS = 8


@dataclass(frozen=True)
class Entry:
    """One platform of one image in one registry."""

    image: str
    platform: str
    registry: str  # the catalog's name for it
    reference: str  # REPOSITORY:TAG
    state: str  # one of STATES
    detail: str = ""
    index_digest: str | None = None
    digest: str | None = None  # the platform manifest's
    inputs: str | None = None  # what the pushed entry says it was built from
    planned: str | None = None  # what the catalog and lock give now
    moved: tuple[str, ...] = ()  # the inputs named as moved (stale only)
    locked_at: str | None = None  # the pushed index's lock epoch, ISO 8601 UTC


@dataclass(frozen=True)
class AliasEntry:
    alias: str
    owner: str  # the catalog image whose tags include it
    registry: str
    reference: str
    state: str  # fresh (names the owner's index), missing, or diverged
    points_to: str | None = None  # the image (or digest) it names now
    detail: str = ""


@dataclass(frozen=True)
class ImageStatus:
    image: str
    tag: str
    aliases: tuple[str, ...]
    entries: tuple[Entry, ...]
    alias_entries: tuple[AliasEntry, ...] = ()

    @property
    def state(self) -> str:
        found = {e.state for e in self.entries} | {a.state for a in self.alias_entries}
        return next((s for s in STATES if s in found), "fresh")


@dataclass(frozen=True)
class FamilyStatus:
    images: tuple[ImageStatus, ...]
    now: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc))

    @property
    def counts(self) -> dict[str, int]:
        """How many entries (and aliases) are in each state."""
        out = dict.fromkeys(STATES, 0)
        for img in self.images:
            for e in img.entries:
                out[e.state] += 1
            for a in img.alias_entries:
                out[a.state] += 1
        return out

    @property
    def ok(self) -> bool:
        return all(img.state == "fresh" for img in self.images)


@dataclass(frozen=True)
class _Pushed:
    """What one registry serves under an image's tag (index None: the tag names nothing)."""

    target: RegistryTarget
    reference: Reference
    index: Descriptor | None = None
    children: dict[str, Descriptor] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    gone: frozenset[str] = frozenset()  # platforms whose manifest the registry no longer has
    aliases: dict[str, str | None] = field(default_factory=dict)  # alias → digest it names
    labels: dict[str, dict[str, str]] = field(default_factory=dict)  # stale platform → labels
    problem: str = ""  # a tag that names something other than an index


def family_status(
    client: OCIClient,
    jobs: Sequence[ImageJob],
    lock: Lock,
    workers: int = WORKERS,
    now: dt.datetime | None = None,
) -> FamilyStatus:
    """Read every registry of every image in ``jobs`` (at most ``workers`` requests at a
    time) and judge each entry. A registry that cannot be read raises (NetworkError): a
    status that silently skipped one would say "fresh" about what it never saw."""
    tasks = [(job, target) for job in jobs for target in targets(job)]
    read: dict[tuple[str, str], _Pushed] = {}
    with ThreadPoolExecutor(max_workers=max(1, workers),
                            thread_name_prefix="cannery-status") as pool:
        futures = {pool.submit(_read, client, job, t): (job.name, t.name) for job, t in tasks}
        done, pending = wait(futures, return_when=FIRST_EXCEPTION)
        failed = next((exc for fut in done if (exc := fut.exception()) is not None), None)
        if failed is not None:
            for fut in pending:  # the first failure is the answer: start nothing more
                fut.cancel()
            raise failed
        for fut, key in futures.items():
            read[key] = fut.result()
    # Which image an index digest is: names what a wrong alias points at. An image's own
    # index is the one its first registry serves (and that in each mirror's media type), so a
    # mirror tag moved onto another image's index does not make it that image's.
    owners: dict[str, str] = {}
    for job in jobs:
        pushed = [read[(job.name, t.name)] for t in targets(job)]
        first = _first(pushed)
        if first is None:
            continue
        for p in pushed:
            expected = _expected_index(first, p)
            if expected is not None:
                owners.setdefault(expected, job.name)
    images = [
        _judge(job, [read[(job.name, t.name)] for t in targets(job)], lock, owners)
        for job in jobs
    ]
    return FamilyStatus(tuple(images), now or dt.datetime.now(dt.timezone.utc))


def _read(client: OCIClient, job: ImageJob, target: RegistryTarget) -> _Pushed:
    repo = Reference.parse(target.repository)
    ref = repo.with_tag(job.spec.tag)
    aliases = {a: _digest(client.head_manifest(repo.with_tag(a))) for a in job.spec.aliases}
    try:
        body, desc = client.get_manifest(ref)
    except NotFound:
        return _Pushed(target, ref, aliases=aliases)
    if desc.media_type not in INDEX_TYPES:
        return _Pushed(target, ref, desc, aliases=aliases,
                       problem=f"the tag names a {desc.media_type}, not a multi-arch index")
    try:
        entries, annotations = parse_index(body, f"{ref} index")
    except MalformedManifest as exc:
        raise malformed(ref, exc) from None
    children = {platform_string(c.platform) or "": c for c in entries}
    planned = {p.platform: p.input_digest for p in job.platforms}
    gone, labels = set(), {}
    for platform, child in children.items():
        if platform not in planned:
            continue
        if client.head_manifest(repo.with_digest(child.digest)) is None:
            gone.add(platform)
        elif (child.annotations or {}).get(INPUTS_LABEL) != planned[platform]:
            # Stale: the config's labels say which recorded inputs it was built from.
            try:
                _, config = client.image_config(repo.with_digest(child.digest))
            except NotFound:  # a config lost to GC: the moved inputs go unnamed, no more
                continue
            labels[platform] = _labels(config)
    return _Pushed(target, ref, desc, children, annotations, frozenset(gone), aliases, labels)


def _digest(desc: Descriptor | None) -> str | None:
    return desc.digest if desc is not None else None


def _labels(config: dict[str, object]) -> dict[str, str]:
    cfg = config.get("config")
    labels = cfg.get("Labels") if isinstance(cfg, dict) else None
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}


def _first(pushed: list[_Pushed]) -> _Pushed | None:
    """The registry the others are compared with: the first one that serves an index."""
    return next((p for p in pushed if p.index is not None and not p.problem), None)


def _judge(
    job: ImageJob, pushed: list[_Pushed], lock: Lock, owners: dict[str, str]
) -> ImageStatus:
    spec = job.spec
    first = _first(pushed)
    entries = []
    for p in pushed:
        locked_at = _epoch_time(p.annotations.get(LOCK_EPOCH))
        expected_index = _expected_index(first, p) if first is not None else None
        for pj in job.platforms:
            e = Entry(spec.name, pj.platform, p.target.name, str(p.reference), "fresh",
                      planned=pj.input_digest, locked_at=locked_at,
                      index_digest=_digest(p.index))
            entries.append(_entry(e, p, first, expected_index, spec_lock=(job, lock)))
    alias_entries = []
    for p in pushed:
        for alias, digest in p.aliases.items():
            ref = str(Reference.parse(p.target.repository).with_tag(alias))
            want = _digest(p.index)
            if digest is None:
                a = AliasEntry(alias, spec.name, p.target.name, ref, "missing",
                               detail="the alias names nothing")
            elif want is not None and digest == want:
                a = AliasEntry(alias, spec.name, p.target.name, ref, "fresh", spec.name)
            else:
                other = owners.get(digest, digest)
                a = AliasEntry(alias, spec.name, p.target.name, ref, "diverged", other,
                               f"names {other}, not {spec.name}'s index")
            alias_entries.append(a)
    return ImageStatus(spec.name, spec.tag, spec.aliases, tuple(entries), tuple(alias_entries))


def _entry(
    e: Entry,
    p: _Pushed,
    first: _Pushed | None,
    expected_index: str | None,
    spec_lock: tuple[ImageJob, Lock],
) -> Entry:
    if p.index is None:
        return replace(e, state="missing", detail="no such tag")
    if p.problem:
        return replace(e, state="diverged", detail=p.problem)
    child = p.children.get(e.platform)
    if child is None:
        return replace(e, state="missing", detail="the index lists no such platform")
    inputs = (child.annotations or {}).get(INPUTS_LABEL)
    e = replace(e, digest=child.digest, inputs=inputs)
    if e.platform in p.gone:
        return replace(e, state="missing",
                       detail="the index lists it but the registry no longer has its manifest")
    if first is not None and first is not p:
        theirs = first.children.get(e.platform)
        if theirs is None or theirs.digest != child.digest:
            return replace(e, state="diverged",
                           detail=f"platform digest differs from {first.target.name}'s")
        if expected_index is not None and p.index.digest != expected_index:
            return replace(e, state="diverged",
                           detail=f"index differs from {first.target.name}'s")
    if inputs != e.planned:
        job, lock = spec_lock
        moved = moved_inputs(job, lock, p.labels.get(e.platform, {}), e.platform,
                             p.annotations.get(LOCK_EPOCH))
        detail = "; ".join(moved) if moved else (
            "inputs differ; no input the image records moved: the Dockerfile the catalog "
            "renders, or an input edited in the lock by hand")
        return replace(e, state="stale", moved=tuple(moved), detail=detail)
    return e


def _expected_index(first: _Pushed, p: _Pushed) -> str | None:
    """The index digest ``p`` must serve: ``first``'s entries and annotations in ``p``'s
    media type (an OCI index and a Docker manifest list of one build differ only there)."""
    if first.index is None or p.index is None:
        return None
    if p.index.media_type == first.index.media_type:
        return first.index.digest
    children = sorted(first.children.values(), key=lambda c: c.digest)
    return digest_of(index_bytes(children, first.annotations, p.index.media_type))


def _epoch_time(value: str | None) -> str | None:
    if value is None or not value.isdigit():
        return None
    when = dt.datetime.fromtimestamp(int(value), dt.timezone.utc)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _short(digest: str) -> str:
    return digest.partition(":")[2][:12] or digest[:12]


def moved_inputs(
    job: ImageJob, lock: Lock, labels: dict[str, str], platform: str, pushed_epoch: str | None
) -> list[str]:
    """The inputs of ``platform`` that moved since the pushed image was built: those its labels
    record (the base digest, each component's version and pins) and differ from the lock's,
    then the lock entries resolved after the pushed index's lock epoch (not named twice). Every
    platform's entries count: the rendered Dockerfile carries each platform's pins."""
    spec = job.spec
    out: list[str] = []
    named: set[str] = set()
    have_base = labels.get(BASE_DIGEST_LABEL)
    if spec.base_digest and have_base and have_base != spec.base_digest:
        out.append(f"base {spec.base_image}: {_short(have_base)} → {_short(spec.base_digest)}")
        named.add(f"base:{spec.base_image}")
    for comp in spec.components:
        have = labels.get(f"io.cannery.component.{comp.name}")
        if have is not None and have != comp.label_version:
            out.append(f"component {comp.name}: {have} → {comp.label_version}")
            if comp.git:
                named.add(f"git:{comp.git.url}#{comp.git.ref}")
            named.update(f"url:{w.url}" for w in comp.wheels)
    if pushed_epoch is not None and pushed_epoch.isdigit():
        for key, (_, at) in lock_entries(spec, lock).items():
            if key not in named and parse_time(at).timestamp() > int(pushed_epoch):
                out.append(f"{key} (locked {at[:10]}, after the pushed build's lock)")
    return out
