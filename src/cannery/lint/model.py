"""What a lint run produces: findings with exact spans, and the fixes that go with them.

These are plain classes with ``__slots__``, not dataclasses: `cannery lint` imports them on
every run, and ``dataclasses`` cost a one-file lint about 14 ms of CPU, a fifth of it (the
module imports ``inspect``, and each class compiles its generated methods with ``exec``).
Each is immutable and compares and hashes by its fields, as a frozen dataclass would.
"""

from __future__ import annotations

import enum

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from typing import TypeVar

    _F = TypeVar("_F", bound="Frozen")


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


class Confidence(enum.IntEnum):
    """How sure a finding is that the defect is real (zizmor's confidence, beside severity:
    how bad it is if real). Most findings are certain from the file; a rule lowers it when
    the answer depends on something lint cannot see, such as an unknown base image's
    config."""

    LOW = 1
    MEDIUM = 2
    HIGH = 3

    @classmethod
    def parse(cls, text: str) -> Confidence:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown confidence {text!r} (use low, medium, high)") from None

    def __str__(self) -> str:
        return self.name.lower()


class Frozen:
    """Immutable once built: ``__init__`` sets the fields named in ``__slots__`` (its
    parameters, by the same names) with ``object.__setattr__``; ``replace`` makes changed
    copies."""

    __slots__: tuple[str, ...] = ()

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot assign {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot delete {name!r}")

    def __reduce__(self) -> tuple[object, ...]:
        return _restore, (type(self), self._fields())

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"{type(self).__name__}({fields})"

    def replace(self: _F, **changes: object) -> _F:
        """A copy with ``changes`` applied (what ``dataclasses.replace`` does)."""
        values: dict[str, object] = {name: getattr(self, name) for name in self.__slots__}
        values.update(changes)
        return type(self)(**values)


def _restore(cls: type[Frozen], values: tuple[object, ...]) -> Frozen:
    """Unpickle a Frozen (``__setattr__`` refuses, so pickle's default cannot)."""
    obj = cls.__new__(cls)
    for name, value in zip(cls.__slots__, values, strict=True):
        object.__setattr__(obj, name, value)
    return obj


class _Value(Frozen):
    """Frozen, and equal (and hashed) by its fields, like a frozen dataclass."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Value) or other.__class__ is not self.__class__:
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())


_set = object.__setattr__


class Span(_Value):
    """1-based line and column (in characters); end is inclusive line, exclusive column."""

    __slots__ = ("column", "end_column", "end_line", "line", "path")
    path: str
    line: int
    column: int
    end_line: int
    end_column: int

    def __init__(self, path: str, line: int, column: int = 1, end_line: int = 0,
                 end_column: int = 0) -> None:
        if end_line < line:
            end_line = line
        if end_line == line and end_column < column:
            end_column = column
        _set(self, "path", path)
        _set(self, "line", line)
        _set(self, "column", column)
        _set(self, "end_line", end_line)
        _set(self, "end_column", end_column)


class Edit(_Value):
    """Replace text[start:end] (character offsets into the whole file) with ``text``."""

    __slots__ = ("end", "start", "text")
    start: int
    end: int
    text: str

    def __init__(self, start: int, end: int, text: str) -> None:
        _set(self, "start", start)
        _set(self, "end", end)
        _set(self, "text", text)


class Fix(_Value):
    __slots__ = ("description", "edits", "safe")
    description: str
    edits: tuple[Edit, ...]
    safe: bool

    def __init__(self, description: str, edits: tuple[Edit, ...], safe: bool = False) -> None:
        _set(self, "description", description)
        _set(self, "edits", edits)
        _set(self, "safe", safe)


class Finding(_Value):
    __slots__ = ("code", "confidence", "fix", "hint", "message", "related", "rule", "severity",
                 "span")
    rule: str
    code: str
    severity: Severity
    message: str
    span: Span
    hint: str
    fix: Fix | None
    related: tuple[tuple[Span, str], ...]
    confidence: Confidence

    def __init__(self, rule: str, code: str, severity: Severity, message: str, span: Span,
                 hint: str = "", fix: Fix | None = None,
                 related: tuple[tuple[Span, str], ...] = (),
                 confidence: Confidence = Confidence.HIGH) -> None:
        _set(self, "rule", rule)
        _set(self, "code", code)
        _set(self, "severity", severity)
        _set(self, "message", message)
        _set(self, "span", span)
        _set(self, "hint", hint)
        _set(self, "fix", fix)
        _set(self, "related", related)
        _set(self, "confidence", confidence)

    @property
    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.span.path, self.span.line, self.span.column, self.rule)
