"""What the registries hold for each image, read before its build: the tag's current index,
which platforms are unchanged (the skip decision), and whether every registry already serves
the index a publish would write. A build consumes its image's probe; the probes of a run are
read side by side (``probe_ahead``), so a nightly with nothing to build waits for the registry
once per batch, not once per request.

Reads only: a probe writes nothing. It is taken for the job it was made for and no other (an
image re-planned on its parent's new index, or after the lock's Python pins moved, reads the
registry again when its turn comes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from cannery.builder.jobs import INPUTS_LABEL, ImageJob, PlatformJob
from cannery.builder.registries import (
    RegistryResult,
    already_published,
    known_platforms,
    targets,
)
from cannery.errors import NetworkError
from cannery.oci import NotFound, OCIClient, Reference
from cannery.oci.manifest import (
    DOCKER_LIST,
    INDEX_TYPES,
    OCI_INDEX,
    Descriptor,
    MalformedManifest,
    digest_of,
    parse_index,
    platform_string,
)
from cannery.oci.publish import LOCK_EPOCH, index_body

# Registry reads in flight at once, as `cannery status` bounds them: enough to hide a
# request's round trip, few enough not to look like a flood to a registry's rate limit.
READS_AT_ONCE = 8


def index_annotations(image: ImageJob) -> dict[str, str]:
    """The index's annotations: the lock epoch (no tag in the index: every tag names one
    digest; the epoch guards the tag move)."""
    return {LOCK_EPOCH: str(image.lock_epoch)}


def current_children(client: OCIClient, repo: Reference, tag: str) -> dict[str, Descriptor]:
    """platform → entry of the index ``tag`` points at now (empty if none, or not an index)."""
    ref = repo.with_tag(tag)
    try:  # one GET: a tag that names nothing answers 404 to it as to a HEAD
        body, desc = client.get_manifest(ref)
    except NotFound:
        return {}
    if desc.media_type not in INDEX_TYPES:
        return {}
    try:
        children, _ = parse_index(body, f"{ref} index")
    except MalformedManifest as exc:
        raise NetworkError(f"{ref.host}: malformed answer: {exc}") from None
    out: dict[str, Descriptor] = {}
    for child in children:
        platform = platform_string(child.platform)
        if platform:
            out[platform] = child
    return out


def unchanged_child(
    client: OCIClient, repo: Reference, job: PlatformJob, have: Descriptor | None
) -> Descriptor | None:
    """The skip decision: ``have`` (the tag's current entry for this platform) when it was
    built from the same inputs and its manifest is still in the registry (a registry's
    garbage collection may have deleted it); else None, and the platform is built."""
    if have is None or (have.annotations or {}).get(INPUTS_LABEL) != job.input_digest:
        return None
    if client.head_manifest(repo.with_digest(have.digest)) is None:
        return None
    return have


@dataclass(frozen=True)
class Probe:
    """One image's registry state, as its build reads it first."""

    job: ImageJob  # what it was read for: used for this job only
    current: dict[str, Descriptor]  # platform → the tag's entry, or a finished leg's manifest
    kept: dict[str, Descriptor]  # platform → its unchanged manifest (not rebuilt)
    # Every platform kept and every registry's tags already on the index a publish would
    # write: that publish's results (nothing to write). None: publish.
    published: list[RegistryResult] | None
    attested: bool = False  # and this run's attestations are all attached and kept


def expected_index(image: ImageJob, children: list[Descriptor]) -> Descriptor:
    """The index a publish of ``children`` writes in the image's first registry."""
    docker = targets(image)[0].media_types == "docker"
    media_type = DOCKER_LIST if docker else OCI_INDEX
    annotations = index_annotations(image)
    body = index_body(children, annotations, media_type)
    return Descriptor(media_type, digest_of(body), len(body), annotations=annotations)


# (image, platform manifests, index) -> whether every attestation is attached and kept
Attested = Callable[[ImageJob, list[Descriptor], Descriptor], bool]


def probe_image(
    client: OCIClient,
    image: ImageJob,
    early: Future[dict[str, Descriptor]] | None = None,
    *,
    check_published: bool = True,
    attested: Attested | None = None,
) -> Probe:
    """Read ``image``'s state: the tag's index (``early``, when read ahead), what a publish
    that did not finish left under the per-platform tags, each platform's skip decision, then,
    when every platform is kept and ``check_published``, ``already_published`` and (when it
    is) ``attested`` (the attester's reads-only check)."""
    repo = Reference.parse(image.repository)
    current = early.result() if early else current_children(client, repo, image.tags[0])
    current = known_platforms(client, repo, image, current)
    kept = {}
    for job in image.platforms:
        found = unchanged_child(client, repo, job, current.get(job.platform))
        if found is not None:
            kept[job.platform] = found
    published, complete = None, False
    if check_published and len(kept) == len(image.platforms):
        children = [kept[job.platform] for job in image.platforms]
        published = already_published(client, image, children, index_annotations(image))
        if published is not None and attested is not None:
            complete = attested(image, children, expected_index(image, children))
    return Probe(image, current, kept, published, complete)


def read_ahead(
    client: OCIClient, where: list[tuple[str, str]]
) -> tuple[ThreadPoolExecutor, dict[tuple[str, str], Future[dict[str, Descriptor]]]]:
    """Start reading what each ``(repository, tag)`` points at now, ``READS_AT_ONCE`` at a
    time beside the caller (the read each probe starts with); the caller shuts the pool down,
    and may queue the probes on it (``probe_ahead``). Used while the lock settles, before any
    build needs them."""
    pool = ThreadPoolExecutor(max_workers=READS_AT_ONCE, thread_name_prefix="cannery-read-ahead")
    futures = {
        (repo, tag): pool.submit(current_children, client, Reference.parse(repo), tag)
        for repo, tag in dict.fromkeys(where)
    }
    return pool, futures


def probe_ahead(
    pool: ThreadPoolExecutor,
    client: OCIClient,
    images: Sequence[ImageJob],
    early: dict[tuple[str, str], Future[dict[str, Descriptor]]],
    *,
    check_published: bool,
    attested: Attested | None = None,
) -> dict[str, Future[Probe]]:
    """Queue a probe of each image on ``pool`` (the read-ahead pool: its reads were queued
    first, so a probe that waits for one never waits for a read not yet started), in build
    order."""
    return {
        image.name: pool.submit(
            probe_image, client, image, early.get((image.repository, image.tags[0])),
            check_published=check_published, attested=attested,
        )
        for image in images
    }
