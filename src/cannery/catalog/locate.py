"""Map TOML key paths to line numbers, so every catalog error can name file:line.

tomllib gives values but no positions. This scanner follows the parts of TOML a catalog uses
(tables, arrays of tables, dotted and quoted keys, inline tables, multi-line arrays and strings)
and records the first line of each key path; an unknown path falls back to its nearest parent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from cannery.util import toml

_KEY = r'(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|\'[^\']*\')'
_DOTTED = rf"{_KEY}(?:\s*\.\s*{_KEY})*"
_HEADER = re.compile(rf"^\s*(\[\[?)\s*({_DOTTED})\s*\]\]?")
_ASSIGN = re.compile(rf"^\s*({_DOTTED})\s*=\s*(.*)$")
_INLINE_KEY = re.compile(rf"(?:^|[{{,])\s*({_DOTTED})\s*=")
_STRING_ITEM = re.compile(r'^\s*("(?:[^"\\]|\\.)*"|\'[^\']*\')\s*,?')

Path = tuple[str | int, ...]


def _split(dotted: str) -> list[str]:
    parts = re.findall(_KEY, dotted)
    return [_unquote(p) for p in parts]


def _unquote(key: str) -> str:
    """A key as TOML reads it: quotes removed, a basic string's escapes decoded."""
    if key[:1] == '"' and "\\" in key:
        try:
            return str(toml.loads(f"k = {key}")["k"])
        except toml.TOMLDecodeError:
            return key[1:-1]
    return key[1:-1] if key[:1] in "\"'" else key


class LineMap:
    def __init__(self, text: str) -> None:
        self.lines: dict[Path, int] = {}
        self._scan(text)

    def _scan(self, text: str) -> None:
        table: Path = ()
        aot_count: dict[Path, int] = {}
        array_path: Path | None = None
        array_index = 0
        depth = 0
        in_multiline: str | None = None
        for no, raw in enumerate(text.splitlines(), start=1):
            line = raw
            if in_multiline:
                if in_multiline in line:
                    in_multiline = None
                continue
            if array_path is not None:
                m = _STRING_ITEM.match(line)
                if m:
                    self.lines.setdefault((*array_path, array_index), no)
                    array_index += line.count(",") or 1
                elif depth == 1 and line.lstrip().startswith("{"):
                    # an inline table on its own line (a matrix axis's word with its fields)
                    item = (*array_path, array_index)
                    self.lines.setdefault(item, no)
                    for k in _INLINE_KEY.finditer(line.lstrip()[1:]):
                        self.lines.setdefault((*item, *_split(k.group(1))), no)
                    array_index += 1
                depth += line.count("[") - line.count("]")
                if depth <= 0:
                    array_path = None
                continue
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            h = _HEADER.match(line)
            if h and not _ASSIGN.match(line):
                keys: Path = tuple(_split(h.group(2)))
                if h.group(1) == "[[":
                    idx = aot_count.get(keys, 0)
                    aot_count[keys] = idx + 1
                    self.lines.setdefault(keys, no)
                    keys = (*keys, idx)
                table = keys
                self.lines.setdefault(table, no)
                continue
            a = _ASSIGN.match(line)
            if not a:
                continue
            path: Path = (*table, *_split(a.group(1)))
            self.lines.setdefault(path, no)
            value = a.group(2)
            for q in ('"""', "'''"):
                if value.startswith(q) and value.count(q) == 1:
                    in_multiline = q
            if value.startswith("{"):
                for k in _INLINE_KEY.finditer(value):
                    self.lines.setdefault((*path, *_split(k.group(1))), no)
            elif value.startswith("["):
                body = value[1:]
                opened = value.count("[") - value.count("]")
                if opened > 0:
                    array_path, array_index, depth = path, 0, opened
                    if _STRING_ITEM.match(body):
                        self.lines.setdefault((*path, 0), no)
                        array_index = body.count(",")

    def line_of(self, path: Sequence[str | int]) -> int | None:
        """The line of ``path``, or of its closest recorded parent."""
        p = tuple(path)
        while p:
            if p in self.lines:
                return self.lines[p]
            p = p[:-1]
        return None
