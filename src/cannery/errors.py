"""Errors the CLI turns into one line and an exit code (never a traceback without --debug).

Exit statuses: 0 success; 1 a check found something (``--check``, lint findings); 2 an
expected failure the user can act on (bad input, an unreachable or refusing server, a failed
command, a file that cannot be written); 3 an unexpected error, with a crash log.
"""

from __future__ import annotations

from pathlib import Path


class FatalError(Exception):
    """A failure the user can act on. ``exit_code`` says what kind it was."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InputError(FatalError):
    """Bad input: malformed catalog, lock or option. Exit status 2."""

    exit_code = 2


class Location:
    """Where in a file a problem is: ``file:line`` plus the dotted field path. Immutable and
    compared by value; a plain class rather than a dataclass because `cannery lint` imports
    this module, and importing ``dataclasses`` (with ``inspect``) would slow every lint start."""

    __slots__ = ("field", "line", "path")
    path: Path | str
    line: int | None
    field: str | None

    def __init__(self, path: Path | str, line: int | None = None,
                 field: str | None = None) -> None:
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "line", line)
        object.__setattr__(self, "field", field)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Location is immutable: cannot assign {name!r}")

    def _key(self) -> tuple[Path | str, int | None, str | None]:
        return (self.path, self.line, self.field)

    def __eq__(self, other: object) -> bool:
        return self._key() == other._key() if isinstance(other, Location) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Location(path={self.path!r}, line={self.line!r}, field={self.field!r})"

    def __str__(self) -> str:
        text = str(self.path)
        if self.line is not None:
            text += f":{self.line}"
        if self.field:
            text += f": {self.field}"
        return text


class CatalogError(InputError):
    """One or more catalog problems; each is already formatted ``file:line: field: reason``."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class LockError(InputError):
    """A moving reference could not be resolved, or the lock file is malformed."""


class NetworkError(FatalError):
    """A registry, git remote or download could not be reached or did not verify. Exit 2."""

    exit_code = 2


class NotFound(NetworkError):
    """The registry answered 404: no such manifest, blob or repository."""


class CommandError(FatalError):
    """An external command (git, …) is missing, failed or timed out. Exit status 2."""

    exit_code = 2


class WriteError(FatalError):
    """An output file or directory cannot be written. Exit status 2."""

    exit_code = 2


class CheckFailed(FatalError):
    """``--check`` found a difference. Exit status 1, like a linter finding."""

    exit_code = 1
