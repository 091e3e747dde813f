"""Publish one build to every registry of an image: the one it is built into, then its mirrors.

The order is the guarantee, extended from one registry (``oci/publish.py``) to several:

1. Each platform manifest is pushed by digest to the first registry and tagged there at once
   with its per-platform tag (``TAG-amd64``): registries that delete untagged manifests
   (quay.io, SWR after about an hour; ``docker-registry garbage-collect --delete-untagged``
   at once, even the children of a tagged index) keep it between a CI leg and the merge, and
   after it; users of single-architecture mirrors pull that tag.
2. For every registry in turn: the platform manifests (and their blobs) are copied from the
   first registry by digest (``oci/mirror.py``), tagged per platform, and the index is written
   by digest: an OCI index, or a Docker manifest list where the catalog says
   ``media_types = "docker"``. The platform manifests are the same bytes everywhere (buildah
   pushes Docker v2s2), so their digests are equal in every registry; OCI-typed registries
   share one index digest, Docker-typed ones another.
3. Only when every registry has every platform and its index do the release tags move,
   registry by registry; then the rolling aliases (``latest``), registry by registry, only
   when every release tag moved everywhere.

A failure anywhere stops before step 3 (no tag moves anywhere) or is recorded per registry in
step 3 (``move_tags``' ``TagMoves``: a tag on an index from a newer lock is not moved back in
any registry, and a release tag that did not move stops it in the registries after it); the
result says, per registry, whether it serves the new tags. Re-running completes what is
missing: the platforms are found by their per-platform tags (their input digest is in the image
config's label), so nothing is rebuilt.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cannery.builder.jobs import INPUTS_LABEL, ImageJob, PlatformJob
from cannery.errors import FatalError, NetworkError
from cannery.oci import Credentials, OCIClient, Reference
from cannery.oci.auth import push_host
from cannery.oci.manifest import (
    DOCKER_LIST,
    DOCKER_MANIFEST,
    OCI_INDEX,
    Descriptor,
    digest_of,
    platform_string,
)
from cannery.oci.mirror import Mirror, refused_media_type, to_docker_manifest
from cannery.oci.publish import TagMoves, index_body, merge_index, move_tags
from cannery.plan import ImageSpec, RegistryTarget
from cannery.util.background import in_background


@dataclass
class RegistryResult:
    name: str
    repository: str
    media_types: str
    index_digest: str | None = None
    # None: no tag was written to here; else what happened to each tag (release, then aliases).
    tag_moves: TagMoves | None = None
    has_new_tags: bool = False  # every tag of this build points at this build's index here
    error: str | None = None
    exit_code: int = 0  # when ``error``: the failure's exit status
    copied: dict[str, object] | None = None

    @property
    def tags_moved(self) -> list[str]:
        return self.tag_moves.moved if self.tag_moves else []

    def to_json(self) -> dict[str, object]:
        moves = self.tag_moves or TagMoves()
        return {
            "name": self.name,
            "repository": self.repository,
            "media_types": self.media_types,
            "index_digest": self.index_digest,
            **moves.to_json(),
            "has_new_tags": self.has_new_tags,
            "error": self.error,
            "copied": self.copied,
        }


def targets(image: ImageJob | ImageSpec) -> tuple[RegistryTarget, ...]:
    """Where the image goes, the registry it is built into first."""
    spec = image.spec if isinstance(image, ImageJob) else image
    return spec.registries or (RegistryTarget("", spec.repository, "oci"),)


def platform_tag(tag: str, platform: str) -> str:
    """``TAG-amd64`` (``TAG-arm64v8`` with a variant) for ``linux/amd64``: the tag that keeps a
    platform manifest from "delete untagged" GC and names it for single-architecture pulls."""
    parts = platform.split("/")
    return f"{tag}-{''.join(parts[1:])}"


def protect_platform(
    client: OCIClient, repo: Reference, image: ImageJob, job: PlatformJob, desc: Descriptor
) -> None:
    """Point ``TAG-<arch>`` at the platform manifest just pushed (nothing written if it does).
    Its bytes are read back by digest once (the read checks them against the digest)."""
    body: bytes | None = None
    for tag in image.tags:
        ref = repo.with_tag(platform_tag(tag, job.platform))
        current = client.head_manifest(ref)
        if current is not None and current.digest == desc.digest:
            continue
        if body is None:
            body, found = client.get_manifest(repo.with_digest(desc.digest))
        client.put_manifest(ref, body, found.media_type)


def platforms_by_tag(
    client: OCIClient, repo: Reference, image: ImageJob, other: dict[str, str] | None = None
) -> dict[str, Descriptor]:
    """platform → its manifest, found by per-platform tag, when that manifest was built from
    this plan's inputs (the ``io.cannery.inputs`` label of its config says so). What a build
    whose publish did not finish left behind: a re-run takes it instead of rebuilding.
    ``other``: platform → a manifest digest already known to be built from other inputs (the
    index's entry, whose annotation says so): a tag still on it is not read further."""
    out: dict[str, Descriptor] = {}
    for job in image.platforms:
        ref = repo.with_tag(platform_tag(image.tags[0], job.platform))
        head = client.head_manifest(ref)
        if head is None or (other or {}).get(job.platform) == head.digest:
            continue
        body, desc = client.get_manifest(ref)
        try:
            config = json.loads(body)["config"]["digest"]
            labels = json.loads(client.get_blob(repo, str(config)))["config"].get("Labels") or {}
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # not ours, or not an image: build it
        if labels.get(INPUTS_LABEL) == job.input_digest:
            out[job.platform] = Descriptor(
                desc.media_type,
                desc.digest,
                desc.size,
                job.os_arch,
                {INPUTS_LABEL: job.input_digest},
            )
    return out


def publish_everywhere(
    client: OCIClient,
    image: ImageJob,
    children: list[Descriptor],
    attest: Callable[[ImageJob, Descriptor, list[Descriptor]], object] | None = None,
    *,
    annotations: dict[str, str] | None = None,
    lock_epoch: int | None = None,
    force: bool = False,
    attest_platforms: Callable[[ImageJob, list[Descriptor]], object] | None = None,
) -> list[RegistryResult]:
    """Steps 2 and 3 above for a build whose platform manifests are in the first registry.
    ``attest`` attaches referrers (provenance, SBOM, signatures) in the first registry once its
    index is written, before any mirror is placed, so each mirror gets them with the copy;
    ``attest_platforms``, what is attached to the platform manifests alone, runs beside the
    first registry's index write (it needs only the manifests), and is waited for before
    ``attest`` and before anything else: its failure, like ``attest``'s, moves no tag (when
    the index write fails too, that error is the one reported).
    ``annotations`` go on every index (the lock epoch); every tag move is ``move_tags``'s, with
    ``lock_epoch`` and ``force``, so a tag on an index from a newer lock is not moved back in any
    registry. A registry whose release tag did not move (refused, failed or uncertain) stops the
    release tag in the registries after it, and every alias."""
    where = targets(image)
    results = [RegistryResult(t.name, t.repository, t.media_types) for t in where]
    primary = Reference.parse(where[0].repository)
    jobs = {job.platform: job for job in image.platforms}
    indexes: list[Descriptor | None] = []
    for target, result in zip(where, results, strict=True):
        try:
            beside = None
            if attest_platforms is not None and not indexes:
                beside = in_background(
                    functools.partial(attest_platforms, image, children), "cannery-attest"
                )
            try:
                placed = _place(
                    client, image, primary, target, children, jobs, result, annotations or {}
                )
            except BaseException as exc:
                # The index write's error is the one reported (its hint names the catalog
                # setting); the attestations are waited for, not after an interrupt.
                if beside is not None and not isinstance(exc, KeyboardInterrupt):
                    with contextlib.suppress(Exception):
                        beside()
                raise
            if beside is not None:
                beside()
            indexes.append(placed)
            if attest is not None and len(indexes) == 1:
                attest(image, placed, children)
        except FatalError as exc:
            result.error, result.exit_code = exc.message, exc.exit_code
            indexes.append(None)
            break  # no tag moves anywhere; the registries after it are not touched
    if all(r.error is None for r in results) and len(indexes) == len(results):
        # The release tag first, everywhere; then the aliases (ImageJob.tags: tag, aliases).
        for tags in (list(image.tags[:1]), list(image.tags[1:])):
            for target, result, index in zip(where, results, indexes, strict=True):
                assert index is not None
                if any(r.error for r in results):
                    _add(result, TagMoves(not_moved=tags))
                    continue
                try:
                    moves = move_tags(
                        client, Reference.parse(target.repository), index, tags,
                        lock_epoch=lock_epoch, force=force,
                    )
                except FatalError as exc:  # e.g. the index's read-back before any tag
                    moves = TagMoves(
                        not_moved=tags, error=exc.message, exit_code=exc.exit_code
                    )
                _add(result, moves)
                if moves.error:
                    result.error, result.exit_code = moves.error, moves.exit_code
    for target, result in zip(where, results, strict=True):
        result.has_new_tags = _serves(client, target, result, list(image.tags))
    return results


def already_published(
    client: OCIClient,
    image: ImageJob,
    children: list[Descriptor],
    annotations: dict[str, str],
) -> list[RegistryResult] | None:
    """What ``publish_everywhere`` would find with nothing to write, read without writing:
    in every registry, each tag already names the very index it would write (its digest,
    computed here from ``children`` as each registry's copy of them would be) and each
    per-platform tag the platform manifest. Then the results of a publish that moved no tag
    (every tag unchanged, none copied); else None (anything else: publish). A no-op nightly
    then reads 3 manifests per registry per image instead of about 20."""
    where = targets(image)
    primary = Reference.parse(where[0].repository)
    jobs = {job.platform: job for job in image.platforms}
    results = []
    for target in where:
        repo = Reference.parse(target.repository)
        docker = target.media_types == "docker"
        placed = [_copied(client, primary, repo, child, docker) for child in children]
        body = index_body(placed, annotations, DOCKER_LIST if docker else OCI_INDEX)
        digest = digest_of(body)
        want = {tag: digest for tag in image.tags}
        for child in placed:
            job = jobs.get(platform_string(child.platform) or "")
            if job is None:
                return None
            want |= {platform_tag(tag, job.platform): child.digest for tag in image.tags}
        for tag, expected in want.items():
            found = client.head_manifest(repo.with_tag(tag))
            if found is None or found.digest != expected:
                return None
        result = RegistryResult(target.name, target.repository, target.media_types, digest,
                                TagMoves(unchanged=list(image.tags)), has_new_tags=True)
        results.append(result)
    return results


def _copied(
    client: OCIClient, primary: Reference, repo: Reference, child: Descriptor, docker: bool
) -> Descriptor:
    """``child`` (a platform manifest of the first registry) as ``Mirror.copy_manifest`` writes
    it in ``repo``: the same bytes, or with ``docker``, its Docker form (which needs its
    bytes: one read)."""
    if repo.name == primary.name or not docker or child.media_type == DOCKER_MANIFEST:
        return child
    body, _ = client.get_manifest(primary.with_digest(child.digest))
    converted = to_docker_manifest(body, f"{primary.name}@{child.digest}")
    return Descriptor(DOCKER_MANIFEST, digest_of(converted), len(converted), child.platform,
                      child.annotations)


def _add(result: RegistryResult, moves: TagMoves) -> None:
    """Fold one ``move_tags`` answer (release tag, then aliases) into the registry's result."""
    if result.tag_moves is None:
        result.tag_moves = moves
        return
    have = result.tag_moves
    have.moved += moves.moved
    have.unchanged += moves.unchanged
    have.uncertain += moves.uncertain
    have.not_moved += moves.not_moved
    have.settled += moves.settled
    if moves.error and not have.error:
        have.error, have.exit_code = moves.error, moves.exit_code


def _place(
    client: OCIClient,
    image: ImageJob,
    primary: Reference,
    target: RegistryTarget,
    children: list[Descriptor],
    jobs: dict[str, PlatformJob],
    result: RegistryResult,
    annotations: dict[str, str],
) -> Descriptor:
    """Every platform (copied by digest unless this is the first registry) with its per-platform
    tag, then the index by digest; return the index."""
    repo = Reference.parse(target.repository)
    docker = target.media_types == "docker"
    hint = f'registries.{target.name}.media_types = "docker" in the catalog'
    placed = []
    mirror = Mirror(client, docker_hint=hint)
    for child in children:
        desc = child
        if repo.name != primary.name:
            body, found = client.get_manifest(primary.with_digest(child.digest))
            got = mirror.copy_manifest(
                primary.with_digest(child.digest), repo, body, found, docker=docker
            )
            desc = Descriptor(
                got.media_type, got.digest, got.size, child.platform, child.annotations
            )
        job = jobs.get(platform_string(child.platform) or "")
        if job is not None:
            protect_platform(client, repo, image, job, desc)
        placed.append(desc)
    if repo.name != primary.name:
        result.copied = mirror.stats.to_json()
    media_type = DOCKER_LIST if docker else OCI_INDEX
    try:
        index = merge_index(client, repo, placed, annotations, media_type)
    except NetworkError as exc:
        raise refused_media_type(exc, repo, media_type, hint) from None
    if repo.name != primary.name and media_type == OCI_INDEX:  # the index's own referrers
        mirror.copy_referrers(primary.with_digest(index.digest), repo, index.digest)
    result.index_digest = index.digest
    return index


def _serves(
    client: OCIClient, target: RegistryTarget, result: RegistryResult, tags: list[str]
) -> bool:
    if result.index_digest is None:
        return False
    repo = Reference.parse(target.repository)
    try:
        return all(
            (d := client.head_manifest(repo.with_tag(t))) is not None
            and d.digest == result.index_digest
            for t in tags
        )
    except FatalError:
        return False


def known_platforms(
    client: OCIClient, repo: Reference, image: ImageJob, current: dict[str, Descriptor]
) -> dict[str, Descriptor]:
    """``current`` (the entries of the index the tag points at) completed by the platforms a
    build whose publish did not finish left under their per-platform tags, where those match
    this plan's inputs and the index's entry does not."""

    def matches(desc: Descriptor | None, job: PlatformJob) -> bool:
        return desc is not None and (desc.annotations or {}).get(INPUTS_LABEL) == job.input_digest

    if all(matches(current.get(j.platform), j) for j in image.platforms):
        return current
    # An entry that names other inputs is the tag's usual state after a publish: one HEAD
    # per platform then tells that nothing newer was left behind.
    other = {
        j.platform: c.digest
        for j in image.platforms
        if (c := current.get(j.platform)) is not None
        and (c.annotations or {}).get(INPUTS_LABEL) not in (None, j.input_digest)
    }
    legs = platforms_by_tag(client, repo, image, other)
    out = dict(current)
    for job in image.platforms:
        if not matches(current.get(job.platform), job) and job.platform in legs:
            out[job.platform] = legs[job.platform]
    return out


def publish_credentials(
    images: Sequence[ImageJob | ImageSpec],
    env: Mapping[str, str] | None = None,
    config_dir: Path | None = None,
) -> Credentials:
    """Credentials for a publish: each catalog registry's own variables go to its host only;
    the plain CANNERY_REGISTRY_USER/_PASSWORD only when every image goes to one host.
    ``env`` and ``config_dir`` as for :class:`Credentials` (default: this process's)."""
    where = [t for image in images for t in targets(image)]
    return Credentials(
        env, config_dir, env_host=push_host([t.repository for t in where]),
        registries=registry_hosts(images),
    )


def registry_hosts(images: Sequence[ImageJob | ImageSpec]) -> dict[str, str]:
    """Catalog registry name → host, for the per-registry credential variables."""
    where = [t for image in images for t in targets(image)]
    return {t.name: Reference.parse(t.repository).host for t in where if t.name}
