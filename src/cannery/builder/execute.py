"""Run planned builds: per platform build → push by digest; then one index → then the tags.

Order is the safety argument. Platform manifests are pushed by digest (no tag); the index is
written by digest only after every platform it lists is in the registry; the tags move last,
and only when every platform of the image succeeded. A reader of the tag therefore sees the old
complete index or the new complete index, never a partial one.

No-op builds: each platform's input digest (see ``builder/jobs.py``) is stored as the
``io.cannery.inputs`` label and as an annotation on the platform's entry in the index. A
platform whose digest matches the entry in the index the tag points at now, and whose manifest
is still in the registry, is not rebuilt (``force`` rebuilds). When nothing was rebuilt the
merged index is byte-identical to the current one, and nothing is written at all; when every
registry's tags already name it (and this run's attestations are attached), the publish is not
even re-run (``already_published``). What each image's build reads first is read for every
image of the run side by side, before its turn (``builder/probe.py``).

The index also carries ``io.cannery.lock-epoch`` (``plan.lock_epoch``): ``move_tags`` does not
move a tag back to an index from an older lock (``force`` does). Only the catalog's whole
platform set is ever merged.
"""

from __future__ import annotations

# Importable from here, where the commands look for them.
__all__ = ["GuessFailed", "ImageResult", "PlatformResult", "Settings", "Target", "build_image",
           "check_target", "current_children", "merge_from_digest_dir",
           "probe_ahead", "read_ahead", "secret_files", "unchanged_child"]

import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from cannery.builder.engine import BuildOptions, Built, Engine, Present
from cannery.builder.jobs import ImageJob, PlatformJob
from cannery.builder.layout import _copy_into_layout, _write_layout_platforms
from cannery.builder.merge import merge_from_digest_dir, publish_merged
from cannery.builder.probe import (
    Probe,
    current_children,
    probe_ahead,
    probe_image,
    read_ahead,
    unchanged_child,
)
from cannery.builder.progress import Reporter
from cannery.builder.registries import protect_platform
from cannery.builder.results import ImageResult, PlatformResult, Target, child_descriptor
from cannery.errors import FatalError, InputError
from cannery.lock import secret_url
from cannery.oci import Reference
from cannery.oci.manifest import (
    Descriptor,
)
from cannery.oci.publish import push_image_dir
from cannery.oci.reference import valid_digest
from cannery.render.bake import cache_ref
from cannery.util.background import in_background
from cannery.util.cmd import stream
from cannery.util.fs import atomic_write


@dataclass(frozen=True)
class Settings:
    engine: Engine
    log_dir: Path
    force: bool = False
    cert_dir: Path | None = None
    network: str | None = None
    builder: str | None = None
    registry_cache: bool = False
    # The jobs were planned from a guessed lock (cannery.lock.PendingLock): ``settle`` says
    # whether it held, asked before anything is exported, pushed or merged; ``wrong`` is set
    # once it is known not to, and stops a build that is running.
    settle: Callable[[], bool] | None = None
    wrong: threading.Event | None = None


class GuessFailed(Exception):
    """The jobs were planned from a guessed lock that did not hold (``error`` None: plan and
    build again from the real lock) or could not be resolved (``error``). Nothing was pushed
    or written. Not a FatalError: it ends the whole run, not one image."""

    def __init__(self, error: FatalError | None) -> None:
        super().__init__(error.message if error else "the guessed lock did not hold")
        self.error = error


def _check_guess(settings: Settings) -> None:
    if settings.settle is None:
        return
    try:
        held = settings.settle()
    except FatalError as exc:
        raise GuessFailed(exc) from None
    if not held:
        raise GuessFailed(None)


@contextmanager
def _scratch() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="cannery-build-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def secret_files(image: ImageJob, work: Path) -> tuple[tuple[str, Path], ...]:
    """Each build secret of ``image`` (a download's URL) from the environment into a file of
    its own in the platform's scratch directory (mode 0600, removed with it)."""
    out = []
    for name in image.spec.secrets:
        value = secret_url(name)
        folder = work / "secrets"
        folder.mkdir(mode=0o700, exist_ok=True)
        path = folder / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(value)
        out.append((name, path))
    return tuple(out)


