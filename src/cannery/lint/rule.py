"""The base every rule module builds on: identity, default severity, fix safety, helpers."""

from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.model import Confidence, Finding, Fix, Severity, Span

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any, ClassVar

# what a compiled Pattern offers, filled in on a _LazyPattern's first use
_PATTERN_ATTRS = ("pattern", "flags", "groups", "groupindex", "search", "match", "fullmatch",
                  "findall", "finditer", "sub", "subn", "split", "scanner")


class _LazyPattern:
    __slots__ = ("_flags_", "_source", *_PATTERN_ATTRS)

    def __init__(self, source: str, flags: int) -> None:
        self._source = source
        self._flags_ = flags

    def __getattr__(self, name: str) -> Any:
        # reached only while the slots are empty: compile once, then every attribute is the
        # compiled Pattern's own, so a use costs nothing more than with re.compile
        compiled = re.compile(self._source, self._flags_)
        for attr in _PATTERN_ATTRS:
            setattr(self, attr, getattr(compiled, attr))
        return getattr(compiled, name)


def lazy_re(source: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(source, flags)``, compiled when first used. For rule modules' patterns:
    Python compiles regular expressions slowly, and compiling every rule's patterns on import
    cost each `cannery lint` run about 8 ms of CPU, 6 of them for patterns the seed
    Dockerfile never reaches."""
    return _LazyPattern(source, flags)  # type: ignore[return-value]  # quacks like a Pattern


class LintContext:
    """What rules may consult besides the file: options and Ascend domain facts."""

    __slots__ = (
        "_texts",
        "base_env",
        "boundary",
        "implicit_args",
        "no_compile_env",
        "peers",
        "root",
        "target",
        "trusted_registries",
    )

    def __init__(self, implicit_args: frozenset[str], trusted_registries: tuple[str, ...],
                 root: str = ".", base_env: dict[str, list[str]] | None = None,
                 target: str | None = None, no_compile_env: tuple[str, ...] = (),
                 peers: tuple[str, ...] = (), boundary: str | None = None) -> None:
        self.implicit_args = implicit_args
        self.trusted_registries = trusted_registries
        self.root = root  # repository root, for paths a workflow names
        # the directory no read may leave (see read): the repository
        self.boundary = root if boundary is None else boundary
        self._texts: dict[str, str | None] = {}
        # image pattern → vars set
        self.base_env: dict[str, list[str]] = {} if base_env is None else base_env
        self.target = target  # the Dockerfile stage that ships (None: the last)
        self.no_compile_env = no_compile_env  # NAME=VALUE that turn native compilation off
        self.peers = peers  # the Dockerfiles linted in the same run (any directory)

    def outside(self, name: str) -> str | None:
        """Why ``name`` (relative to ``root``, as a workflow's `file:` is) is outside the
        repository, or None when it is inside: absolute or climbing out with `..`, or a
        symbolic link on the way leads out."""
        import os

        from cannery.lint.files import inside, within

        top = os.path.realpath(self.boundary)
        path = os.path.join(os.path.realpath(self.root), name)
        if not within(os.path.normpath(path), top):
            return "an absolute path" if os.path.isabs(name) else "a path that climbs out with .."
        try:
            if not inside(path, top):
                return f"a path through a symbolic link to {os.path.realpath(path)}"
        except (OSError, ValueError):  # a name too long, or with a NUL, is no path
            return "not a path"
        return None

    def read(self, name: str, boundary: str | None = None) -> str | None:
        """The text of the file ``name`` (relative to ``root``, or absolute) if lint may read
        it: inside ``boundary`` (default: this file's) once symbolic links are followed, a
        regular file, at most lint/files.py's MAX_BYTES. None for anything else, and for a
        file that does not exist."""
        import os

        path = os.path.join(self.root, name)
        if path not in self._texts:
            from cannery.lint.files import Skipped, read_text

            try:
                text: str | None = read_text(path, boundary or self.boundary)
            except (OSError, ValueError, Skipped):  # ValueError: a NUL in the name
                text = None
            self._texts[path] = text
        return self._texts[path]

    def find_dockerfile(self, name: str) -> tuple[str, str] | None:
        """(path, text) of the file a workflow's `file:` names: under the repository root,
        or else the one Dockerfile linted in this run whose path ends with that name (read
        as the run read it: inside its own repository). None when neither can be read; a
        name outside the repository is not looked up (path-outside-repository reports it)."""
        import os
        from pathlib import Path

        from cannery.lint.files import repository

        if self.outside(name) is not None:
            return None
        text = self.read(name)
        if text is not None:
            return str(Path(self.root) / name), text
        tail = "/" + name.lstrip("./").replace("\\", "/")
        found = [p for p in self.peers if os.path.realpath(p).replace(os.sep, "/").endswith(tail)]
        if len(found) != 1:
            return None
        where = os.path.abspath(found[0])
        text = self.read(where, str(repository(Path(where).parent)))
        return None if text is None else (found[0], text)

    def env_of_base(self, image: str) -> set[str] | None:
        """Variables the base image ``image`` is known to set to a non-empty value, or None
        when nothing is known about it (then no variable may be called unset)."""
        import fnmatch

        image = re.sub(r"^(docker\.io/)?(library/)?", "", image)
        # a digest pins some tag of the same image: `ubuntu@sha256:…` is an `ubuntu:*`
        name, _, digest = image.partition("@")
        forms = [name, f"{name}:*"] if digest and ":" not in name.rsplit("/", 1)[-1] else [name]
        out: set[str] | None = None
        for pattern, names in self.base_env.items():
            if any(fnmatch.fnmatch(form, pattern) for form in forms):
                out = (out or set()) | set(names)
        return out

    @property
    def soc_families(self) -> dict[str, str]:
        """SOC_VERSION → chip token (910b, a3, …), read only when a rule asks."""
        from cannery.knowledge import soc_chips

        return soc_chips()


class Rule:
    """Subclasses set the class attributes and implement ``check``.

    The class docstring is the rule's documentation (What it does / Why is this bad? /
    Example / Use instead); ``cannery lint --explain NAME`` prints it.
    """

    name: ClassVar[str]
    code: ClassVar[str]
    severity: ClassVar[Severity]
    targets: ClassVar[tuple[str, ...]]  # "dockerfile", "workflow"
    fix: ClassVar[str] = "none"  # none | safe | unsafe

    def check(self, facts: Any, ctx: LintContext) -> Iterator[Finding]:
        raise NotImplementedError

    def finding(
        self,
        path: str,
        line: int,
        column: int,
        message: str,
        *,
        end_line: int = 0,
        end_column: int = 0,
        hint: str = "",
        severity: Severity | None = None,
        fix: Fix | None = None,
        related: tuple[tuple[Span, str], ...] = (),
        confidence: Confidence = Confidence.HIGH,
    ) -> Finding:
        return Finding(
            rule=self.name,
            code=self.code,
            severity=severity or self.severity,
            message=message,
            span=Span(path, line, column, end_line or line, end_column),
            hint=hint,
            fix=fix,
            related=related,
            confidence=confidence,
        )

    def at(self, path: str, pos: Any, message: str, **kw: Any) -> Finding:
        """A finding at a shell Pos (or anything with line/column/end_line/end_column)."""
        return self.finding(path, pos.line, pos.column, message, end_line=pos.end_line,
                            end_column=pos.end_column, **kw)
