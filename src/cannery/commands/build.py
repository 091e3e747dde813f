"""cannery build: lock what is missing, render, build each platform, push by digest, merge, tag."""

from __future__ import annotations

import functools
import json
import shutil
import ssl
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from cannery.builder.buildah import BuildahEngine
from cannery.builder.buildx import BuildxEngine
from cannery.builder.engine import Engine
from cannery.builder.execute import (
    GuessFailed,
    ImageResult,
    Settings,
    Target,
    build_image,
    check_target,
    merge_from_digest_dir,
    probe_ahead,
    read_ahead,
)
from cannery.builder.jobs import ImageJob, plan_build
from cannery.builder.progress import Reporter, reporter_for
from cannery.builder.registries import publish_credentials
from cannery.catalog.image_bases import PREFIX as IMAGE_BASE
from cannery.catalog.image_bases import in_build_order
from cannery.catalog.models import IMAGE_TAG
from cannery.commands.common import (
    checkout_for,
    err,
    load_with_lock,
    out,
    select,
    with_base_digests,
)
from cannery.errors import InputError, LockError
from cannery.lock import (
    Lock,
    PendingLock,
    dump_lock,
    ensure_locked,
    pin_image_bases,
    read_lock,
    secret_url,
)
from cannery.oci import Descriptor, OCIClient
from cannery.oci.publish import TagMoves
from cannery.plan import ImageSpec, plan, plan_image
from cannery.render.dockerfile import render_dockerfile
from cannery.tls import extra_ca, ssl_context

if TYPE_CHECKING:
    # The attest stack (cryptography, protobuf, the in-toto models) is imported where a key is
    # loaded or an attester made, so a build that attaches nothing never pays its start-up.
    from cannery.attest.attach import Attester
    from cannery.attest.sign import Signer
    from cannery.catalog.load import LoadedCatalog

ENGINES: dict[str, type[BuildahEngine] | type[BuildxEngine]] = {
    "buildah": BuildahEngine,
    "buildx": BuildxEngine,
}


@dataclass(frozen=True)
class BuildRequest:
    images: list[str] | None
    catalog: Path | None
    lock: Path | None
    platforms: list[str] | None
    backend: str
    push: bool
    output: str | None
    tag_suffix: str
    builder: str | None
    force: bool
    locked: bool
    frozen: bool
    ca_cert: Path | None
    as_json: bool
    digest_dir: Path | None
    merge_only: bool
    network: str | None
    log_dir: Path
    registry_cache: bool = False
    context: Path | None = None  # the checkout images with a `path` component copy
    sign_key: str | None = None  # FILE or env:NAME (the key itself never in argv)
    attest: bool = True
    sbom: bool = False
    extra_tags: tuple[str, ...] = ()  # more tags for each image's index (a manual run's input)
    provenance_dir: Path | None = None
    # image NAME -> the index digest it was pushed with (CI: its merge job's output), pinned as
    # the base of the images built FROM it
    base_digests: tuple[str, ...] = ()  # NAME=DIGEST


@contextmanager
def _cert_dir(ca_cert: Path | None) -> Iterator[Path | None]:
    """A directory holding the extra CA as ``ca.crt``, the form buildah's --cert-dir takes."""
    extra = extra_ca(ca_cert)
    if extra is None:
        yield None
        return
    d = Path(tempfile.mkdtemp(prefix="cannery-certs-"))
    try:
        shutil.copyfile(extra, d / "ca.crt")
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@dataclass
class _Planned:
    """A build's jobs (parents before the images built FROM them), the lock they were planned
    from, and how to plan one again once the catalog images it is built FROM are pushed."""

    jobs: list[ImageJob]
    pending: PendingLock | None
    loaded: LoadedCatalog
    lock: Lock
    lock_path: Path
    replan: Callable[[str, dict[str, str]], ImageJob]


def _merges(req: BuildRequest) -> bool:
    """The build writes each image's index (what an image built FROM it pins)."""
    if req.digest_dir and not req.merge_only:
        return False
    return not (req.platforms and not req.digest_dir)


