"""Shell scripts (RUN bodies, workflow `run:` steps) through tree-sitter-bash.

The script text keeps its physical layout (continuation backslashes included, which bash reads
the same way), so every node's row/column maps straight back to the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

# Global options that take a separate value, per tool (so `git -C dir clone` is a clone).
GLOBAL_OPTS = {"git": ("-C", "-c", "--git-dir", "--work-tree", "--namespace"),
               "pip": ("--log", "--proxy", "--cache-dir")}


@lru_cache(maxsize=1)
def _parser() -> Any:
    import tree_sitter_bash
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_bash.language()))


@dataclass(repr=False, eq=False)
class Pos:
    line: int  # 1-based, in the file
    column: int  # 1-based, in characters
    end_line: int
    end_column: int


@dataclass(repr=False, eq=False)
class Word:
    text: str  # as written
    value: str  # quotes removed (expansions left as written)
    pos: Pos
    start: int  # character offset in the file
    end: int


@dataclass(repr=False, eq=False)
class Command:
    """A simple command, normalised: ``python3 -m pip install`` has name ``pip``."""

    name: str
    args: list[Word]
    prefix_env: dict[str, Word]
    pos: Pos
    start: int
    end: int
    node: Any = field(repr=False)
    index: int = 0
    in_substitution: bool = False
    pipeline: list[Command] | None = field(default=None, repr=False)
    pipe_index: int = 0
    redirects: list[tuple[str, Word]] = field(default_factory=list)  # (operator, target)
    raw_name: str = ""

    @property
    def argv(self) -> list[str]:
        return [w.value for w in self.args]

    def has_flag(self, *flags: str) -> bool:
        for w in self.args:
            v = w.value
            for f in flags:
                if v == f or (f.startswith("--") and v.startswith(f + "=")):
                    return True
                # combined short flags: -fsSLk contains -k
                if len(f) == 2 and f[0] == "-" and re.fullmatch(r"-[A-Za-z]+", v) and f[1] in v:
                    return True
        return False

    def flag_value(self, *flags: str) -> Word | None:
        for i, w in enumerate(self.args):
            for f in flags:
                if w.value == f and i + 1 < len(self.args):
                    return self.args[i + 1]
                if f.startswith("--") and w.value.startswith(f + "="):
                    return Word(w.text, w.value[len(f) + 1 :], w.pos, w.start, w.end)
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


@dataclass(repr=False, eq=False)
class Assignment:
    name: str
    value: Word | None
    pos: Pos
    start: int
    end: int
    exported: bool
    node: Any = field(repr=False)
    index: int = 0


@dataclass(repr=False, eq=False)
class Branching:
    """An if/elif chain or a case statement, for arch-dispatch checks."""

    kind: str  # if | case
    subject: str  # the tested text
    has_default: bool
    pos: Pos
    labels: list[str]


@dataclass(repr=False, eq=False)
class Script:
    text: str
    commands: list[Command]
    assignments: list[Assignment]
    branches: list[Branching]
    expansions: list[tuple[str, Pos]]  # variables read: $X, ${X}, ${X:-…}
    has_error: bool
    root: Any = field(repr=False, default=None)


class _Mapper:
    """Maps tree-sitter byte positions in the script to file lines, columns and offsets."""

    def __init__(self, text: str, first_line: int, line_offsets: list[int], col_shift: list[int]):
        self.lines = text.split("\n")
        self.raw = [ln.encode() for ln in self.lines]
        self.first_line = first_line
        self.line_offsets = line_offsets  # file char offset of each script line's start
        self.col_shift = col_shift  # characters of indentation stripped per script line

    def col(self, row: int, byte_col: int) -> int:
        if row >= len(self.raw):
            return 1
        return len(self.raw[row][:byte_col].decode(errors="replace")) + 1 + self.col_shift[row]

    def offset(self, row: int, byte_col: int) -> int:
        if row >= len(self.line_offsets):
            return self.line_offsets[-1] if self.line_offsets else 0
        return self.line_offsets[row] + self.col(row, byte_col) - 1

    def pos(self, node: Any) -> Pos:
        (r0, c0), (r1, c1) = node.start_point, node.end_point
        return Pos(self.first_line + r0, self.col(r0, c0), self.first_line + r1, self.col(r1, c1))

    def word(self, node: Any) -> Word:
        text = node.text.decode(errors="replace")
        return Word(text, unquote(text), self.pos(node),
                    self.offset(*node.start_point), self.offset(*node.end_point))


def unquote(text: str) -> str:
    """Remove shell quoting for matching purposes (not a full shell evaluation)."""
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


WRAPPERS = {"sudo", "env", "time", "nice", "nohup", "exec", "command", "xargs", "stdbuf"}


def _normalise(name: str, args: list[Word], env: dict[str, Word]) -> tuple[str, list[Word]]:
    base = name.rsplit("/", 1)[-1]
    while base in WRAPPERS and args:
        # env FOO=1 cmd, sudo -E cmd
        rest = list(args)
        while rest and (rest[0].value.startswith("-") or (base == "env" and "=" in rest[0].value)):
            if base == "env" and "=" in rest[0].value and not rest[0].value.startswith("-"):
                k, _, _v = rest[0].value.partition("=")
                env[k] = rest[0]
            rest.pop(0)
        if not rest:
            break
        base, args = rest[0].value.rsplit("/", 1)[-1], rest[1:]
    if re.fullmatch(r"python[0-9.]*", base) and len(args) >= 2 and args[0].value == "-m":
        base, args = args[1].value, args[2:]
    if re.fullmatch(r"pip[0-9.]*", base):
        base = "pip"
    if base in ("uv",) and args and args[0].value == "pip":
        base, args = "pip", args[1:]
    return base, args


def parse_script(text: str, first_line: int = 1, starts: list[int] | None = None,
                 col_shift: list[int] | None = None) -> Script:
    """Parse ``text``; positions are reported from ``first_line`` with the given offsets."""
    nlines = text.count("\n") + 1
    offsets = starts or line_offsets(text)
    shift = col_shift or [0] * nlines
    m = _Mapper(text, first_line, offsets, shift)
    tree = _parser().parse(text.encode())
    root = tree.root_node
    script = Script(text, [], [], [], [], root.has_error, root)
    counter = [0]

    def walk(node: Any, in_subst: bool) -> None:
        t = node.type
        if t == "pipeline":
            cmds: list[Command] = []
            for child in node.named_children:
                before = len(script.commands)
                walk(child, in_subst)
                new = script.commands[before:]
                if new:
                    cmds.append(new[0])
            for i, c in enumerate(cmds):
                c.pipeline, c.pipe_index = cmds, i
            return
        if t == "redirected_statement":
            before = len(script.commands)
            body = node.child_by_field_name("body")
            if body is not None:
                walk(body, in_subst)
            redirects = []
            for child in node.named_children:
                if child.type in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                    op = next((c.type for c in child.children if not c.is_named), "")
                    dest = child.child_by_field_name("destination")
                    if dest is not None:
                        redirects.append((op, m.word(dest)))
                    for sub in child.named_children:
                        if sub is not dest:
                            walk(sub, in_subst)
            if len(script.commands) > before:
                script.commands[before].redirects.extend(redirects)
            return
        if t == "command":
            _command(node, in_subst)
            return
        if t == "declaration_command":
            keyword = node.children[0].type if node.children else ""
            for child in node.named_children:
                if child.type == "variable_assignment":
                    _assignment(child, exported=keyword in ("export", "declare", "typeset"))
                elif child.type == "variable_name":
                    script.assignments.append(Assignment(
                        child.text.decode(), None, m.pos(child), m.offset(*child.start_point),
                        m.offset(*child.end_point), keyword == "export", child, counter[0]))
                    counter[0] += 1
                else:
                    walk(child, in_subst)
            return
        if t == "variable_assignment":
            _assignment(node, exported=False)
            return
        if t in ("if_statement", "case_statement"):
            _branch(node)
        if t in ("simple_expansion", "expansion"):
            name = next((c.text.decode() for c in node.named_children
                         if c.type in ("variable_name", "special_variable_name")), None)
            if name:
                script.expansions.append((name, m.pos(node)))
        for child in node.children:
            walk(child, in_subst or t in ("command_substitution", "process_substitution"))

    def _assignment(node: Any, exported: bool) -> None:
        name_node = node.child_by_field_name("name")
        value_node = node.child_by_field_name("value")
        name = name_node.text.decode() if name_node is not None else ""
        script.assignments.append(Assignment(
            name, m.word(value_node) if value_node is not None else None, m.pos(node),
            m.offset(*node.start_point), m.offset(*node.end_point), exported, node, counter[0]))
        counter[0] += 1
        if value_node is not None:
            walk(value_node, False)

    def _command(node: Any, in_subst: bool) -> None:
        env: dict[str, Word] = {}
        name_node = node.child_by_field_name("name")
        args: list[Word] = []
        for child in node.named_children:
            if child.type == "variable_assignment":
                n = child.child_by_field_name("name")
                v = child.child_by_field_name("value")
                if n is not None:
                    env[n.text.decode()] = m.word(v) if v is not None else m.word(child)
                walk(child, in_subst)
            elif child.type in ("command_name", "file_redirect", "herestring_redirect"):
                pass
            else:
                args.append(m.word(child))
        for child in node.named_children:
            if child.type not in ("variable_assignment", "command_name"):
                walk(child, in_subst)
        if name_node is None:
            return
        raw = unquote(name_node.text.decode(errors="replace"))
        name, args = _normalise(raw, args, env)
        cmd = Command(name, args, env, m.pos(node), m.offset(*node.start_point),
                      m.offset(*node.end_point), node, counter[0], in_subst, raw_name=raw)
        counter[0] += 1
        script.commands.append(cmd)
        for child in node.named_children:
            if child.type in ("file_redirect", "herestring_redirect"):
                dest = child.child_by_field_name("destination")
                op = next((c.type for c in child.children if not c.is_named), "")
                if dest is not None:
                    cmd.redirects.append((op, m.word(dest)))

    def _branch(node: Any) -> None:
        if node.type == "case_statement":
            value = node.child_by_field_name("value")
            labels: list[str] = []
            default = False
            for item in node.named_children:
                if item.type != "case_item":
                    continue
                for v in item.children_by_field_name("value"):
                    text = unquote(v.text.decode())
                    labels.append(text)
                    if text in ("*", "*)"):
                        default = True
            script.branches.append(Branching(
                "case", value.text.decode() if value is not None else "", default, m.pos(node),
                labels))
            return
        subject = _condition(node)
        labels = []
        default = False
        for child in node.named_children:
            if child.type == "elif_clause":
                subject += " " + _condition(child)
            elif child.type == "else_clause":
                default = True
        labels = re.findall(r"[\"']?(x86_64|aarch64|amd64|arm64|ppc64le|s390x)[\"']?", subject)
        script.branches.append(Branching("if", subject, default, m.pos(node), labels))

    walk(root, False)
    script.commands.sort(key=lambda c: c.start)
    for i, c in enumerate(script.commands):
        c.index = i
    # assignments are ordered relative to commands by file offset
    for a in script.assignments:
        a.index = sum(1 for c in script.commands if c.start < a.start)
    return script


def _condition(node: Any) -> str:
    """The text between `if`/`elif` and `then` (field names differ across grammar versions)."""
    parts = []
    for child in node.children[1:]:
        if child.type == "then":
            break
        parts.append(child.text.decode(errors="replace"))
    return " ".join(parts)


def line_offsets(text: str) -> list[int]:
    """Character offset of the start of each line of ``text``."""
    out = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            out.append(i + 1)
    return out
