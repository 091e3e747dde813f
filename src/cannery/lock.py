"""cannery.lock: every moving reference resolved once, so builds use only immutable inputs.

base image tag → manifest digest, git tag/branch/commit prefix → full commit, download URL →
sha256.
The file is TOML, sorted, and only entries whose value changed get a new timestamp (an entry
re-resolved to the same value keeps its time), so re-running ``cannery lock``, even with
``--update``, leaves it byte-identical when nothing moved.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, TypeVar

import tomli_w
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from cannery.catalog.image_bases import PREFIX as IMAGE_BASE
from cannery.catalog.image_bases import named_image
from cannery.catalog.inputs import (
    SECRET_URL,
    file_downloads,
    python_source_url,
    stage_bases,
    toolkit_downloads,
    wheel_urls,
)
from cannery.catalog.platforms import arches_of
from cannery.errors import FatalError, LockError, NetworkError, NotFound
from cannery.pydeps import LOCKED_LINE, PythonRequest, ci_requests, python_requests
from cannery.util import toml
from cannery.util.background import in_background, side_by_side
from cannery.util.bounded import NotRegularFile, OverLimit, read_regular_file
from cannery.util.env import hide_from_children
from cannery.util.patterns import (
    COMMIT,
    COMMIT_PATTERN,
    OCI_DIGEST_PATTERN,
    SHA256_HEX_PATTERN,
    SHORT_COMMIT,
)
from cannery.util.pynames import requirement_name

if TYPE_CHECKING:
    from cannery.catalog.models import Catalog
    from cannery.oci.rootfs import BaseOs

HEADER = "# cannery.lock: written by `cannery lock`; edit the catalog, not this file.\n"
LOCK_LIMIT = 64 << 20  # a lock file larger than this is refused unread
# Inputs to resolve are resolved side by side: each is mostly waiting (a registry round trip,
# a download hashed as it arrives, `git ls-remote`), and a family's first lock holds dozens.
# Python pins come after the git commits they read, fewer at a time: each is a uv process.
RESOLVE_WORKERS = 8
PYTHON_WORKERS = 4


def parse_time(text: str) -> dt.datetime:
    """An ISO 8601 time with its timezone (``Z`` allowed, as on Python ≥ 3.11)."""
    value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError("no timezone")
    return value


def _timestamp(text: str) -> str:
    try:
        parse_time(text)
    except ValueError:
        raise ValueError(
            f"{text!r} is not an ISO 8601 time with a timezone (e.g. 2026-01-01T00:00:00+00:00)"
        ) from None
    return text


# When an entry was resolved; the build's SOURCE_DATE_EPOCH comes from these, so a time with
# no timezone (read in local time) would make the same lock build different bytes elsewhere.
Timestamp = Annotated[str, AfterValidator(_timestamp)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BaseEntry(_Strict):
    digest: str = Field(pattern=OCI_DIGEST_PATTERN)
    resolved_at: Timestamp
    # The image's /etc/os-release (ID and VERSION_ID, as written), read when it was locked;
    # absent: not read (an older lock, or no layer had the file)
    os_id: str | None = Field(None, pattern=r"^[A-Za-z0-9._-]{1,64}$")
    os_version: str | None = Field(None, pattern=r"^[A-Za-z0-9._-]{1,64}$")
    # the package managers found with it (apt, dnf, yum, microdnf, apk); absent: not read
    package_managers: list[Literal["apt", "dnf", "yum", "microdnf", "apk"]] | None = None


class GitEntry(_Strict):
    url: str
    ref: str
    commit: str = Field(pattern=COMMIT_PATTERN)
    resolved_at: Timestamp


class UrlEntry(_Strict):
    sha256: str = Field(pattern=SHA256_HEX_PATTERN)
    size: int = Field(ge=0)
    resolved_at: Timestamp


class PythonEntry(_Strict):
    """An image's Python dependencies on one platform, resolved with hashes."""

    inputs: str = Field(pattern=OCI_DIGEST_PATTERN, description="PythonRequest.digest()")
    requirements: list[str]
    resolved_at: Timestamp

    @field_validator("requirements")
    @classmethod
    def _locked(cls, v: list[str]) -> list[str]:
        for line in v:
            if not LOCKED_LINE.match(line):
                raise ValueError(f"{line[:80]!r} is not 'name==version --hash=sha256:…'")
        return v


class Lock(_Strict):
    version: int = 1
    bases: dict[str, BaseEntry] = {}
    git: dict[str, GitEntry] = {}
    urls: dict[str, UrlEntry] = {}
    python: dict[str, PythonEntry] = {}  # "image/arch"
    # What CI installs cannery from ([ci] install), per architecture of the runners; empty
    # with [ci] install_action (the action is pinned by commit instead).
    ci: dict[str, PythonEntry] = {}  # "amd64"


