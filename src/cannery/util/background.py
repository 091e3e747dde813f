"""Work started in a thread, waited for where its result is needed."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


def in_background(work: Callable[[], T], name: str) -> Callable[[], T]:
    """Start ``work`` in a daemon thread named ``name`` (a command that ends early does not
    wait for it at exit); the callable returned waits for it and gives its result, or raises
    what it raised, in the caller's thread, every time it is called."""
    result: list[T] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            result.append(work())
        except BaseException as exc:  # raised by the waiter, never lost in the thread
            failed.append(exc)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()

    def wait() -> T:
        thread.join()
        if failed:
            raise failed[0]
        return result[0]

    return wait


def side_by_side(work: Sequence[Callable[[], T]], workers: int) -> list[T]:
    """Each of ``work`` run in at most ``workers`` threads; their results in ``work``'s order.

    The first failure in that order is raised, in the caller's thread, once the work before it
    has finished; work not started by then never starts (what is running finishes first)."""
    if workers <= 1 or len(work) <= 1:
        return [w() for w in work]
    with ThreadPoolExecutor(min(workers, len(work)), thread_name_prefix="cannery-resolve") as pool:
        futures = [pool.submit(w) for w in work]
        try:
            return [f.result() for f in futures]
        except BaseException:
            for f in futures:
                f.cancel()
            raise
