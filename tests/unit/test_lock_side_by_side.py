"""A first lock resolves its inputs side by side (no network: resolvers that answer from the
golden lock after a short wait, counting how many are waiting at once). Resolved one after
another, at most one ever is."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from cannery.catalog.load import load_catalog
from cannery.errors import LockError
from cannery.lock import PYTHON_WORKERS, RESOLVE_WORKERS, Lock, Resolvers, read_lock, update_lock
from cannery.pydeps import PythonRequest
from cannery.util.background import side_by_side

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _pins(req: PythonRequest) -> list[str]:
    name = "cannery" if req.image == "ci" else f"pkg-{req.arch}"  # CI's pins must name cannery
    return [f"{name}==1.0 --hash=sha256:{'a' * 64}"]


class Overlap:
    """The most calls inside :meth:`wait` at one time."""

    def __init__(self) -> None:
        self.now = 0
        self.most = 0
        self._guard = threading.Lock()

    def wait(self) -> None:
        with self._guard:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(0.05)
        with self._guard:
            self.now -= 1


def test_bases_commits_urls_and_python_pins_resolve_at_the_same_time() -> None:
    cat = load_catalog(None).catalog
    golden = read_lock(GOLDEN / "cannery.lock")
    commits = {(e.url, e.ref): e.commit for e in golden.git.values()}
    refs, pins = Overlap(), Overlap()

    def base(image: str) -> str:
        refs.wait()
        return golden.bases[image].digest

    def url(u: str) -> tuple[str, int]:
        refs.wait()
        return golden.urls[u].sha256, golden.urls[u].size

    def git(u: str, ref: str) -> str:
        refs.wait()
        return commits[(u, ref)]

    def python(req: PythonRequest) -> list[str]:
        pins.wait()
        return _pins(req)

    lock = update_lock(cat, Lock(), Resolvers(base=base, git=git, url=url, python=python))
    assert len(golden.bases) + len(golden.git) + len(golden.urls) > RESOLVE_WORKERS
    assert refs.most == RESOLVE_WORKERS > 1  # as many as allowed, and no more
    assert len(lock.python) > PYTHON_WORKERS
    assert pins.most == PYTHON_WORKERS > 1


def test_one_at_a_time_gives_the_same_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    cat = load_catalog(None).catalog
    golden = read_lock(GOLDEN / "cannery.lock")
    commits = {(e.url, e.ref): e.commit for e in golden.git.values()}
    resolvers = Resolvers(
        base=lambda image: golden.bases[image].digest,
        git=lambda u, ref: commits[(u, ref)],
        url=lambda u: (golden.urls[u].sha256, golden.urls[u].size),
        python=_pins,
    )
    together = update_lock(cat, Lock(), resolvers)
    monkeypatch.setattr("cannery.lock.update.RESOLVE_WORKERS", 1)
    monkeypatch.setattr("cannery.lock.update.PYTHON_WORKERS", 1)
    alone = update_lock(cat, Lock(), resolvers)
    strip = {"resolved_at"}

    def values(lock: Lock) -> dict[str, object]:
        return {kind: {k: e.model_dump(exclude=strip) for k, e in getattr(lock, kind).items()}
                for kind in ("bases", "git", "urls", "python")}

    assert values(together) == values(alone)
    assert PYTHON_WORKERS > 1 and RESOLVE_WORKERS > 1


def test_the_first_failure_in_order_is_raised_and_later_work_does_not_start() -> None:
    started: list[int] = []

    def work(i: int) -> int:
        started.append(i)
        if i == 1:
            time.sleep(0.2)  # fails after the 3rd has failed: still the one raised
            raise LockError("one")
        if i == 3:
            raise LockError("three")
        time.sleep(0.3)
        return i

    with pytest.raises(LockError, match="one"):
        side_by_side([lambda i=i: work(i) for i in range(40)], 4)
    assert len(started) < 40  # what had not started when it failed never started


def test_results_keep_the_order_of_the_work() -> None:
    def slow_first(i: int) -> int:
        time.sleep(0.05 * (5 - i))
        return i

    assert side_by_side([lambda i=i: slow_first(i) for i in range(5)], 5) == list(range(5))
