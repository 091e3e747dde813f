"""A small YAML writer for generated workflows: block style, stable quoting, comments.

Only this module knows YAML syntax. Renderers build plain dicts and lists (insertion order is
output order) with two extra node kinds: ``Commented`` (a value with a trailing ``# comment``,
used for an action pinned to a SHA with its version) and ``Literal`` (a ``|`` block scalar).
A mapping key ``Gap()`` inserts an empty line, ``Note(text)`` a comment line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# Scalars YAML 1.1/1.2 would read as something other than a string.
_SPECIAL = re.compile(
    r"^(?:~|null|Null|NULL|true|True|TRUE|false|False|FALSE|yes|Yes|YES|no|No|NO|on|On|ON"
    r"|off|Off|OFF|y|Y|n|N|[-+]?(?:\d[\d_]*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|0x[0-9a-fA-F]+"
    r"|0o[0-7]+|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)|\d+:\d+(?::\d+)*)$"
)
_PLAIN = re.compile(r"^[A-Za-z0-9_./$(][A-Za-z0-9_ ./@$(){}=,'\"!&|<>*+:-]*$")


@dataclass(frozen=True)
class Commented:
    value: str
    comment: str


@dataclass(frozen=True)
class Literal:
    text: str


@dataclass(frozen=True)
class Gap:
    """A blank line between mapping entries (used as a key; its value is ignored)."""

    n: int = 0


@dataclass(frozen=True)
class Note:
    """A ``# text`` line between mapping entries (used as a key; its value is ignored)."""

    text: str


Node = object


def scalar(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if not isinstance(value, str):
        raise TypeError(f"cannot write {type(value).__name__} as YAML")
    if (
        _PLAIN.fullmatch(value)  # (match would let a trailing line break through)
        and not _SPECIAL.match(value)
        and ": " not in value
        and " #" not in value
        and not value.endswith((" ", ":"))
    ):
        return value
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar


def _key(key: str) -> str:
    return scalar(key)


def _is_block(value: object) -> bool:
    return (isinstance(value, Mapping) and bool(value)) or (
        isinstance(value, Sequence) and not isinstance(value, str) and bool(value)
    )


def _emit(value: Node, indent: int, out: list[str]) -> None:
    pad = " " * indent
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, Gap):
                out.append("")
                continue
            if isinstance(key, Note):
                out.extend(f"{pad}# {line}".rstrip() for line in key.text.splitlines())
                continue
            head = f"{pad}{_key(key)}:"
            _entry(head, item, indent, out)
        return
    if isinstance(value, Sequence) and not isinstance(value, str):
        for item in value:
            if isinstance(item, Mapping) and item:
                sub: list[str] = []
                _emit(item, indent + 2, sub)
                first = sub[0]
                out.append(f"{pad}- {first[indent + 2:]}")
                out.extend(sub[1:])
            else:
                _entry(f"{pad}-", item, indent, out)
        return
    raise TypeError("top-level YAML node must be a mapping or a list")


def _entry(head: str, item: Node, indent: int, out: list[str]) -> None:
    if isinstance(item, Commented):
        out.append(f"{head} {scalar(item.value)} # {item.comment}")
    elif isinstance(item, Literal):
        out.append(f"{head} |")
        out.extend(
            (" " * (indent + 2) + line).rstrip() for line in item.text.rstrip("\n").splitlines()
        )
    elif _is_block(item):
        out.append(head)
        _emit(item, indent + 2, out)
    elif isinstance(item, Mapping):
        out.append(f"{head} {{}}")
    elif isinstance(item, Sequence) and not isinstance(item, str):
        out.append(f"{head} []")
    else:
        out.append(f"{head} {scalar(item)}")


def dump(document: Mapping[str, Node], header: str = "") -> str:
    """The document as YAML text, with ``header`` as leading ``#`` comment lines."""
    out = [f"# {line}".rstrip() for line in header.splitlines()]
    _emit(document, 0, out)
    return "\n".join(out) + "\n"
