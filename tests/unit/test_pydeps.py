"""Parsing `uv pip compile --generate-hashes` output into the lock's one-line requirements."""

from __future__ import annotations

import pytest

from cannery.errors import LockError
from cannery.pydeps import parse_compiled

H1, H2 = "a" * 64, "b" * 64

UV_OUTPUT = f"""\
numpy-lite==2.0 \\
    --hash=sha256:{H1} \\
    --hash=sha256:{H2}
/tmp/cannery-py-x/src/vllm
Torch==2.9.0 \\
    --hash=sha256:{H1}
wheelpkg @ https://files.example.com/wheelpkg-1-py3-none-any.whl \\
    --hash=sha256:{H2}
"""


def test_locked_lines_sorted_paths_and_urls_dropped() -> None:
    assert parse_compiled(UV_OUTPUT) == [
        f"numpy-lite==2.0 --hash=sha256:{H1} --hash=sha256:{H2}",
        f"Torch==2.9.0 --hash=sha256:{H1}",
    ]


@pytest.mark.parametrize("line", ["numpy-lite==2.0", "numpy-lite>=2.0 --hash=sha256:" + H1])
def test_a_line_without_hash_or_exact_pin_is_refused(line: str) -> None:
    with pytest.raises(LockError, match="unexpected output line"):
        parse_compiled(line + "\n")
