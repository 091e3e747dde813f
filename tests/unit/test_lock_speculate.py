"""A build's lock while uv re-resolves Python pins in a thread (``ensure_locked(...,
speculate=True)``), with resolvers that answer from a table (no network; the e2e test
``test_build.py::test_a_bump_builds_from_the_earlier_pins_while_uv_resolves_and_checks_them_first``
runs the real ones): the guess is the lock a sequential resolution writes whenever the pins
did not move, and nothing is written before the resolution settles."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import cannery.lock.update as lockmod
from cannery.catalog.load import load_catalog
from cannery.catalog.models import Catalog
from cannery.errors import LockError
from cannery.lock import Lock, Resolvers, dump_lock, ensure_locked, read_lock, update_lock
from cannery.pydeps import PythonRequest

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
EXTRA = f"extra-standin==1.0 --hash=sha256:{'e' * 64}"


def _resolvers(lock: Lock, python: Callable[[PythonRequest], list[str]]) -> Resolvers:
    commits = {(e.url, e.ref): e.commit for e in lock.git.values()}
    return Resolvers(
        base=lambda image: lock.bases[image].digest,
        git=lambda url, ref: commits[(url, ref)],
        url=lambda url: (lock.urls[url].sha256, lock.urls[url].size),
        python=python,
    )


@pytest.fixture
def bumped(monkeypatch: pytest.MonkeyPatch) -> tuple[Catalog, Lock, Lock]:
    """The embedded catalog; its full lock; the same lock after every git entry moved to a new
    commit (each image installing a git tree now needs its pins again)."""
    cat = load_catalog(None).catalog
    golden = read_lock(GOLDEN / "cannery.lock")
    full = update_lock(cat, golden, _resolvers(golden, lambda req: [EXTRA.replace("extra", "six")]))
    moved = {k: e.model_copy(update={"commit": "f" * 40}) for k, e in full.git.items()}
    monkeypatch.setattr(lockmod, "now", lambda: "2026-12-01T00:00:00+00:00")
    return cat, full, full.model_copy(update={"git": moved})


def _network(monkeypatch: pytest.MonkeyPatch, resolvers: Resolvers, closed: list[bool]) -> None:
    @contextmanager
    def fake(*_args: object, **_kw: object) -> Iterator[Resolvers]:
        try:
            yield resolvers
        finally:
            closed.append(True)

    monkeypatch.setattr(lockmod, "network_resolvers", fake)


def _earlier(lock: Lock) -> Callable[[PythonRequest], list[str]]:
    return lambda req: list(lock.python[req.key].requirements)


def test_a_held_guess_is_what_a_sequential_resolution_writes(
    bumped: tuple[Catalog, Lock, Lock], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat, full, lock = bumped
    images = list(cat.images)
    go = threading.Event()

    def slow(req: PythonRequest) -> list[str]:
        go.wait(10)  # uv still running when ensure_locked returns
        return _earlier(full)(req)

    closed: list[bool] = []
    _network(monkeypatch, _resolvers(lock, slow), closed)
    path = tmp_path / "cannery.lock"
    path.write_text(dump_lock(lock))
    guess, changes, pending = ensure_locked(cat, lock, path, images, speculate=True)
    assert pending is not None and changes
    assert path.read_text() == dump_lock(lock)  # nothing written while uv runs
    assert not closed and not pending.wrong.is_set()
    go.set()
    assert pending.settle() is True and pending.settle() is True
    assert closed == [True]
    assert read_lock(path) == guess and not pending.wrong.is_set()

    _network(monkeypatch, _resolvers(lock, _earlier(full)), [])
    other = tmp_path / "sequential.lock"
    other.write_text(dump_lock(lock))
    new, _, none = ensure_locked(cat, lock, other, images)
    assert none is None
    assert new == guess and other.read_text() == path.read_text()
    assert any(new.python[k] != lock.python[k] for k in lock.python)  # re-resolved, new inputs


def test_moved_pins_are_said_and_the_real_lock_is_written(
    bumped: tuple[Catalog, Lock, Lock], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat, full, lock = bumped
    _network(monkeypatch, _resolvers(lock, lambda req: [*_earlier(full)(req), EXTRA]), [])
    path = tmp_path / "cannery.lock"
    guess, _, pending = ensure_locked(cat, lock, path, list(cat.images), speculate=True)
    assert pending is not None
    assert pending.settle() is False and pending.wrong.is_set()
    written = read_lock(path)
    assert written != guess
    assert any(EXTRA in e.requirements for e in written.python.values())
    assert not any(EXTRA in e.requirements for e in guess.python.values())


def test_a_failed_resolution_is_raised_at_settle_and_writes_nothing(
    bumped: tuple[Catalog, Lock, Lock], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat, _, lock = bumped

    def fails(req: PythonRequest) -> list[str]:
        raise LockError(f"Python dependencies of {req.key}: no solution")

    closed: list[bool] = []
    _network(monkeypatch, _resolvers(lock, fails), closed)
    path = tmp_path / "cannery.lock"
    path.write_text(dump_lock(lock))
    _, _, pending = ensure_locked(cat, lock, path, list(cat.images), speculate=True)
    assert pending is not None
    for _ in range(2):
        with pytest.raises(LockError, match="no solution"):
            pending.settle()
    assert pending.wrong.is_set() and closed == [True]
    assert path.read_text() == dump_lock(lock)


def test_no_guess_without_earlier_pins_and_the_lock_is_written_at_once(
    bumped: tuple[Catalog, Lock, Lock], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat, _, lock = bumped
    _network(monkeypatch, _resolvers(lock, lambda req: [EXTRA]), [])
    bare = lock.model_copy(update={"python": {}})
    path = tmp_path / "cannery.lock"
    new, _, pending = ensure_locked(cat, bare, path, list(cat.images), speculate=True)
    assert pending is None
    assert read_lock(path) == new and all(e.requirements == [EXTRA] for e in new.python.values())