def _usage_problems(req: BuildRequest, first: list[ImageSpec], every: list[ImageSpec],
                    names: list[str]) -> list[str]:
    """What the options ask that cannot work for ``first`` (the images to build, planned
    on the lock as it is); ``every``: the whole catalog, for the owners of tags."""
    usage: list[str] = []
    for spec in first:
        if spec.built_on in names and not (req.push and _merges(req)):
            usage.append(
                f"{spec.name} is built FROM image {spec.built_on} of the same build, and pins "
                f"the index it pushes: add --push (all platforms), or build {spec.name} alone "
                "(on the digest the lock holds)"
            )
    for spec in first:
        unknown = [p for p in req.platforms or [] if p not in spec.platforms]
        if unknown:
            usage.append(
                f"{spec.name}: --platform {', '.join(unknown)} is not one of its platforms "
                f"({', '.join(spec.platforms)})"
            )
        for tag in spec.tags:
            if not IMAGE_TAG.fullmatch(tag + req.tag_suffix):
                usage.append(f"--tag-suffix {req.tag_suffix!r}: {tag + req.tag_suffix!r} is "
                             "not a valid image tag")
    owners = {(s.repository, t): s.name for s in every for t in s.tags}
    for tag in req.extra_tags:
        taken = [owners[(s.repository, tag)] for s in first
                 if owners.get((s.repository, tag), s.name) != s.name]
        if taken:
            usage.append(f"--extra-tag {tag!r}: the catalog's image {taken[0]} owns that tag in "
                         "the same repository")
        if not IMAGE_TAG.fullmatch(tag):
            usage.append(f"--extra-tag {tag[:130]!r}: not a valid image tag (letters, digits, "
                         "'_', '.', '-'; at most 128, not starting with '.' or '-')")
    shared = {s.repository for s in first if sum(t.repository == s.repository for t in first) > 1}
    if req.extra_tags and shared:
        usage.append(f"--extra-tag names one index per repository, and {', '.join(sorted(shared))} "
                     "would get several: build one image of it at a time")
    return usage


def _lock_problems(req: BuildRequest, specs: list[ImageSpec], names: list[str],
                   path: Path) -> list[str]:
    """What the lock lacks for ``specs``: an input, Python pins, a build secret's URL."""
    problems: list[str] = []
    for spec in specs:
        for item in spec.unlocked():
            if spec.built_on in names and item.startswith(f"base image {spec.base_image} "):
                continue  # pinned at the digest its parent is pushed with
            problems.append(f"{spec.name}: {item} is not in {path}")
        if spec.unpinned():
            problems.append(f"{spec.name}: Python dependencies are not in {path}")
        if not req.merge_only:  # (a merge fetches nothing)
            for name in spec.secrets:
                try:
                    secret_url(name)
                except LockError as exc:
                    problems.append(f"{spec.name}: {exc.message}")
    return problems


def _jobs(
    req: BuildRequest,
    speculate: bool = False,
    planned: Callable[[list[ImageSpec]], None] | None = None,
    tls: Callable[[], ssl.SSLContext] | None = None,
) -> _Planned:
    """The planned jobs; with ``speculate``, maybe planned from a guessed lock whose Python
    pins are still resolving (the PendingLock returned; see ``ensure_locked``); and the
    catalog they were planned from. ``planned`` is told the images (as the lock has them
    before it settles: their repositories and tags are the catalog's) once the options are
    checked, before the lock is settled. ``tls``: the command's one TLS context."""
    loaded, lk, path = load_with_lock(req.catalog, req.lock)
    cat = loaded.catalog
    names = in_build_order(cat, select(loaded, req.images))
    # --base-digest pins a parent for this run only: never written into the lock
    given = {item.partition("=")[0] for item in req.base_digests}
    pinned = with_base_digests(cat, lk, req.base_digests)
    # Options that cannot work are refused before anything is resolved or written.
    first = plan(loaded.catalog, pinned, names)
    usage = _usage_problems(req, first, plan(loaded.catalog, lk), names)
    if usage:
        raise InputError("\n".join(dict.fromkeys(usage)))
    if planned is not None:
        planned(first)
    # A catalog image built in this run is not resolved: it is pinned once pushed.
    lk, changes, pending = ensure_locked(
        loaded.catalog, lk, path, names, locked=req.locked, frozen=req.frozen,
        ca_cert=req.ca_cert, speculate=speculate, tls=tls, built=set(names) | given,
    )
    lk = with_base_digests(cat, lk, req.base_digests)
    for line in changes:
        err.print(f"lock: {line}", markup=False)
    specs = plan(loaded.catalog, lk, names)
    # said on stderr with the progress lines, JSON or not
    checkout = checkout_for(specs, req.context, req.catalog)

    def job_of(spec: ImageSpec, lock: Lock) -> ImageJob:
        return plan_build(spec, render_dockerfile(spec), lock, req.platforms, req.tag_suffix,
                          checkout, req.extra_tags)

    def replan(name: str, pushed: dict[str, str]) -> ImageJob:
        pinned = pin_image_bases(cat, lk, pushed)
        return job_of(plan_image(cat, name, pinned), pinned)

    problems = _lock_problems(req, specs, names, path)
    jobs = [job_of(spec, lk) for spec in specs]
    if problems:
        hint = "" if not req.frozen else " (--frozen never resolves: run `cannery lock`)"
        raise InputError("\n".join(problems) + hint)
    return _Planned(jobs, pending, loaded, lk, path, replan)