def _build_platform(
    image: ImageJob,
    job: PlatformJob,
    settings: Settings,
    target: Target,
    reporter: Reporter,
    context: Path,
    work: Path,
    present: Present,
) -> Built:
    repo = Reference.parse(image.repository) if target.client else None
    opts = BuildOptions(
        # an image that copies the checkout builds in it; else the Dockerfile is all it needs
        context=image.context or context,
        dockerfile=context / "Dockerfile",
        work=work,
        push_repository=f"{repo.host}/{repo.repository}" if repo else None,
        oci_output=target.oci_dir is not None,
        cert_dir=settings.cert_dir,
        network=settings.network,
        builder=settings.builder,
        no_cache=settings.force,
        cache_ref=cache_ref(image.spec, job.platform) if settings.registry_cache else None,
        secrets=secret_files(image, work),
    )
    steps = settings.engine.steps(image, job, opts)
    log_path = settings.log_dir / image.name / f"{job.slug}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_text("")

    # An engine that pushes with Docker's login (buildx) gets cannery's, for the hosts it
    # names, in a temporary Docker config removed when its commands are done.
    hosts = settings.engine.login_hosts(image, opts)
    login = (
        target.client.credentials.docker_config(hosts)
        if hosts and target.client is not None
        else nullcontext(None)
    )
    with login as login_env:

        def run(argv: list[str]) -> list[str]:
            lines: list[str] = []

            def on_line(line: str) -> None:
                lines.append(line)
                reporter.line(image.name, job, line)

            # stream() gives the engine child_env(): no credential variable of cannery's
            # reaches it (the logins it needs are in the file ``login_env`` names).
            rc, tail = stream(argv, log_path, on_line, extra_env=login_env, stop=settings.wrong)
            if rc != 0:
                _check_guess(settings)  # a wrong guess explains a failure (or stopped the build)
                raise _PlatformFailed(job, f"{argv[0]} {argv[1]} exited {rc}", tail, log_path)
            return lines

        for argv in steps:
            run(argv)
        _check_guess(settings)
        built = settings.engine.collect(image, job, opts, run, present)
    if built.layers:  # in the log, as stream notes each command's exit
        with log_path.open("a", encoding="utf-8") as fh:
            fh.write(f"# exported {built.exported} of {built.layers} layers (the target has "
                     f"the other {built.layers - built.exported})\n")
    return built


class Presence:
    """Whether the target already holds a blob, so the engine need not export it again; the
    registry's yes answers are kept (``seen``) so the upload does not ask again."""

    def __init__(self, target: Target, repo: Reference | None) -> None:
        self.target, self.repo = target, repo
        self.seen: set[str] = set()
        self._early: Callable[[], None] | None = None

    def ask_early(self, previous: Descriptor) -> None:
        """While the build runs, ask for the layers of ``previous`` (the platform manifest the
        tag names now: the steps a bump leaves alone wrote the same layers); the yes answers
        join ``seen``. Only a speed-up: a failure here is dropped, and a layer not answered
        for is asked after the build, as before."""
        client, repo = self.target.client, self.repo
        if client is None or repo is None:
            return

        def ask() -> None:
            try:
                body, _ = client.get_manifest(repo.with_digest(previous.digest))
                layers = json.loads(body).get("layers") or []
                digests = [str(x["digest"]) for x in layers if valid_digest(str(x["digest"]))]
                with ThreadPoolExecutor(max_workers=4) as pool:
                    answers = list(pool.map(lambda d: client.blob_exists(repo, d), digests))
            except Exception:  # only a speed-up: the asking after the build decides
                return
            self.seen.update(d for d, found in zip(digests, answers, strict=True) if found)

        self._early = in_background(ask, "cannery-presence")

    def settle(self) -> None:
        """Wait for ``ask_early``'s answers (before ``seen`` is read or asked)."""
        early = self._early
        if early is not None:
            early()  # once done, returns at once: never reset, so no race

    def __call__(self, desc: Descriptor) -> bool:
        self.settle()
        if desc.digest in self.seen:
            return True
        if self.target.client and self.repo:
            found = self.target.client.blob_exists(self.repo, desc.digest)
            if found:
                self.seen.add(desc.digest)
            return found
        if self.target.oci_dir:
            path = self.target.oci_dir / "blobs" / desc.digest.replace(":", "/", 1)
            return path.is_file() and path.stat().st_size == desc.size
        return False


class _PlatformFailed(FatalError):
    """A platform's build command failed (exit 1: a build failure, not bad input)."""

    exit_code = 1

    def __init__(self, job: PlatformJob, reason: str, tail: list[str], log: Path) -> None:
        super().__init__(f"{job.platform}: {reason} (log: {log})")
        self.reason = reason
        self.tail = tail
        self.log = log


def build_image(
    image: ImageJob, settings: Settings, target: Target, reporter: Reporter
) -> ImageResult:
    """Build every planned platform of one image, then publish it; never a partial tag.

    One error path: whatever fails (the registry read, a platform, the publish) ends this
    image with one line and its exit status, and the run goes on with the next image."""
    started = time.monotonic()
    result = ImageResult(image.name, image.repository, list(image.tags))
    try:
        probe = _probe(image, settings, target)
        children = _build_platforms(image, settings, target, reporter, result, probe)
        _check_guess(settings)
        if target.merge:
            kept_all = probe is not None and len(probe.kept) == len(image.platforms)
            published = probe.published if probe is not None and kept_all else None
            attested = probe is not None and probe.attested
            publish_merged(image, children, target, result, reporter, published, attested)
        elif target.oci_dir and target.client is None:  # a subset of platforms, in a layout
            _write_layout_platforms(target.oci_dir, children, image.tags[0])
            result.output = str(target.oci_dir)
    except FatalError as exc:
        result.error, result.exit_code = exc.message, exc.exit_code
    except OSError as exc:  # a log, layout or descriptor file that cannot be written
        result.error, result.exit_code = f"{exc.filename or ''}: {exc.strerror or exc}", 2
    result.seconds = time.monotonic() - started
    return result