class RefError(LockError):
    """A component's git ref could not be resolved; ``component`` names it (the lock command
    adds the catalog's file:line)."""

    def __init__(self, component: str, message: str) -> None:
        super().__init__(f"component {component}: {message}")
        self.component = component


class CiInstallError(LockError):
    """``[ci] install`` could not be resolved (the lock command adds the catalog's
    file:line)."""


def git_key(url: str, ref: str) -> str:
    return f"{url}#{ref}"


def lock_epoch(entries: dict[str, tuple[str, str]]) -> int:
    """The newest resolution time among ``entries`` (Unix seconds; 0 with none): how new the
    lock an image was built from is. A lock only gets a newer time where a value changed
    (``lock._kept_time``), so a later lock of the same image never has a smaller one."""
    times = [parse_time(v[1]) for v in entries.values()]
    return int(max(times).timestamp()) if times else 0


def read_lock(path: Path) -> Lock:
    """The lock at ``path``; an absent file is an empty lock."""
    try:
        text = read_regular_file(path, limit=LOCK_LIMIT).decode("utf-8")
    except FileNotFoundError:
        return Lock()
    except (NotRegularFile, OverLimit) as exc:  # a symlink to /dev/zero, a FIFO
        raise LockError(exc.message) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LockError(f"{path}: cannot read: {exc}") from None
    try:
        raw = toml.loads(text)
    except toml.TOMLDecodeError as exc:
        raise LockError(toml.syntax_error(str(path), text, exc)) from None
    try:
        lock = Lock.model_validate(raw)
    except ValidationError as exc:
        from cannery.catalog.locate import LineMap

        err = exc.errors()[0]
        loc = tuple(err["loc"])
        line = LineMap(text).line_of(loc)
        field = ".".join(str(p) for p in loc)
        raise LockError(f"{path}:{line}: {field}: {err['msg']}") from None
    if lock.version != 1:
        raise LockError(f"{path}: lock version {lock.version} is not supported (expected 1)")
    return lock


def dump_lock(lock: Lock) -> str:
    data = lock.model_dump()
    # an os-release not read is left out, not written empty (TOML has no null)
    bases = {k: {f: v for f, v in e.items() if v is not None} for k, e in data["bases"].items()}
    ordered = {
        "version": data["version"],
        "bases": dict(sorted(bases.items())),
        "git": dict(sorted(data["git"].items())),
        "urls": dict(sorted(data["urls"].items())),
        "python": dict(sorted(data["python"].items())),
    }
    if data["ci"]:  # absent rather than empty: a lock without it reads as it always did
        ordered["ci"] = dict(sorted(data["ci"].items()))
    return HEADER + tomli_w.dumps(ordered)


@dataclass(frozen=True)
class Input:
    """One moving reference of the catalog, and the catalog piece that owns it."""

    kind: str  # base | git | url
    key: str
    owner: str
    url: str = ""
    ref: str = ""


def required_inputs(cat: Catalog, images: list[str] | None = None) -> list[Input]:
    """The moving references of ``images`` (default: every image), each once, sorted."""
    out: dict[tuple[str, str], Input] = {}
    for iname in images or list(cat.images):
        img = cat.images[iname]
        base = cat.bases[img.base]
        out[("base", base.image)] = Input("base", base.image, img.base)
        for _pkg, _arch, url in toolkit_downloads(cat, iname):
            out[("url", url)] = Input("url", url, img.toolkit or iname, url=url)
        for _name, _arch, url in file_downloads(cat, iname):
            out[("url", url)] = Input("url", url, iname, url=url)
        # A builder stage's base, and the Python source tarball (checked like an installer).
        for bname in stage_bases(cat, iname):
            out[("base", cat.bases[bname].image)] = Input("base", cat.bases[bname].image, bname)
        py_url = python_source_url(cat, iname)
        if py_url is not None:
            out[("url", py_url)] = Input("url", py_url, iname, url=py_url)
        for cname in img.components:
            comp = cat.components[cname]
            if comp.git and comp.ref and not COMMIT.match(comp.ref):
                key = git_key(comp.git, comp.ref)
                out[("git", key)] = Input("git", key, cname, url=comp.git, ref=comp.ref)
            if comp.wheel:
                for _arch, url in wheel_urls(comp.wheel, arches_of(img.platforms)):
                    out[("url", url)] = Input("url", url, cname, url=url)
    return sorted(out.values(), key=lambda i: (i.kind, i.key))


