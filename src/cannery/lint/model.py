"""What a lint run produces: findings with exact spans, and the fixes that go with them."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Severity(enum.IntEnum):
    INFO = 1
    WARNING = 2
    ERROR = 3
    CRITICAL = 4  # e.g. a TLS bypass persisted into the image for every later user

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(
                f"unknown severity {text!r} (use info, warning, error, critical)"
            ) from None

    def __str__(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Span:
    """1-based line and column (in characters); end is inclusive line, exclusive column."""

    path: str
    line: int
    column: int = 1
    end_line: int = 0
    end_column: int = 0

    def __post_init__(self) -> None:
        if self.end_line < self.line:
            object.__setattr__(self, "end_line", self.line)
        if self.end_line == self.line and self.end_column < self.column:
            object.__setattr__(self, "end_column", self.column)


@dataclass(frozen=True)
class Edit:
    """Replace text[start:end] (character offsets into the whole file) with ``text``."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Fix:
    description: str
    edits: tuple[Edit, ...]
    safe: bool = False


@dataclass(frozen=True)
class Finding:
    rule: str
    code: str
    severity: Severity
    message: str
    span: Span
    hint: str = ""
    fix: Fix | None = None
    related: tuple[tuple[Span, str], ...] = field(default=())

    @property
    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.span.path, self.span.line, self.span.column, self.rule)