def _target(req: BuildRequest, client: OCIClient | None) -> Target:
    oci_dir = None
    if req.output:
        if not req.output.startswith("oci:") or len(req.output) == 4:
            raise InputError(f"--output {req.output}: expected oci:DIR")
        oci_dir = Path(req.output[4:])
    merge = not (req.digest_dir and not req.merge_only)
    if req.platforms and not req.digest_dir:
        merge = False  # a subset of platforms is pushed by digest; the tag needs them all
    target = Target(
        client=client, oci_dir=oci_dir, digest_dir=req.digest_dir, merge=merge, force=req.force
    )
    check_target(target)
    return target


def _check_options(req: BuildRequest) -> None:
    """Options that contradict each other, refused before anything is loaded."""
    if req.locked and req.frozen:
        raise InputError("--locked and --frozen: give one")
    if req.push and req.output:
        raise InputError("--push and --output: give one")
    if req.merge_only and not (req.push and req.digest_dir):
        raise InputError("--merge-only needs --push and --digest-dir")
    if req.registry_cache and req.backend != "buildx":
        raise InputError("--registry-cache is for --backend buildx (buildah keeps a local cache)")
    if req.backend not in ENGINES:
        raise InputError(f"--backend {req.backend}: expected one of {', '.join(ENGINES)}")
    if req.backend == "buildx" and not req.push:
        raise InputError("--backend buildx pushes to a registry: add --push (or use buildah)")
    if req.digest_dir and not req.push:
        raise InputError("--digest-dir records pushed platforms: add --push")
    if req.output and (not req.output.startswith("oci:") or len(req.output) == 4):
        raise InputError(f"--output {req.output}: expected oci:DIR")


def _run(req: BuildRequest, made: _Planned, jobs: list[ImageJob], settings: Settings,
         target: Target, reporter: Reporter, pushed: dict[str, str]) -> list[ImageResult]:
    """Build (or merge) each job in order; an image built FROM another of this run is planned
    again on the index its parent pushed (in ``pushed``), and not built without one."""
    made_names = {j.name for j in made.jobs}
    done: list[ImageResult] = []
    for job in jobs:
        parent = job.spec.built_on
        if parent in made_names:
            if parent not in pushed:
                done.append(ImageResult(
                    job.name, job.repository, list(job.tags),
                    error=f"not built: image {parent}, which it is built FROM, "
                    "has no new index"))
                continue
            job = made.replan(job.name, pushed)
        if req.merge_only:
            result = merge_from_digest_dir(job, target, reporter)
        else:
            result = build_image(job, settings, target, reporter)
        done.append(result)
        if result.ok and result.index_digest:
            pushed[job.name] = result.index_digest
    return done


def _signer(req: BuildRequest) -> Signer | None:
    """The signing key, loaded first (a bad key: exit 2 before anything is built)."""
    signer = None
    if req.sign_key:
        from cannery.attest.sign import load_signer

        signer = load_signer(req.sign_key)
    if (req.sign_key or req.sbom or req.provenance_dir) and not (req.push and req.attest):
        raise InputError(
            "--sign-key, --sbom and --provenance-dir attest pushed images: add --push (and "
            "--attest)"
        )
    return signer