def os_contradictions(cat: Catalog, lock: Lock) -> list[tuple[str, str, str]]:
    """(base name, field, why) for each base whose ``os`` or ``os_version`` says other than its
    image's /etc/os-release as the lock recorded it (a base not read yet says nothing)."""
    out = []
    for name, base in cat.bases.items():
        entry = lock.bases.get(base.image)
        if entry is None or entry.os_id is None:
            continue
        said = f"{entry.os_id} {entry.os_version}".strip()
        if base.os != entry.os_id.lower():
            out.append((name, "os", f"{base.os!r}, but {base.image}'s /etc/os-release says "
                        f"{said} (cannery.lock)"))
        elif entry.package_managers and base.manager not in entry.package_managers:
            where = "package_manager" if base.package_manager else "os"
            out.append((name, where, f"{base.os!r} {base.os_version} installs with "
                        f"{base.manager}, but {base.image} has "
                        f"{', '.join(entry.package_managers)} (cannery.lock)"
                        + ("" if base.package_manager else
                           f": set package_manager = {entry.package_managers[0]!r}")))
        elif entry.os_version and base.os_version != entry.os_version and not (
            # a release's point version (Alpine's 3.20.3, Rocky's 9.4) is of that release
            entry.os_version.startswith(base.os_version + ".")
        ):
            out.append((name, "os_version", f"{base.os_version!r}, but {base.image}'s "
                        f"/etc/os-release says {said} (cannery.lock)"))
    return out


def _image_base_key(cat: Catalog, ref: str) -> str | None:
    """The ``image:NAME`` bases key whose reference is ``ref``, or None."""
    return next((k for k, b in cat.bases.items() if named_image(k) and b.image == ref), None)


def _as_image_base(
    cat: Catalog, bases: dict[str, BaseEntry], ref: str, entry: BaseEntry,
    seen: frozenset[str] = frozenset(),
) -> BaseEntry:
    """``entry`` as the lock holds a catalog image's digest: with its parent's base time and
    OS, so that a build pinning the digest it has just pushed (``pin_image_bases``) plans the
    same clock as one that reads the lock, and the OS check compares like with like."""
    key = _image_base_key(cat, ref)
    if key is None:
        return entry
    parent = cat.bases[cat.images[key[len(IMAGE_BASE):]].base].image
    if parent not in bases or parent == ref or parent in seen:
        return entry  # (an image FROM its own earlier release: its own base entry stands)
    above = _as_image_base(cat, bases, parent, bases[parent], seen | {ref})  # a chain: the root
    return entry.model_copy(update={"resolved_at": above.resolved_at, "os_id": above.os_id,
                                    "os_version": above.os_version})


def pin_image_bases(cat: Catalog, lock: Lock, pushed: dict[str, str]) -> Lock:
    """``lock`` with each catalog image of ``pushed`` (name → the index digest it was just
    pushed with) pinned, as a base, at that digest."""
    bases = dict(lock.bases)
    for name, digest in pushed.items():
        key = IMAGE_BASE + name
        if key not in cat.bases:
            continue
        ref = cat.bases[key].image
        fresh = BaseEntry(digest=digest, resolved_at=now())
        bases[ref] = _as_image_base(cat, bases, ref, fresh)
    return lock.model_copy(update={"bases": bases})


@dataclass
class Resolvers:
    """How each kind of reference is resolved; tests may point these at local services.

    Without ``python``, Python dependencies are left as the lock has them (or unpinned).
    """

    base: Callable[[str], str]
    git: Callable[[str, str], str]
    url: Callable[[str], tuple[str, int]]
    python: Callable[[PythonRequest], list[str]] | None = None
    # (image, digest) → the image's os-release (ID, VERSION_ID), None when no layer has it;
    # without it, bases are locked without their OS
    os_release: Callable[[str, str], BaseOs | None] | None = None


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()


E = TypeVar("E", BaseEntry, GitEntry, UrlEntry, PythonEntry)


def _kept_time(old: E | None, new: E) -> E:
    """``new``, or ``old`` when only the time differs: an entry re-resolved to the same value
    keeps its time, so the build's clock (SOURCE_DATE_EPOCH, part of every input digest) and
    the lock file do not move when nothing changed."""
    if old is not None and old.model_dump(exclude={"resolved_at"}) == new.model_dump(
        exclude={"resolved_at"}
    ):
        return old
    return new


