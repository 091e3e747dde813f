"""The update driver: ``cannery lock`` (what is missing, and what ``--update`` names, resolved
again; the rest kept; stale entries dropped) and what a build does with the lock
(``ensure_locked``: ``--locked``, ``--frozen``, the pending lock a build starts from while uv
runs).

Inputs are resolved side by side; an entry re-resolved to the same value keeps its time.
"""

from __future__ import annotations

import contextlib
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from cannery.catalog.image_bases import named_image
from cannery.catalog.inputs import SECRET_URL, file_downloads, wheel_urls
from cannery.catalog.platforms import arches_of
from cannery.errors import LockError, NotFound
from cannery.lock.bases import _as_image_base
from cannery.lock.file import (
    BaseEntry,
    GitEntry,
    Lock,
    PythonEntry,
    UrlEntry,
    dump_lock,
    git_key,
    now,
)
from cannery.lock.inputs import Input, _python_unpinned, lock_changes, required_inputs
from cannery.lock.resolvers import Resolvers, network_resolvers
from cannery.pydeps import PythonRequest, ci_requests, python_requests
from cannery.util.background import in_background, side_by_side
from cannery.util.patterns import COMMIT, SHORT_COMMIT
from cannery.util.pynames import requirement_name

if TYPE_CHECKING:
    from cannery.catalog.models import Catalog

# Inputs to resolve are resolved side by side: each is mostly waiting (a registry round trip,
# a download hashed as it arrives, `git ls-remote`), and a family's first lock holds dozens.
# Python pins come after the git commits they read, fewer at a time: each is a uv process.
RESOLVE_WORKERS = 8
PYTHON_WORKERS = 4


class RefError(LockError):
    """A component's git ref could not be resolved; ``component`` names it (the lock command
    adds the catalog's file:line)."""

    def __init__(self, component: str, message: str) -> None:
        super().__init__(f"component {component}: {message}")
        self.component = component


class CiInstallError(LockError):
    """``[ci] install`` could not be resolved (the lock command adds the catalog's
    file:line)."""


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
    names = _owner_names(cat, inputs)
    _check_update(update, names, cat)
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
    work = [partial(_resolve, inp, old, resolvers, fresh_bases, stamp) for inp in todo]
    entries = side_by_side(work, RESOLVE_WORKERS)
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


def _owner_names(cat: Catalog, inputs: list[Input]) -> dict[tuple[str, str], set[str]]:
    """Every catalog name an input belongs to: components sharing one git ref or wheel URL
    each name it (required_inputs keeps one owner per input)."""
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
    return names


def _check_update(update: set[str], names: dict[tuple[str, str], set[str]], cat: Catalog) -> None:
    """LockError when ``--update`` names something with no moving references."""
    owners = {o for group in names.values() for o in group}
    unknown = update - owners - {"all", "python"} - set(cat.images)
    if unknown:
        raise LockError(
            f"--update {', '.join(sorted(unknown))}: not a base, toolkit, component or image "
            f"with moving references, nor 'python' or 'all' (known: {', '.join(sorted(owners))})"
        )


def _resolve(
    inp: Input, old: Lock, resolvers: Resolvers, fresh_bases: dict[str, bool], stamp: str
) -> BaseEntry | GitEntry | UrlEntry | None:
    """The entry ``inp`` resolves to now (None: a catalog image not pushed yet)."""
    if inp.kind == "base":
        return _resolve_base(inp, old, resolvers, fresh_bases, stamp)
    if inp.kind == "git":
        try:
            commit = resolvers.git(inp.url, inp.ref)
        except LockError as exc:
            raise RefError(inp.owner, exc.message) from None
        return GitEntry(url=inp.url, ref=inp.ref, commit=commit, resolved_at=stamp)
    digest, size = resolvers.url(inp.url)
    return UrlEntry(sha256=digest, size=size, resolved_at=stamp)


def _resolve_base(
    inp: Input, old: Lock, resolvers: Resolvers, fresh_bases: dict[str, bool], stamp: str
) -> BaseEntry | None:
    """A base image's digest and its /etc/os-release."""
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

    changes = _build_changes(cat, lock, images, built)
    if not changes:
        return lock, [], None
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

        pending = _speculate(lock, path, resolvers, with_pins, resolving) if speculate else None
        if pending is not None:
            stack = None  # the pending lock closes the resolvers once it has settled
            return pending.guess, changes, pending
        new = with_pins(resolvers)
    finally:
        if stack is not None:
            stack.close()
    atomic_write(path, dump_lock(new))
    return new, changes, None


def _speculate(
    lock: Lock,
    path: Path,
    resolvers: Resolvers,
    with_pins: Callable[[Resolvers], Lock],
    resolving: contextlib.ExitStack,
) -> PendingLock | None:
    """The pending lock whose guess keeps each re-resolved Python entry's earlier pins; None
    when some entry has none to keep (or no Python entry is re-resolved)."""
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
        return None
    if not guessed:
        return None
    return PendingLock(guess, path, lambda: with_pins(resolvers), resolving)


def _build_changes(
    cat: Catalog, lock: Lock, images: list[str], built: set[str] | None
) -> list[str]:
    """What a build of ``images`` changes in ``lock``, one line each (none: it stays)."""
    missing, stale = lock_changes(cat, lock, images)
    missing = [i for i in missing if i.kind != "base" or named_image(i.owner) not in (built or ())]
    unpinned = [n for n in images if _python_unpinned(cat, lock, n)]
    changes = [f"added {i.kind} {i.key}" for i in missing]
    changes += [f"added python dependencies of {name}" for name in unpinned]
    changes += [f"removed {s}" for s in stale]
    return changes
