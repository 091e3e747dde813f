"""The index merge: every platform of the image, one index by digest, then the tags (and CI's
``--merge-only``, from the descriptors its platform legs wrote)."""

from __future__ import annotations

import json

from cannery.builder.jobs import INPUTS_LABEL, ImageJob
from cannery.builder.layout import _write_layout_index
from cannery.builder.probe import expected_index, index_annotations
from cannery.builder.progress import Reporter
from cannery.builder.registries import (
    RegistryResult,
    already_published,
    publish_everywhere,
)
from cannery.builder.results import ImageResult, PlatformResult, Target, child_descriptor
from cannery.errors import FatalError, InputError
from cannery.oci import NotFound, Reference
from cannery.oci.manifest import (
    Descriptor,
    platform_string,
)
from cannery.oci.reference import valid_digest


def publish_merged(
    image: ImageJob,
    children: list[Descriptor],
    target: Target,
    result: ImageResult,
    reporter: Reporter,
    published: list[RegistryResult] | None = None,
    attested: bool = False,
) -> None:
    """Merge ``children`` into one index and move the tags, only when the index holds every
    platform the catalog lists for the image (a subset, e.g. ``--merge-only --platform``,
    would move the tag to a partial image). ``published``: what the image's probe found,
    every registry already serving that index under every tag: nothing is written (once this
    run's attestations are found attached: ``attested`` says the probe found them so)."""
    want = set(image.spec.platforms)
    have = {platform_string(c.platform) or "(none)" for c in children}
    if have != want:
        missing = ", ".join(sorted(want - have)) or "none"
        extra = ", ".join(sorted(have - want)) or "none"
        raise InputError(
            f"{image.name}: not merging an index of {', '.join(sorted(have)) or 'nothing'}: "
            f"the catalog lists {', '.join(sorted(want))} (missing: {missing}; not listed: "
            f"{extra})"
        )
    # No tag in the index (every tag names one digest); the lock epoch guards the tag move.
    annotations = index_annotations(image)
    if target.client:
        regs = _settled(image, children, target, published, attested) or publish_everywhere(
            target.client, image, children, target.attest, annotations=annotations,
            lock_epoch=image.lock_epoch, force=target.force,
            attest_platforms=target.attest_platforms,
        )
        result.registries = [r.to_json() for r in regs]
        result.index_digest = regs[0].index_digest
        result.tag_moves = regs[0].tag_moves
        failed = [r for r in regs if r.error]
        if failed:
            raise _TagsNotMoved(
                "; ".join(f"{r.name or r.repository}: {r.error}" for r in failed),
                failed[0].exit_code or 2,
            )
        if result.index_digest:
            reporter.published(image.name, result.index_digest, result.tags_moved)
    elif target.oci_dir:
        index = _write_layout_index(target.oci_dir, children, annotations, image.tags)
        result.index_digest = index.digest
        result.output = str(target.oci_dir)
        reporter.published(image.name, index.digest, list(image.tags))


def _settled(
    image: ImageJob, children: list[Descriptor], target: Target,
    published: list[RegistryResult] | None, attested: bool,
) -> list[RegistryResult] | None:
    """``published`` (every registry already serves the index under every tag), once this
    run's attestations are known attached in the first registry (``attested``: the probe
    read them so; else the attester runs here); None when any had to be attached now: the
    whole publish then copies it to the mirrors (and attaches nothing twice)."""
    if published is None or attested:
        return published
    attached = 0
    if target.attest_platforms is not None:
        attached += target.attest_platforms(image, children)
    if target.attest is not None:
        attached += target.attest(image, expected_index(image, children), children)
    return published if attached == 0 else None


class _TagsNotMoved(FatalError):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def merge_from_digest_dir(image: ImageJob, target: Target, reporter: Reporter) -> ImageResult:
    """CI's merge job: read the descriptors the platform legs wrote, check each is in the
    registry, then merge and tag (or fail with no tag moved when one is missing)."""
    assert target.digest_dir is not None and target.client is not None
    result = ImageResult(image.name, image.repository, list(image.tags))
    repo = Reference.parse(image.repository)
    children = []
    for job in image.platforms:
        path = target.digest_dir / image.name / f"{job.slug}.json"
        pres = PlatformResult(job.platform, job.input_digest)
        result.platforms.append(pres)
        try:
            raw = json.loads(path.read_text())
            desc = Descriptor.from_json(raw) if isinstance(raw, dict) else None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            result.error = f"{path}: no descriptor for {job.platform} ({exc})"
            result.exit_code = 2
            return result
        if desc is None or not valid_digest(desc.digest):
            result.error = f"{path}: not a descriptor of {job.platform}"
            result.exit_code = 2
            return result
        if (desc.annotations or {}).get(INPUTS_LABEL) != job.input_digest:
            result.error = (
                f"{path}: {job.platform} was built from other inputs than this catalog and "
                "lock plan"
            )
            result.exit_code = 2
            return result
        # Trust nothing unchecked: the registry's bytes under the digest (hashed), their size
        # and media type must be what the leg wrote, and their config name this platform.
        try:
            found, _ = target.client.image_config(repo.with_digest(desc.digest))
        except NotFound:
            result.error = f"{job.platform}: {desc.digest} is not in {image.repository}"
            result.exit_code = 2
            return result
        except FatalError as exc:
            result.error, result.exit_code = f"{job.platform}: {exc.message}", exc.exit_code
            return result
        have = found.platform or {}
        if (
            (found.size, found.media_type) != (desc.size, desc.media_type)
            or any(have.get(k) != v for k, v in job.os_arch.items())
            or (desc.platform is not None and platform_string(desc.platform) != job.platform)
        ):
            result.error = (
                f"{path}: {job.platform}: the registry holds {desc.digest} as {found.size} "
                f"bytes of {found.media_type} for {platform_string(have)}; the file says "
                f"{desc.size} bytes of {desc.media_type}"
                + (f" for {platform_string(desc.platform)}" if desc.platform else "")
            )
            result.exit_code = 2
            return result
        child = child_descriptor(found, job)
        pres.digest = child.digest
        pres.skipped = "built by another job"
        children.append(child)
    try:
        published = None
        if target.may_skip_publish:  # a nightly whose legs all skipped: often nothing to do
            published = already_published(
                target.client, image, children, index_annotations(image)
            )
        publish_merged(image, children, target, result, reporter, published)
    except FatalError as exc:
        result.error, result.exit_code = exc.message, exc.exit_code
    return result