def update_lock(
    cat: Catalog,
    old: Lock,
    resolvers: Resolvers,
    update: set[str] | None = None,
    progress: Callable[[Input], None] | None = None,
    images: list[str] | None = None,
) -> Lock:
    """Resolve what is missing (and what ``update`` names); keep the rest; drop stale entries.

    With ``images``, only their inputs are resolved; other images' entries are kept as they are.
    Every entry resolved in one call carries the same time (the call's start).
    """
    stamp = now()
    refs = _update_refs(cat, old, resolvers, update or set(), progress, images, stamp)
    pythons = _update_python(
        cat, old, refs.git, resolvers, update or set(), images, progress, refs.moved, stamp
    )
    ci = old.ci if images else _update_ci(cat, old, resolvers, update or set(), progress, stamp)
    return Lock(bases=refs.bases, git=refs.git, urls=refs.urls, python=pythons, ci=ci)


def _update_ci(
    cat: Catalog,
    old: Lock,
    resolvers: Resolvers,
    update: set[str],
    progress: Callable[[Input], None] | None,
    stamp: str,
) -> dict[str, PythonEntry]:
    """What CI installs cannery from, per runner architecture: kept while its request
    (requirement, index, Python, platform) is unchanged, resolved again with ``--update
    python`` or ``all``; none with ``[ci] install_action``."""
    out: dict[str, PythonEntry] = {}
    for req in ci_requests(cat):
        kept = old.ci.get(req.arch)
        current = kept is not None and kept.inputs == req.digest()
        if kept is not None and current and not {"all", "python"} & update:
            out[req.arch] = kept
        elif resolvers.python is None:
            if kept is not None and current:
                out[req.arch] = kept
        else:
            if progress:
                progress(Input("python", req.key, "[ci] install"))
            try:
                pins = resolvers.python(req)
            except LockError as exc:
                raise CiInstallError(f"[ci] install: {exc.message}") from None
            wanted = requirement_name(req.requirements[0])
            if not any(requirement_name(pin) == wanted for pin in pins):
                # uv's answer for a URL or path is not an index pin with hashes: left out
                raise CiInstallError(
                    f"[ci] install: {req.requirements[0]!r} resolved to no pin of {wanted} "
                    "from the index: name a version or range the index serves, e.g. "
                    "cannery==0.1.0 (a URL or path is not locked with hashes)"
                )
            out[req.arch] = _kept_time(
                kept, PythonEntry(inputs=req.digest(), requirements=pins, resolved_at=stamp)
            )
    return out


@dataclass(frozen=True)
class _Refs:
    bases: dict[str, BaseEntry]
    git: dict[str, GitEntry]
    urls: dict[str, UrlEntry]
    moved: set[str]  # wheel URLs whose sha256 changed


