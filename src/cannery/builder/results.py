"""What a build reports (per image, per platform) and where its images go (``Target``)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from cannery.builder.jobs import INPUTS_LABEL, ImageJob, PlatformJob
from cannery.builder.probe import Probe
from cannery.oci import OCIClient
from cannery.oci.manifest import (
    Descriptor,
)
from cannery.oci.publish import TagMoves


@dataclass
class PlatformResult:
    platform: str
    input_digest: str
    digest: str | None = None
    skipped: str | None = None  # why it was not rebuilt
    error: str | None = None
    seconds: float = 0.0
    log: str | None = None
    descriptor: Descriptor | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "platform": self.platform,
            "input_digest": self.input_digest,
            "digest": self.digest,
            "skipped": self.skipped,
            "error": self.error,
            "seconds": round(self.seconds, 3),
            "log": self.log,
        }


@dataclass
class ImageResult:
    image: str
    repository: str
    tags: list[str]
    platforms: list[PlatformResult] = field(default_factory=list)
    index_digest: str | None = None
    # None: no tag was written to (so none moved); else what happened to each tag, in the first
    # registry (``registries`` has every registry's).
    tag_moves: TagMoves | None = None
    registries: list[dict[str, object]] = field(default_factory=list)  # one per registry
    error: str | None = None
    seconds: float = 0.0
    output: str | None = None
    exit_code: int = 1  # when ``error``: 1 a build failed, 2 bad input or an unreachable registry

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def tags_moved(self) -> list[str]:
        return self.tag_moves.moved if self.tag_moves else []

    def to_json(self) -> dict[str, object]:
        # No tag was written to: in a registry none moved; a layout names its tags itself.
        untouched = TagMoves(not_moved=list(self.tags) if self.output is None else [])
        moves = (self.tag_moves or untouched).to_json()
        return {
            "image": self.image,
            "repository": self.repository,
            "tags": self.tags,
            "index_digest": self.index_digest,
            **moves,
            "registries": self.registries,
            "output": self.output,
            "error": self.error,
            "seconds": round(self.seconds, 3),
            "platforms": [p.to_json() for p in self.platforms],
        }


@dataclass(frozen=True)
class Target:
    """Where images go: a registry (``client``) or an OCI image layout directory."""

    client: OCIClient | None = None
    oci_dir: Path | None = None
    digest_dir: Path | None = None  # write each pushed platform's descriptor here (CI legs)
    merge: bool = True  # merge and tag (False: push platforms by digest only)
    force: bool = False  # move tags even off an index built from a newer lock
    # Attach referrers (provenance, SBOM, signatures) after the merge, before any tag moves:
    # (image, index, platform manifests) -> how many it attached; see cannery.attest.attach.
    attest: Callable[[ImageJob, Descriptor, list[Descriptor]], int] | None = None
    # What is attached to the platform manifests alone, run beside the index write (then
    # ``attest`` attaches what needs the index); see publish_everywhere.
    attest_platforms: Callable[[ImageJob, list[Descriptor]], int] | None = None
    # Reads only: whether every attestation ``attest_platforms`` and ``attest`` would attach
    # is attached (then a publish with nothing to write need not run them); see
    # Attester.complete.
    attested: Callable[[ImageJob, list[Descriptor], Descriptor], bool] | None = None
    # Work done beside each platform's build, off the critical path (the attester's imports;
    # after the first, already done).
    warm: Callable[[], None] | None = None
    # (repository, tag) -> the tag's current index entries, read while the lock was settled
    # (read_ahead); a build asks the registry itself for any other.
    read_ahead: dict[tuple[str, str], Future[dict[str, Descriptor]]] = field(
        default_factory=dict
    )
    # image name -> its registry state, read side by side ahead of the builds (probe_ahead);
    # taken only for the job it was read for.
    probes: dict[str, Future[Probe]] = field(default_factory=dict)

    @property
    def may_skip_publish(self) -> bool:
        """Whether a publish whose every tag is already on its index may be skipped (once this
        run's attestations are found attached): not for a run that pushes platforms only."""
        return self.merge


def child_descriptor(desc: Descriptor, job: PlatformJob) -> Descriptor:
    return Descriptor(
        media_type=desc.media_type,
        digest=desc.digest,
        size=desc.size,
        platform=job.os_arch,
        annotations={INPUTS_LABEL: job.input_digest},
    )