def build_cmd(req: BuildRequest, tls_ahead: Callable[[], ssl.SSLContext] | None = None) -> int:
    """``tls_ahead``: the command's TLS context, already being made (``tls.context_ahead``)."""
    _check_options(req)
    request = req
    if not req.push and not req.output:
        request = BuildRequest(**{**req.__dict__, "output": "oci:cannery-images"})
    signer = _signer(req)
    engine: Engine = ENGINES[request.backend]()
    # Build while uv re-resolves Python pins, from the earlier pins (a framework bump seldom
    # moves them): only where nothing is pushed before the build ends (not buildx, which
    # pushes from its build) and there is a build (not --merge-only).
    speculate = not engine.pushes_while_building and not request.merge_only
    results: list[ImageResult] = []
    # One TLS context for the command (the lock's resolvers and the publish client), made
    # when first needed (or ahead, by the caller): loading the roots costs ~40 ms a context.
    tls = functools.cache(tls_ahead or (lambda: ssl_context(request.ca_cert)))
    client: OCIClient | None = None
    reads: ThreadPoolExecutor | None = None
    ahead: dict[tuple[str, str], Future[dict[str, Descriptor]]] = {}

    def planned(specs: list[ImageSpec]) -> None:
        # The publish client, made now, reads what each tag points at while the lock
        # settles (the first thing each build asks the registry).
        nonlocal client, reads, ahead
        client = OCIClient(tls(), credentials=publish_credentials(specs))
        if not (request.force or request.merge_only):
            tags = [(s.repository, s.tags[0] + request.tag_suffix) for s in specs]
            reads, ahead = read_ahead(client, tags)

    reporter = reporter_for(err)
    try:
        made = _jobs(request, speculate, planned if request.push else None, tls)
        jobs, pending, loaded = made.jobs, made.pending, made.loaded
        target = _publish_target(request, loaded, client, signer, jobs, reads, ahead)
        with _cert_dir(request.ca_cert) as cert_dir:
            settings = Settings(
                engine=engine,
                log_dir=request.log_dir,
                force=request.force,
                cert_dir=cert_dir,
                network=request.network,
                builder=request.builder,
                registry_cache=request.registry_cache,
                settle=pending.settle if pending else None,
                wrong=pending.wrong if pending else None,
            )

            def run(jobs: list[ImageJob], settings: Settings) -> list[ImageResult]:
                return _run(request, made, jobs, settings, target, reporter, pushed)

            pushed: dict[str, str] = {}

            try:
                results = run(jobs, settings)
            except GuessFailed as exc:
                if exc.error is not None:
                    raise exc.error from None
                err.print("lock: the new Python pins differ from the earlier ones: building "
                          "again from them (nothing was pushed)", markup=False)
                made = _jobs(request)  # the lock is written: nothing left to resolve
                pushed.clear()
                results = run(made.jobs, replace(settings, settle=None, wrong=None))
            if pending is not None:
                pending.settle()  # written even when no build got as far as asking
            _record_pushed_bases(request, made, pushed)
    finally:
        reporter.close()
        if reads is not None:
            reads.shutdown(cancel_futures=True)
        if client:
            client.close()
    _report(results, request.as_json)
    failed = [r for r in results if not r.ok]
    return max((r.exit_code for r in failed), default=0)


def _publish_target(
    req: BuildRequest,
    loaded: LoadedCatalog,
    client: OCIClient | None,
    signer: Signer | None,
    jobs: list[ImageJob],
    reads: ThreadPoolExecutor | None,
    ahead: dict[tuple[str, str], Future[dict[str, Descriptor]]],
) -> Target:
    """Where the run's images go, with the attester (``--attest``) and, on the read-ahead
    pool, every image's registry state, read side by side while the first builds run."""
    target = replace(_target(req, client), read_ahead=ahead)
    if client is not None and req.attest:
        from cannery.attest.provenance import warm

        attach = attester(req, loaded, client, signer)
        target = replace(target, attest=attach.index, attest_platforms=attach.platforms,
                         attested=attach.complete, warm=warm)
    if reads is not None and client is not None:
        target = replace(target, probes=probe_ahead(
            reads, client, jobs, ahead, check_published=target.may_skip_publish,
            attested=target.attested))
    return target


def _record_pushed_bases(req: BuildRequest, made: _Planned, pushed: dict[str, str]) -> None:
    """Write the digests just pushed of the catalog images others are built FROM into the
    lock, as `cannery lock` would read them (not with --locked or --frozen)."""
    cat = made.loaded.catalog
    mine = {n: d for n, d in pushed.items() if IMAGE_BASE + n in cat.bases}
    if not mine or req.locked or req.frozen:
        return
    from cannery.util.fs import atomic_write

    current = read_lock(made.lock_path) if made.lock_path.exists() else made.lock
    atomic_write(made.lock_path, dump_lock(pin_image_bases(cat, current, mine)))
    for name, digest in mine.items():
        err.print(f"lock: pinned image {name}'s base entry at {digest} (just pushed)",
                  markup=False)