def _update_refs(
    cat: Catalog,
    old: Lock,
    resolvers: Resolvers,
    update: set[str],
    progress: Callable[[Input], None] | None,
    images: list[str] | None,
    stamp: str,
) -> _Refs:
    """The base, git and URL entries of :func:`update_lock` (everything but Python pins)."""
    inputs = required_inputs(cat)
    selected = {(i.kind, i.key) for i in required_inputs(cat, images)} if images else None
    # Every catalog name an input belongs to: components sharing one git ref or wheel URL
    # each name it (required_inputs keeps one owner per input).
    names: dict[tuple[str, str], set[str]] = {(i.kind, i.key): {i.owner} for i in inputs}
    for iname, img in cat.images.items():
        for _name, _arch, url in file_downloads(cat, iname):  # each image that fetches it
            names[("url", url)].add(iname)
        for cname in img.components:
            comp = cat.components[cname]
            if comp.git and comp.ref and not COMMIT.match(comp.ref):
                names[("git", git_key(comp.git, comp.ref))].add(cname)
            wheels = wheel_urls(comp.wheel, arches_of(img.platforms)) if comp.wheel else []
            for _arch, url in wheels:
                names[("url", url)].add(cname)
    owners = {o for group in names.values() for o in group}
    unknown = update - owners - {"all", "python"} - set(cat.images)
    if unknown:
        raise LockError(
            f"--update {', '.join(sorted(unknown))}: not a base, toolkit, component or image "
            f"with moving references, nor 'python' or 'all' (known: {', '.join(sorted(owners))})"
        )
    bases: dict[str, BaseEntry] = {}
    gits: dict[str, GitEntry] = {}
    urls: dict[str, UrlEntry] = {}
    todo: list[Input] = []  # resolved side by side below, then stored in this order
    fresh_bases: dict[str, bool] = {}  # base → re-resolved (False: only its OS is missing)
    for inp in inputs:
        chosen = selected is None or (inp.kind, inp.key) in selected
        # `--update all` (the nightly) leaves a download behind a build secret alone: the job
        # that runs it gets no secret; naming its image re-fetches it
        every = "all" in update and not inp.key.startswith(SECRET_URL)
        fresh = chosen and (every or bool(names[(inp.kind, inp.key)] & update))
        if inp.kind == "base":
            fresh_bases[inp.key] = fresh or inp.key not in old.bases
        # A commit prefix names one commit for good: --update never re-resolves it (more
        # commits later could make it ambiguous, and the nightly's `--update all` fail).
        fresh = fresh and not (inp.kind == "git" and SHORT_COMMIT.match(inp.ref))
        if inp.kind == "base" and not fresh and inp.key in old.bases and (
            old.bases[inp.key].os_id is not None or resolvers.os_release is None
        ):
            bases[inp.key] = old.bases[inp.key]
        elif inp.kind == "git" and not fresh and inp.key in old.git:
            gits[inp.key] = old.git[inp.key]
        elif inp.kind == "url" and not fresh and inp.key in old.urls:
            urls[inp.key] = old.urls[inp.key]
        elif chosen:
            if progress:
                progress(inp)
            todo.append(inp)

    def resolve(inp: Input) -> Callable[[], BaseEntry | GitEntry | UrlEntry | None]:
        def work() -> BaseEntry | GitEntry | UrlEntry | None:
            if inp.kind == "base":
                kept = old.bases.get(inp.key)
                when = stamp
                if kept is not None and not fresh_bases.get(inp.key, True):
                    # locked already: only its OS is read, once, and its time (the build's
                    # clock) stays, so no input digest moves
                    digest, when = kept.digest, kept.resolved_at
                else:
                    try:
                        digest = resolvers.base(inp.key)
                    except NotFound:
                        if named_image(inp.owner) is None:
                            raise
                        # a catalog image not pushed yet: its build pins what it pushes
                        return None
                found = resolvers.os_release(inp.key, digest) if resolvers.os_release else None
                if found is None:
                    return BaseEntry(digest=digest, resolved_at=when)
                return BaseEntry(digest=digest, resolved_at=when, os_id=found.id,
                                 os_version=found.version,
                                 package_managers=list(found.managers) or None)
            if inp.kind == "git":
                try:
                    commit = resolvers.git(inp.url, inp.ref)
                except LockError as exc:
                    raise RefError(inp.owner, exc.message) from None
                return GitEntry(url=inp.url, ref=inp.ref, commit=commit, resolved_at=stamp)
            digest, size = resolvers.url(inp.url)
            return UrlEntry(sha256=digest, size=size, resolved_at=stamp)

        return work

    entries = side_by_side([resolve(i) for i in todo], RESOLVE_WORKERS)
    for inp, entry in zip(todo, entries, strict=True):
        if entry is None:
            continue
        if isinstance(entry, BaseEntry):
            bases[inp.key] = _kept_time(old.bases.get(inp.key), entry)
        elif isinstance(entry, GitEntry):
            gits[inp.key] = _kept_time(old.git.get(inp.key), entry)
        else:
            urls[inp.key] = _kept_time(old.urls.get(inp.key), entry)
    for key, entry in list(bases.items()):
        bases[key] = _as_image_base(cat, bases, key, entry)
    # A wheel's bytes at the same URL are not in a Python request's digest: the images that
    # install a wheel whose sha256 moved resolve again (a nightly wheel's new dependencies).
    moved = {u for u, e in urls.items() if u in old.urls and old.urls[u].sha256 != e.sha256}
    return _Refs(bases, gits, urls, moved)


def _update_python(
    cat: Catalog,
    old: Lock,
    gits: dict[str, GitEntry],
    resolvers: Resolvers,
    update: set[str],
    images: list[str] | None,
    progress: Callable[[Input], None] | None,
    moved_wheels: set[str] | frozenset[str],
    stamp: str,
) -> dict[str, PythonEntry]:
    """Python dependencies per image and platform, after the git commits they read are known.

    An entry is kept while its inputs (specifiers, commits, indexes, Python, platform) are
    unchanged; ``--update python`` (or ``all``, or the image's name) resolves it again, and
    so does a new sha256 of a wheel it installs (``moved_wheels``: URLs).
    """
    commits = {(e.url, e.ref): e.commit for e in gits.values()}
    for name in cat.images:
        for comp in (cat.components[c] for c in cat.images[name].components):
            if comp.git and comp.ref and COMMIT.match(comp.ref):
                commits[(comp.git, comp.ref)] = comp.ref
    out: dict[str, PythonEntry] = {}
    todo: list[PythonRequest] = []  # resolved side by side below
    for name in cat.images:
        chosen = not images or name in images
        for req in python_requests(cat, name, commits) or []:
            kept = old.python.get(req.key)
            fresh = chosen and (bool({"all", "python", name} & update) or any(
                w.split(" @ ", 1)[1] in moved_wheels for w in req.wheels))
            if kept is not None and kept.inputs == req.digest() and not fresh:
                out[req.key] = kept
            elif not chosen or resolvers.python is None:
                if kept is not None and kept.inputs == req.digest():
                    out[req.key] = kept
            else:
                if progress:
                    progress(Input("python", req.key, name))
                todo.append(req)
    python = resolvers.python
    if python is not None:
        pins = side_by_side([partial(python, req) for req in todo], PYTHON_WORKERS)
        for req, requirements in zip(todo, pins, strict=True):
            out[req.key] = _kept_time(
                old.python.get(req.key),
                PythonEntry(inputs=req.digest(), requirements=requirements, resolved_at=stamp),
            )
    return out


