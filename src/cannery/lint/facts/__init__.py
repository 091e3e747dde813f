"""Parsed views of the files lint reads; rules only ever look at these."""

from __future__ import annotations


class ParseFailure(Exception):
    """The file cannot be parsed (as BuildKit or YAML would reject it), at ``line``."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message
