"""`cannery copy` refuses bad references with one line and exit 2, before any request."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["Bad/Repo:1", "127.0.0.1:9/x"], "SRC Bad/Repo:1: "),
        (["127.0.0.1:9/a:1", "127.0.0.1:9/UPPER"], "DST 127.0.0.1:9/UPPER: "),
        (["127.0.0.1:9/a:1", f"127.0.0.1:9/b@sha256:{'0' * 64}"], "the digest is the source's"),
    ],
)
def test_bad_reference_is_one_line_exit_2(cli, args: list[str], words: str) -> None:  # type: ignore[no-untyped-def]
    res = cli("copy", *args)
    assert res.code == 2, res.err
    assert words in res.err and "Traceback" not in res.err
    assert len(res.err.strip().splitlines()) == 1, res.err


def test_unreachable_source_is_one_line_exit_2(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("copy", "127.0.0.1:9/a:1", "127.0.0.1:9/b")  # the discard port: nothing listens
    assert res.code == 2, res.err
    assert "127.0.0.1:9" in res.err and "Traceback" not in res.err