# ------------------------------------------------------------------ policy: what a build locks


def _entries(lock: Lock) -> set[tuple[str, str]]:
    return (
        {("base", k) for k in lock.bases}
        | {("git", k) for k in lock.git}
        | {("url", k) for k in lock.urls}
    )


def lock_changes(
    cat: Catalog, lock: Lock, images: list[str] | None = None
) -> tuple[list[Input], list[str]]:
    """Inputs of ``images`` missing from the lock, and lock entries no image needs any more."""
    have = _entries(lock)
    missing = [i for i in required_inputs(cat, images) if (i.kind, i.key) not in have]
    wanted = {(i.kind, i.key) for i in required_inputs(cat)}
    stale = sorted(f"{k} {key}" for k, key in have - wanted)
    return missing, stale


def _python_unpinned(cat: Catalog, lock: Lock, image: str) -> bool:
    """``image`` installs Python packages, and the lock lacks their pins for some platform
    (an entry is missing, or was resolved from other inputs): ``plan``'s ``unpinned()``, read
    from the catalog and the lock alone (the lock does not import the planner)."""
    img = cat.images[image]
    comps = [cat.components[c] for c in img.components]
    installs = bool(img.pip_tools) or any(
        c.pip or c.wheel or (c.git and (c.install != "none" or c.requirements)) for c in comps
    )
    if not installs:
        return False
    commits = {(e.url, e.ref): e.commit for e in lock.git.values()}
    fixed = [c for c in comps if c.git and c.ref and COMMIT.match(c.ref)]
    commits.update({(str(c.git), str(c.ref)): str(c.ref) for c in fixed})
    requests = python_requests(cat, image, commits)
    if not requests:
        return True
    return any(
        (entry := lock.python.get(r.key)) is None or entry.inputs != r.digest() for r in requests
    )


@contextmanager
def network_resolvers(
    cat: Catalog,
    lock: Lock,
    ca_cert: Path | None,
    images: list[str] | None = None,
    tls: Callable[[], ssl.SSLContext] | None = None,
) -> Iterator[Resolvers]:
    """The real resolvers (registry, git, HTTPS, uv), trusting the system roots plus
    ``ca_cert``. CANNERY_REGISTRY_USER/_PASSWORD are for the push registry: they go to a base
    image's registry only when it is that same host. ``tls`` gives the caller's TLS context
    for those roots (a build shares one with its publish client: loading the roots twice
    costs ~25 ms); else one is made here."""
    from cannery.download import resolve_url
    from cannery.oci import Credentials, OCIClient
    from cannery.oci.auth import push_host
    from cannery.oci.rootfs import read_os_release
    from cannery.pydeps import resolve_python
    from cannery.tls import git_ca_bundle, ssl_context

    ctx = tls() if tls is not None else ssl_context(ca_cert)
    repositories = [
        cat.registries[cat.images[n].registry or cat.catalog.registry or ""].repository
        for n in images or list(cat.images)
    ]
    creds = Credentials(env_host=push_host(repositories))
    with OCIClient(ctx, credentials=creds) as client, git_ca_bundle(ca_cert) as git_ca:
        yield Resolvers(
            base=client.resolve,
            git=lambda url, ref: resolve_git(url, ref, git_ca),
            url=lambda url: _secret_or_plain(url, lambda real: resolve_url(real, ctx)),
            python=lambda request: resolve_python(request, git_ca),
            os_release=lambda image, digest: read_os_release(client, image, digest),
        )