def _probe(image: ImageJob, settings: Settings, target: Target) -> Probe | None:
    """This image's registry state: the probe read ahead for this very job, else read now;
    None with nothing to read (no registry, or ``force``: everything is built)."""
    if target.client is None or settings.force:
        return None
    ahead = target.probes.get(image.name)
    if ahead is not None:
        probe = ahead.result()
        if probe.job == image:
            return probe
    early = target.read_ahead.get((image.repository, image.tags[0]))
    return probe_image(target.client, image, early, check_published=target.may_skip_publish,
                       attested=target.attested)


def _build_platforms(
    image: ImageJob,
    settings: Settings,
    target: Target,
    reporter: Reporter,
    result: ImageResult,
    probe: Probe | None,
) -> list[Descriptor]:
    """Each platform: skipped when ``probe`` says it is unchanged, else built and pushed (or
    written to the layout); its descriptor for the index. Stops at the first platform that
    fails."""
    current: dict[str, Descriptor] = {}
    kept: dict[str, Descriptor] = {}
    if probe is not None:
        current, kept = probe.current, probe.kept
    children: list[Descriptor] = []
    builds = any(job.platform not in kept for job in image.platforms)
    # A scratch directory only for what is built (a nightly skips most images whole).
    with _scratch() if builds else nullcontext(None) as scratch:
        if scratch is not None:
            context = scratch / "context"
            context.mkdir()
            (context / "Dockerfile").write_text(image.dockerfile, encoding="utf-8")
        for job in image.platforms:
            pres = PlatformResult(job.platform, job.input_digest)
            result.platforms.append(pres)
            if job.platform in kept:
                pres.skipped = "unchanged inputs, already in the registry"
                pres.digest = kept[job.platform].digest
                pres.descriptor = kept[job.platform]
                reporter.skipped(image.name, job, pres.skipped)
            else:
                assert scratch is not None
                pres.descriptor = _one_platform(
                    image, job, settings, target, reporter, scratch, pres,
                    current.get(job.platform),
                )
            children.append(pres.descriptor)
            if target.digest_dir:  # a CI leg's merge job needs it, built or skipped
                _write_descriptor(target.digest_dir, image.name, job, pres.descriptor)
    return children


def _one_platform(
    image: ImageJob,
    job: PlatformJob,
    settings: Settings,
    target: Target,
    reporter: Reporter,
    scratch: Path,
    pres: PlatformResult,
    previous: Descriptor | None = None,
) -> Descriptor:
    """Build one platform and push it by digest (or copy it into the layout); on failure,
    record it on ``pres`` and the reporter, then re-raise. ``previous``: the platform's entry
    in the index the tag names now, whose layers are asked for while the build runs."""
    reporter.start(image.name, job)
    t0 = time.monotonic()
    work = scratch / job.slug
    work.mkdir()
    repo = Reference.parse(image.repository)
    present = Presence(target, repo if target.client else None)
    if previous is not None and not settings.engine.pushes_while_building:
        present.ask_early(previous)
    if target.warm is not None:
        in_background(target.warm, "cannery-warm")  # never waited for: it reports nothing
    try:
        built = _build_platform(
            image, job, settings, target, reporter, scratch / "context", work, present
        )
        pres.log = str(settings.log_dir / image.name / f"{job.slug}.log")
        if built.descriptor is not None:
            desc = built.descriptor
        elif target.client:
            assert built.layout is not None
            reporter.note(image.name, job, "pushing by digest")
            present.settle()
            desc = push_image_dir(target.client, repo, built.layout, frozenset(present.seen))
        else:
            assert built.layout is not None and target.oci_dir is not None
            desc = _copy_into_layout(built.layout, target.oci_dir)
        if target.client:  # kept from "delete untagged" GC until, and after, the merge
            protect_platform(target.client, repo, image, job, desc)
    except FatalError as exc:  # the build, or the push: a refused password, an untrusted CA
        failed = exc if isinstance(exc, _PlatformFailed) else None
        pres.error = failed.reason if failed else exc.message
        pres.log = str(failed.log) if failed else pres.log
        pres.seconds = time.monotonic() - t0
        reporter.failed(image.name, job, pres.error, failed.tail if failed else [])
        if failed is None:
            exc.message = f"{job.platform}: {exc.message}"
        raise
    pres.seconds = time.monotonic() - t0
    pres.digest = desc.digest
    reporter.finished(image.name, job, desc.digest)
    return child_descriptor(desc, job)








def _write_descriptor(root: Path, image: str, job: PlatformJob, desc: Descriptor) -> None:
    atomic_write(root / image / f"{job.slug}.json", json.dumps(desc.to_json(), indent=2) + "\n")














def check_target(target: Target) -> None:
    if target.oci_dir is not None and target.oci_dir.exists() and not target.oci_dir.is_dir():
        raise InputError(f"--output oci:{target.oci_dir}: exists and is not a directory")