def attester(
    req: BuildRequest, loaded: LoadedCatalog, client: OCIClient, signer: Signer | None
) -> Attester:
    """What attaches provenance, SBOM and signatures after each merge, before the tags move."""
    from cannery.attest.attach import Attester
    from cannery.attest.provenance import build_context

    ctx = build_context(loaded.path, loaded.digest, req.backend, req.builder)
    scanner = None
    if req.sbom:
        from cannery.attest.sbom import syft_scanner

        scanner = syft_scanner(client, req.ca_cert)
    return Attester(client, ctx, signer, scanner, req.provenance_dir)


def _report(results: list[ImageResult], as_json: bool) -> None:
    if as_json:
        out.print_json(json.dumps({"images": [r.to_json() for r in results]}))
        return
    for r in results:
        if r.error:
            where = f"; {_new_tags(r.registries)}" if r.registries else ""
            out.print(f"{r.image}: FAILED: {r.error}; {tag_summary(r)}{where}", markup=False)
            continue
        where = r.output or r.repository
        if r.index_digest is None:
            out.print(
                f"{r.image}: platforms pushed to {where} by digest; no index, no tag moved "
                f"(merge them with --merge-only) ({r.seconds:.1f}s)",
                markup=False,
            )
        else:
            out.print(f"{r.image}: {where}@{r.index_digest} ({r.seconds:.1f}s)", markup=False)
        for p in r.platforms:
            state = f"skipped: {p.skipped}" if p.skipped else f"built in {p.seconds:.1f}s"
            out.print(f"  {p.platform}: {p.digest} ({state})", markup=False)
        if r.output is None and r.index_digest is not None:
            out.print(f"  tags: {tag_summary(r)}", markup=False)
        for reg in r.registries[1:]:  # the mirrors; the first registry is above
            out.print(
                f"  mirror {reg['repository']}@{reg['index_digest']} "
                f"({reg['media_types']}): tags: {_moves_line(reg)}",
                markup=False,
            )


def _moves_line(reg: dict[str, object]) -> str:
    """One mirror's tag lists (``RegistryResult.to_json``), in ``tag_summary``'s words."""
    def tags(key: str) -> list[str]:
        value = reg.get(key)
        return [str(t) for t in value] if isinstance(value, list) else []

    return moves_summary(TagMoves(
        tags("tags_moved"), tags("tags_unchanged"), tags("tags_uncertain"), tags("tags_not_moved")
    ))


def _new_tags(registries: list[dict[str, object]]) -> str:
    """Which registries serve the new tags after a failed publish, and which do not."""
    have = [str(r["repository"]) for r in registries if r["has_new_tags"]]
    lack = [str(r["repository"]) for r in registries if not r["has_new_tags"]]
    return (
        f"the new tags are in: {', '.join(have) or 'none'}; not in: {', '.join(lack) or 'none'} "
        "(re-run to complete what is missing; nothing is rebuilt)"
    )


def tag_summary(r: ImageResult) -> str:
    """What happened to each tag, from what was checked: "no tag moved" only when no tag was
    written to, or every tag written to read back on its old index."""
    return moves_summary(r.tag_moves)


def moves_summary(m: TagMoves | None) -> str:
    """``tag_summary`` for one registry's ``TagMoves`` (None: no tag was written to)."""
    if m is None:
        return "no tag moved"
    parts = []
    if m.moved:
        lost = f" ({', '.join(m.settled)}: the registry's answer was lost; read back on the " \
            "new index)" if m.settled else ""
        parts.append(f"moved {', '.join(m.moved)}{lost}")
    elif not m.uncertain:
        parts.append("no tag moved")
    if m.unchanged:
        parts.append(f"already there: {', '.join(m.unchanged)}")
    if m.uncertain:
        parts.append(
            f"UNCERTAIN {', '.join(m.uncertain)} (the PUT was sent, its answer lost, and the "
            "tag could not be read back: check it)"
        )
    if m.not_moved and (m.moved or m.uncertain or m.unchanged):
        parts.append(f"not moved: {', '.join(m.not_moved)}")
    return "; ".join(parts)