def secret_url(name: str, env: dict[str, str] | None = None) -> str:
    """The URL a download's ``url_secret`` names, from the environment: https, or LockError
    (which never shows the value)."""
    hide_from_children(name)
    value = (os.environ if env is None else env).get(name, "").strip()
    if not value:
        raise LockError(f"build secret {name} is not set: export {name} as the download's URL")
    if not value.startswith("https://") or any(c.isspace() for c in value):
        raise LockError(f"build secret {name}: not an https URL (its value is not shown)")
    import httpx

    try:
        host = httpx.URL(value).host
        host.encode("idna")
    except (httpx.InvalidURL, UnicodeError, ValueError):
        raise LockError(f"build secret {name}: not a valid URL (its value is not shown)") from None
    if not host:
        raise LockError(f"build secret {name}: not a valid URL (its value is not shown)")
    return value


def _secret_or_plain(url: str, fetch: Callable[[str], tuple[str, int]]) -> tuple[str, int]:
    """Fetch ``url``; for ``secret:NAME``, the URL the variable NAME holds, with any failure
    said without it (the URL carries its credential)."""
    if not url.startswith(SECRET_URL):
        return fetch(url)
    name = url[len(SECRET_URL):]
    real = secret_url(name)
    try:
        return fetch(real)
    except FatalError as exc:
        said = re.sub(r"https?://\S+", "(a URL)", exc.message.replace(real, f"${name}"))
        raise NetworkError(f"build secret {name}: {said}") from None


class _NoGuess(Exception):
    """A Python entry to resolve has no earlier pins to guess from."""


class PendingLock:
    """A build's lock while uv re-resolves Python pins in a thread (``ensure_locked(...,
    speculate=True)``).

    ``guess`` is the new lock with each re-resolved entry's earlier pins kept: a framework bump
    usually leaves its dependencies where they were, so the build starts from the guess at once
    instead of after uv. :meth:`settle` waits for uv, writes the real lock, and says whether it
    is the guess, entry for entry (both carry one resolution time, so equal pins give equal
    entries); the build publishes nothing before it has said so. ``wrong`` is set as soon as
    the real lock is known to differ, or its resolution failed, so a running build can stop."""

    def __init__(
        self, guess: Lock, path: Path, resolve: Callable[[], Lock], cleanup: contextlib.ExitStack
    ) -> None:
        self.guess = guess
        self.path = path
        self.wrong = threading.Event()
        self._cleanup = cleanup
        self._held: bool | None = None

        def resolved() -> Lock:
            try:
                real = resolve()
            except BaseException:  # re-raised by settle(), in the build's thread
                self.wrong.set()
                raise
            if real != self.guess:
                self.wrong.set()
            return real

        self._real = in_background(resolved, "cannery-lock")

    def settle(self) -> bool:
        """Wait for the resolution; write the real lock (atomically, once); True when it is
        the guess. Raises what the resolution raised, every time it is asked."""
        if self._held is None:
            try:
                real = self._real()
            finally:
                self._cleanup.close()
            from cannery.util.fs import atomic_write

            atomic_write(self.path, dump_lock(real))
            self._held = real == self.guess
        return self._held


