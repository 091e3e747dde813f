"""``util.background.in_background``: the one way a command runs work beside its main line (the
TLS roots, the speculative lock, attestations beside the index write, layers asked during the
build). What it gives, or raises, reaches the caller's thread, on every call."""

from __future__ import annotations

import threading

import pytest

from cannery.util.background import in_background


def test_the_result_and_the_error_reach_the_caller_every_time() -> None:
    where: list[str] = []

    def work() -> int:
        where.append(threading.current_thread().name)
        return 42

    wait = in_background(work, "cannery-test")
    assert wait() == 42 and wait() == 42
    assert where == ["cannery-test"]  # ran once, in its own thread

    def fails() -> int:
        raise ValueError("refused")

    broken = in_background(fails, "cannery-test-fails")
    for _ in range(2):
        with pytest.raises(ValueError, match="refused"):
            broken()
