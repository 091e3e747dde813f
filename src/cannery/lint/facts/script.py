"""What lint knows of a parsed shell script: its simple commands (with their words, options and
redirects), assignments, branches and the variables it reads, each with its place in the file."""

from __future__ import annotations

import re

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

# Global options that take a separate value, per tool (so `git -C dir clone` is a clone).
GLOBAL_OPTS = {"git": ("-C", "-c", "--git-dir", "--work-tree", "--namespace"),
               "pip": ("--log", "--proxy", "--cache-dir")}
# Short options that take a value, per tool: in a cluster, what follows one is its value.
SHORT_VALUE = {"curl": "oudHXeEKrTwxAbcmyYzCFUQP", "wget": "OoaPtTweiUQBlDARIX",
               "aria2c": "odxsjki",
               "git": "Cc", "tar": "fCT", "unzip": "d", "pip": "rcetie",
               "sha256sum": "", "gpg": "uor"}


# The fact classes are plain classes with __slots__ rather than dataclasses: a lint run makes
# thousands of them, and importing `dataclasses` and generating the methods of lint's classes
# cost every `cannery lint` about 14 ms of CPU at start-up (see lint/model.py).


class Pos:
    __slots__ = ("column", "end_column", "end_line", "line")

    def __init__(self, line: int, column: int, end_line: int, end_column: int) -> None:
        self.line = line  # 1-based, in the file
        self.column = column  # 1-based, in characters
        self.end_line = end_line
        self.end_column = end_column


class Word:
    __slots__ = ("end", "pos", "start", "text", "value")

    def __init__(self, text: str, value: str, pos: Pos, start: int, end: int) -> None:
        self.text = text  # as written
        self.value = value  # quotes removed (expansions left as written)
        self.pos = pos
        self.start = start  # character offset in the file
        self.end = end


class Command:
    """A simple command, normalised: ``python3 -m pip install`` has name ``pip``."""

    __slots__ = (
        "args",
        "depth",
        "end",
        "in_substitution",
        "index",
        "name",
        "node",
        "pipe_index",
        "pipeline",
        "pos",
        "prefix_env",
        "raw_name",
        "redirects",
        "start",
        "stdin",
    )

    def __init__(self, name: str, args: list[Word], prefix_env: dict[str, Word], pos: Pos,
                 start: int, end: int, node: Any, index: int = 0, in_substitution: bool = False,
                 pipeline: list[Command] | None = None, pipe_index: int = 0,
                 redirects: list[tuple[str, Word]] | None = None, raw_name: str = "",
                 depth: int = 0, stdin: Word | None = None) -> None:
        self.name = name
        self.args = args
        self.prefix_env = prefix_env
        self.pos = pos
        self.start = start
        self.end = end
        self.node = node
        self.index = index
        self.in_substitution = in_substitution
        self.pipeline = pipeline
        self.pipe_index = pipe_index
        # (operator, target)
        self.redirects: list[tuple[str, Word]] = [] if redirects is None else redirects
        self.raw_name = raw_name
        self.depth = depth  # how many $( … ) enclose it
        self.stdin = stdin  # a heredoc body or here-string fed to it

    @property
    def argv(self) -> list[str]:
        return [w.value for w in self.args]

    def short_flags(self, v: str) -> str:
        """The option letters of a short-option cluster (``-fsSLo`` → ``fsSLo``), stopping
        after the first letter that takes a value (``-ofile`` is ``-o file``, not ``-k``)."""
        if not re.fullmatch(r"-[A-Za-z0-9][^=]*", v):
            return ""
        takes = SHORT_VALUE.get(self.name, "")
        out = []
        for ch in v[1:]:
            if not ch.isalnum():
                break
            out.append(ch)
            if ch in takes:
                break
        return "".join(out)

    def has_flag(self, *flags: str) -> bool:
        for w in self.args:
            v = w.value
            if v == "--":
                break
            for f in flags:
                if v == f or (f.startswith("--") and v.startswith(f + "=")):
                    return True
                # combined short flags: -fsSLk contains -k
                if len(f) == 2 and f[0] == "-" and not v.startswith("--") and (
                        f[1] in self.short_flags(v)):
                    return True
        return False

    def flag_value(self, *flags: str) -> Word | None:
        for i, w in enumerate(self.args):
            v = w.value
            for f in flags:
                if v == f and i + 1 < len(self.args):
                    return self.args[i + 1]
                if f.startswith("--") and v.startswith(f + "="):
                    return Word(w.text, v[len(f) + 1 :], w.pos, w.start, w.end)
                if len(f) == 2 and f[1] in SHORT_VALUE.get(self.name, "") and (
                        not v.startswith("--")):
                    cluster = self.short_flags(v)
                    if cluster.endswith(f[1]):
                        rest = v[len(cluster) + 1 :]
                        if rest:  # -ofile
                            return Word(w.text, rest, w.pos, w.start, w.end)
                        if i + 1 < len(self.args) and len(cluster) > 1:  # -fsSLo file
                            return self.args[i + 1]
        return None

    def positional(self) -> list[Word]:
        return [w for w in self.args if not w.value.startswith("-")]

    def subcommand(self) -> str:
        """The first operand, skipping global options that take a value (git -C DIR …)."""
        skip = GLOBAL_OPTS.get(self.name, ())
        args = self.args
        i = 0
        while i < len(args):
            v = args[i].value
            if v in skip:
                i += 2
                continue
            if v.startswith("-"):
                i += 1
                continue
            return v
        return ""

    def operands(self) -> list[Word]:
        """Arguments after the subcommand that are not options."""
        sub = self.subcommand()
        seen = False
        out = []
        for w in self.args:
            if not seen:
                seen = w.value == sub
                continue
            if not w.value.startswith("-"):
                out.append(w)
        return out