def ensure_locked(
    cat: Catalog,
    lock: Lock,
    path: Path,
    images: list[str],
    *,
    locked: bool = False,
    frozen: bool = False,
    ca_cert: Path | None = None,
    speculate: bool = False,
    tls: Callable[[], ssl.SSLContext] | None = None,
    built: set[str] | None = None,
) -> tuple[Lock, list[str], PendingLock | None]:
    """What a build does with the lock, uv/cargo semantics: by default resolve what ``images``
    lack, drop what no image needs, and write the lock (atomically); ``locked`` refuses a lock
    that would change (LockError listing the changes); ``frozen`` never resolves (unlocked
    inputs fail when the build is planned). Returns the lock, one line per change, and no
    pending lock.

    With ``speculate``, when Python pins are to be re-resolved and each such entry had pins
    before, the bases, commits and downloads are resolved here, and the Python pins in a
    thread: the lock returned is the guess of a :class:`PendingLock` (returned too), written
    by its ``settle()``.

    ``built``: the catalog images this build pushes first; the images built FROM them pin
    what they push (``pin_image_bases``), so their tags are not resolved here."""
    if frozen:
        return lock, [], None
    from cannery.util.fs import atomic_write

    missing, stale = lock_changes(cat, lock, images)
    missing = [i for i in missing if i.kind != "base" or named_image(i.owner) not in (built or ())]
    unpinned = [n for n in images if _python_unpinned(cat, lock, n)]
    if not missing and not stale and not unpinned:
        return lock, [], None
    changes = [f"added {i.kind} {i.key}" for i in missing]
    changes += [f"added python dependencies of {name}" for name in unpinned]
    changes += [f"removed {s}" for s in stale]
    if locked:
        lines = [f"{path}: the lock would change (--locked); run `cannery lock`:"]
        lines += [f"  {c.replace('added', 'add', 1).replace('removed', 'remove', 1)}"
                  for c in changes]
        raise LockError("\n".join(lines))
    resolving = contextlib.ExitStack()
    stack: contextlib.ExitStack | None = resolving
    try:
        resolvers = resolving.enter_context(network_resolvers(cat, lock, ca_cert, images, tls))
        stamp = now()
        refs = _update_refs(cat, lock, resolvers, set(), None, images, stamp)

        def with_pins(python: Resolvers) -> Lock:
            pins = _update_python(
                cat, lock, refs.git, python, set(), images, None, refs.moved, stamp
            )
            return Lock(bases=refs.bases, git=refs.git, urls=refs.urls, python=pins,
                        ci=lock.ci)

        if speculate:
            guessed: list[str] = []

            def earlier_pins(req: PythonRequest) -> list[str]:
                entry = lock.python.get(req.key)
                if entry is None:
                    raise _NoGuess
                guessed.append(req.key)
                return list(entry.requirements)

            try:
                guess = with_pins(replace(resolvers, python=earlier_pins))
            except _NoGuess:
                guessed.clear()
            if guessed:
                pending = PendingLock(guess, path, lambda: with_pins(resolvers), resolving)
                stack = None  # the pending lock closes the resolvers once it has settled
                return guess, changes, pending
        new = with_pins(resolvers)
    finally:
        if stack is not None:
            stack.close()
    atomic_write(path, dump_lock(new))
    return new, changes, None


# ------------------------------------------------------------------ the real resolvers


def resolve_git(url: str, ref: str, ca_file: str | None = None) -> str:
    """``git ls-remote`` a tag or branch to its full commit (peeled, for annotated tags); a
    commit prefix (7-39 hex digits) goes to ``resolve_prefix`` instead.

    ``ca_file`` is a complete trust bundle for git (see ``cannery.tls.git_ca_bundle``).
    """
    from cannery.tls import git_env
    from cannery.util.cmd import CommandError, run

    env = git_env(url, ca_file)
    if SHORT_COMMIT.match(ref):
        return resolve_prefix(url, ref, env)
    try:
        out = run(["git", "ls-remote", "--", url, ref, f"{ref}^{{}}"], extra_env=env, timeout=120)
    except CommandError as exc:
        raise LockError(f"{url}: cannot list refs: {exc.message}") from None
    refs = {}
    for line in out.splitlines():
        sha, _, name = line.partition("\t")
        refs[name] = sha
    for name in (f"refs/tags/{ref}^{{}}", f"refs/tags/{ref}", f"refs/heads/{ref}", ref):
        if name in refs:
            return refs[name]
    raise LockError(f"{url}: no tag or branch named {ref!r}")


def resolve_prefix(url: str, prefix: str, env: dict[str, str]) -> str:
    """The one commit of ``url`` whose id starts with ``prefix``. ``git ls-remote`` lists only
    branch and tag tips, so the remote's branches and tags are cloned, commits only (a
    ``tree:0`` partial clone; a server without filter support sends everything), into a
    temporary bare repository, and the prefix is looked up there: a commit reachable from no
    branch or tag is not found."""
    import tempfile

    from cannery.util.cmd import CommandError, run

    with tempfile.TemporaryDirectory(prefix="cannery-git-") as tmp:
        bare = f"{tmp}/r.git"
        try:
            run(["git", "clone", "-q", "--bare", "--filter=tree:0", "--", url, bare],
                extra_env=env, timeout=1800)
            found = run(["git", f"--git-dir={bare}", "rev-parse", f"--disambiguate={prefix}"],
                        extra_env=env, timeout=120).split()
            commits = [o for o in found if run(
                ["git", f"--git-dir={bare}", "cat-file", "-t", o], extra_env=env, timeout=60
            ).strip() == "commit"]
        except CommandError as exc:
            raise LockError(f"{url}: cannot fetch to resolve commit prefix {prefix!r}: "
                            f"{exc.message}") from None
    if not commits:
        raise LockError(f"{url}: no commit starts with {prefix!r} (looked in every branch and tag)")
    if len(commits) > 1:
        raise LockError(f"{url}: commit prefix {prefix!r} is ambiguous ({len(commits)} commits: "
                        f"{', '.join(sorted(c[:12] for c in commits))}): give more digits")
    return commits[0]
