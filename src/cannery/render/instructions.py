"""Dockerfile instructions as small typed blocks that print their own syntax.

Renderers build lists of these; nothing else in cannery formats Dockerfile text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from cannery.util.patterns import CONTROL

_PLAIN = re.compile(r"^[A-Za-z0-9_./:@%+=,${}-]*$")
# The one build argument a label may carry: the checkout's commit (cannery.plan.CHECKOUT_ARG).
_ARG_REF = re.compile(r"\$\{CANNERY_CHECKOUT\}")
_CONTROL = re.compile(CONTROL)


def _line(text: str) -> str:
    """``text`` unchanged if it holds no control character. A line break would end the
    instruction there and start another, and no quoting can carry one, so none is ever
    printed: the catalog and the lock refuse them, and this stops any other way in."""
    found = _CONTROL.search(text)
    if found:
        raise ValueError(f"{text!r}: a Dockerfile line cannot hold {found.group()!r}")
    return text


def _quote_value(value: str) -> str:
    """An ENV value: bare when safe, else double-quoted (``$`` stays live for substitution)."""
    if value and _PLAIN.fullmatch(value):
        return value
    return '"' + _line(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _quote_label(value: str) -> str:
    """A LABEL value: always quoted, ``$`` escaped so the text is taken literally, except a
    value that is exactly ``${CANNERY_CHECKOUT}``, which the build fills in."""
    if _ARG_REF.fullmatch(value):
        return f'"{value}"'
    return '"' + _line(value).replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'


@dataclass(frozen=True)
class Comment:
    text: str

    def render(self) -> str:
        # One `# ` line per line of the text (split at every line break Python knows, a
        # superset of BuildKit's): no part of it can be read as an instruction.
        return "\n".join(f"# {_line(line)}".rstrip() for line in self.text.splitlines())


@dataclass(frozen=True)
class Blank:
    def render(self) -> str:
        return ""


@dataclass(frozen=True)
class From:
    image: str
    alias: str | None = None

    def render(self) -> str:
        return f"FROM {_line(self.image)}" + (f" AS {self.alias}" if self.alias else "")


@dataclass(frozen=True)
class Arg:
    name: str
    default: str | None = None

    def render(self) -> str:
        if self.default is None:
            return f"ARG {self.name}"
        return f"ARG {self.name}={_quote_value(self.default)}"


@dataclass(frozen=True)
class Env:
    pairs: tuple[tuple[str, str], ...]

    def render(self) -> str:
        items = [f"{_line(k)}={_quote_value(v)}" for k, v in self.pairs]
        return "ENV " + " \\\n    ".join(items)


@dataclass(frozen=True)
class Label:
    pairs: tuple[tuple[str, str], ...]

    def render(self) -> str:
        items = [f"{_line(k)}={_quote_label(v)}" for k, v in self.pairs]
        return "LABEL " + " \\\n      ".join(items)


@dataclass(frozen=True)
class Shell:
    argv: tuple[str, ...]

    def render(self) -> str:
        return "SHELL " + json.dumps(list(self.argv))


@dataclass(frozen=True)
class Cmd:
    argv: tuple[str, ...]

    def render(self) -> str:
        return "CMD " + json.dumps(list(self.argv))


@dataclass(frozen=True)
class Copy:
    """COPY from the build context (a path of the checkout being built), or with ``stage``
    from an earlier stage of the same Dockerfile (``--from=NAME``)."""

    source: str
    dest: str
    stage: str | None = None

    def render(self) -> str:
        src = f"--from={self.stage} " if self.stage else ""
        return _line(f"COPY {src}{self.source} {self.dest}")


@dataclass(frozen=True)
class Entrypoint:
    argv: tuple[str, ...]

    def render(self) -> str:
        return "ENTRYPOINT " + json.dumps(list(self.argv))


@dataclass(frozen=True)
class Workdir:
    path: str

    def render(self) -> str:
        return f"WORKDIR {_line(self.path)}"


@dataclass(frozen=True)
class User:
    name: str

    def render(self) -> str:
        return f"USER {_line(self.name)}"


@dataclass(frozen=True)
class Run:
    """A shell-form RUN. Each line is a complete shell fragment, including its own ``;``."""

    lines: tuple[str, ...]
    flags: tuple[str, ...] = ()  # --mount=… (a build secret for this RUN only)

    def __init__(self, lines: Sequence[str], flags: Sequence[str] = ()) -> None:
        object.__setattr__(self, "lines", tuple(lines))
        object.__setattr__(self, "flags", tuple(flags))

    def render(self) -> str:
        head = "RUN " + "".join(f"{f} " for f in self.flags)
        return head + " \\\n    ".join(_line(line) for line in self.lines)


Instruction = (
    Comment | Blank | From | Arg | Env | Label | Shell | Cmd | Run | Copy | Entrypoint | Workdir
    | User
)


def render_all(instructions: Sequence[Instruction]) -> str:
    return "\n".join(i.render() for i in instructions).rstrip("\n") + "\n"