class Assignment:
    __slots__ = ("end", "exported", "index", "name", "node", "pos", "start", "value")

    def __init__(self, name: str, value: Word | None, pos: Pos, start: int, end: int,
                 exported: bool, node: Any, index: int = 0) -> None:
        self.name = name
        self.value = value
        self.pos = pos
        self.start = start
        self.end = end
        self.exported = exported
        self.node = node
        self.index = index


class Branching:
    """An if/elif chain or a case statement, for arch-dispatch checks."""

    __slots__ = ("has_default", "kind", "labels", "pos", "subject")

    def __init__(self, kind: str, subject: str, has_default: bool, pos: Pos,
                 labels: list[str]) -> None:
        self.kind = kind  # if | case
        self.subject = subject  # the tested text
        self.has_default = has_default
        self.pos = pos
        self.labels = labels


class Script:
    __slots__ = (
        "assignments",
        "branches",
        "commands",
        "expansions",
        "has_error",
        "root",
        "text",
    )

    def __init__(self, text: str, commands: list[Command], assignments: list[Assignment],
                 branches: list[Branching], expansions: list[tuple[str, Pos]], has_error: bool,
                 root: Any = None) -> None:
        self.text = text
        self.commands = commands
        self.assignments = assignments
        self.branches = branches
        self.expansions = expansions  # variables read: $X, ${X}, ${X:-…}
        self.has_error = has_error
        self.root = root


def unquote(text: str) -> str:
    """Remove shell quoting for matching purposes (not a full shell evaluation)."""
    if "'" not in text and '"' not in text and "\\" not in text:
        return text  # nothing to remove (most words)
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "'":
            j = text.find("'", i + 1)
            j = len(text) if j < 0 else j
            out.append(text[i + 1 : j])
            i = j + 1
        elif ch == '"':
            j = i + 1
            buf = []
            while j < len(text) and text[j] != '"':
                if text[j] == "\\" and j + 1 < len(text) and text[j + 1] in '"\\$`':
                    j += 1
                buf.append(text[j])
                j += 1
            out.append("".join(buf))
            i = j + 1
        elif ch == "\\" and i + 1 < len(text):
            if text[i + 1] != "\n":
                out.append(text[i + 1])
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)
