"""Where a catalog's problems are said: each at the line where its key is written (extends
and matrices resolved), every error once, in file order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cannery.catalog.locate import LineMap
from cannery.catalog.matrix import Expanded
from cannery.errors import Location


@dataclass(frozen=True)
class Problem:
    where: Location
    message: str
    code: str = "error"

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


def fmt_path(path: tuple[str | int, ...]) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


class Collector:
    def __init__(self, path: str, lines: LineMap) -> None:
        self.path = path
        self.lines = lines
        self.errors: list[Problem] = []
        self.warnings: list[Problem] = []
        # (table, entry) → (key → the entry of the extends chain where that key is written;
        # "" for a key nobody wrote): a mistake is reported where it is written, once.
        self.origins: dict[tuple[str, str], dict[str, str]] = {}
        # (image, labels|env) → (key → the image that wrote it): those tables merge
        self.label_origins: dict[tuple[str, str], dict[str, str]] = {}
        self.parents: dict[tuple[str, str], str] = {}
        # Entries of tables the built-in Ascend facts also fill (envs, families) that the
        # catalog itself writes: only those can be unused by its mistake.
        self.own: dict[str, set[str]] = {}
        self._pending: list[tuple[tuple[str, str], tuple[str, str], str]] = []
        # The images a matrix made, by name; and of each error at one of them, how many more
        # of its siblings have it (written once in the entry, it is reported once).
        self.expanded: dict[str, Expanded] = {}
        self._seen: dict[tuple[Any, ...], Problem] = {}
        self._more: dict[Problem, tuple[str, int]] = {}

    def _expanded(self, fpath: tuple[str | int, ...]) -> Expanded | None:
        if len(fpath) >= 2 and fpath[0] == "images" and str(fpath[1]) in self.expanded:
            return self.expanded[str(fpath[1])]
        return None

    def written(self, fpath: tuple[str | int, ...]) -> tuple[str | int, ...]:
        """``fpath`` moved to the entry that wrote the key it names (extends resolved; for an
        image a matrix made, its axis table, include or entry)."""
        exp = self._expanded(fpath)
        if exp is not None:
            src = exp.source(fpath[2:])
            if src is not None:
                return (*src, *fpath[2:])
            fpath = ("images", exp.entry, *fpath[2:])
        if len(fpath) < 2 or (str(fpath[0]), str(fpath[1])) not in self.origins:
            return fpath
        table, entry = str(fpath[0]), str(fpath[1])
        if len(fpath) == 2:
            return fpath
        key = str(fpath[2])
        owner = self.origins[(table, entry)].get(key)
        if owner is None:  # nobody in the chain wrote it: the chain's first entry lacks it
            owner = self.chain(table, entry)[-1]
        if table == "images" and key in MERGED and len(fpath) > 3:
            owner = self.label_origins.get((entry, key), {}).get(str(fpath[3]), owner)
        return (table, owner, *fpath[2:])

    def chain(self, table: str, entry: str) -> list[str]:
        """``entry``, its parent, …, up to the entry that extends nothing."""
        out = [entry]
        while (table, out[-1]) in self.parents and len(out) <= len(self.parents):
            out.append(self.parents[(table, out[-1])])
        return out

    def at(self, fpath: tuple[str | int, ...]) -> Location:
        exp = self._expanded(fpath)
        if exp is not None:  # named with its words, at the line where the key is written
            return Location(self.path, self.lines.line_of(self.written(fpath)),
                            exp.shown(fpath[2:]))
        return Location(self.path, self.lines.line_of(fpath), fmt_path(fpath))

    def error(self, fpath: tuple[str | int, ...], message: str) -> None:
        exp = self._expanded(fpath)
        if exp is not None:
            problem = Problem(self.at(fpath), message)
            # a mistake at one key of many images of the matrix (written once, or one kind of
            # mistake, e.g. a tag every image renders alike): said once, with how many more
            key = (exp.entry, problem.where.line, fmt_path(("x", *fpath[2:])))
            if key in self._seen:
                first = self._seen[key]
                self._more[first] = (exp.entry, self._more[first][1] + 1)
                return
            self._seen[key] = problem
            self._more[problem] = (exp.entry, 0)
            self.errors.append(problem)
            return
        fpath = self.written(fpath)
        if len(fpath) == 2 and (str(fpath[0]), str(fpath[1])) in self.parents:
            # A whole-entry mistake of an entry that extends another: if an ancestor has the
            # same one, it is the ancestor's mistake, inherited (already reported there).
            table, entry = str(fpath[0]), str(fpath[1])
            for ancestor in self.chain(table, entry)[1:]:
                self._pending.append(((table, ancestor), (table, entry), message))
        problem = Problem(self.at(fpath), message)
        if problem not in self.errors:
            self.errors.append(problem)

    def problems(self) -> list[str]:
        """Every error once, in the order found."""
        inherited = {
            Problem(self.at(child), message)
            for ancestor, child, message in self._pending
            if Problem(self.at(ancestor), message) in self.errors
        }
        kept = [p for p in self.errors if p not in inherited]
        return [self._shown(p) for p in sorted(kept, key=lambda p: p.where.line or 0)]

    def _shown(self, p: Problem) -> str:
        entry, more = self._more.get(p, ("", 0))
        if more:
            return f"{p} (and {more} more image{'s' if more > 1 else ''} of images.{entry})"
        return str(p)

    def warn(self, fpath: tuple[str | int, ...], code: str, message: str) -> None:
        self.warnings.append(Problem(self.at(fpath), f"warning[{code}]: {message}", code))


# An image's tables that an `extends` child adds to, key by key, rather than replaces.
MERGED = ("labels", "env")
