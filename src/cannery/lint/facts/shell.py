"""Shell scripts (RUN bodies, workflow `run:` steps) through tree-sitter-bash.

The script text keeps its physical layout (continuation backslashes included, which bash reads
the same way), so every node's row/column maps straight back to the file.

The facts it yields are in script.py; how a command is named (wrappers, ``python -m pip``, a
name held in a variable) in command_names.py. Both are importable from here.
"""

from __future__ import annotations

import bisect
import re
from functools import lru_cache

from cannery.lint.facts.command_names import _normalise, resolve_names, with_assigned
from cannery.lint.facts.script import (
    Assignment,
    Branching,
    Command,
    Pos,
    Script,
    Word,
    unquote,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "Assignment",
    "Branching",
    "Command",
    "Pos",
    "Script",
    "Word",
    "line_offsets",
    "mask_expressions",
    "parse_script",
    "resolve_names",
    "unquote",
    "with_assigned",
]


def _binding(package: str) -> Any:
    """``package._binding``, the compiled module, loaded without running ``package``'s
    ``__init__``: tree-sitter's imports ``typing`` to declare a Protocol, and
    tree-sitter-bash's imports importlib.resources (for query files lint never reads) and with
    it tempfile, shutil, random and lzma, a large part of a one-file lint's start-up."""
    import importlib.machinery
    import os
    import sys

    name = f"{package}._binding"
    if name in sys.modules:
        return sys.modules[name]
    try:
        spec = importlib.machinery.PathFinder.find_spec(package)  # does not run the package
        folders = list(spec.submodule_search_locations or []) if spec else []
        path = next(os.path.join(d, f) for d in folders for f in sorted(os.listdir(d))
                    if f.startswith("_binding.")
                    and f.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)))
        loader = importlib.machinery.ExtensionFileLoader(name, path)
        module = loader.create_module(importlib.machinery.ModuleSpec(name, loader, origin=path))
        loader.exec_module(module)
    except Exception:  # another layout: the package's own way
        import importlib

        return importlib.import_module(name)
    sys.modules[name] = module  # a later `import package` uses this one, not a second copy
    return module


@lru_cache(maxsize=1)
def _parser() -> Any:
    ts = _binding("tree_sitter")
    return ts.Parser(ts.Language(_binding("tree_sitter_bash").language()))


class _Mapper:
    """Maps tree-sitter byte positions in the script to file lines, columns and offsets."""

    def __init__(self, text: str, first_line: int, line_offsets: list[int], col_shift: list[int],
                 original: str | None = None):
        self.lines = text.split("\n")
        self.raw = [ln.encode() for ln in self.lines]
        # lines in ASCII, where a byte column is a character column (most of them)
        self.ascii = [len(b) == len(ln) for b, ln in zip(self.raw, self.lines, strict=True)]
        # text as written when ``text`` has masked parts (same character positions)
        self.original: list[str] | None = (
            None if original is None or original == text else original.split("\n"))
        self.first_line = first_line
        self.line_offsets = line_offsets  # file char offset of each script line's start
        self.col_shift = col_shift  # characters of indentation stripped per script line

    def _chars(self, row: int, byte_col: int) -> int:
        """How many characters the first ``byte_col`` bytes of script line ``row`` hold."""
        raw = self.raw[row]
        if self.ascii[row]:
            return min(byte_col, len(raw))
        return len(raw[:byte_col].decode(errors="replace"))

    def col(self, row: int, byte_col: int) -> int:
        if row >= len(self.raw):
            return 1
        return self._chars(row, byte_col) + 1 + self.col_shift[row]

    def _offset_at(self, row: int, col: int) -> int:
        """The file offset of ``col`` (as ``col`` returns it) on script line ``row``."""
        if row >= len(self.line_offsets):
            return self.line_offsets[-1] if self.line_offsets else 0
        return self.line_offsets[row] + col - 1

    def offset(self, row: int, byte_col: int) -> int:
        return self._offset_at(row, self.col(row, byte_col))

    def pos(self, node: Any) -> Pos:
        (r0, c0), (r1, c1) = node.start_point, node.end_point
        return Pos(self.first_line + r0, self.col(r0, c0), self.first_line + r1, self.col(r1, c1))

    def text(self, node: Any) -> str:
        if self.original is None:
            return str(node.text.decode(errors="replace"))
        (r0, c0), (r1, c1) = node.start_point, node.end_point
        a = self._chars(r0, c0)
        b = self._chars(r1, c1)
        if r0 == r1:
            return str(self.original[r0][a:b])
        return "\n".join([self.original[r0][a:], *self.original[r0 + 1 : r1],
                          self.original[r1][:b]])

    def word(self, node: Any) -> Word:
        # pos() and offset() in one: the columns are computed once (a lint makes thousands)
        text = self.text(node)
        (r0, c0), (r1, c1) = node.start_point, node.end_point
        k0, k1 = self.col(r0, c0), self.col(r1, c1)
        return Word(text, unquote(text),
                    Pos(self.first_line + r0, k0, self.first_line + r1, k1),
                    self._offset_at(r0, k0), self._offset_at(r1, k1))


def mask_expressions(text: str) -> str:
    """Blank out GitHub ``${{ … }}`` expressions so bash sees one plain word in their place.

    The replacement has the same length, so positions do not move; word texts are read back
    from the original. One pass: once an opening has no closing, no later one has either.
    """
    if "${{" not in text:
        return text
    out = []
    pos = 0
    j = -1  # the next "}}" (kept across openings, so the text is scanned once)
    while True:
        i = text.find("${{", pos)
        if i < 0:
            break
        if j < i + 3:
            j = text.find("}}", i + 3)
        if j < 0:
            break
        nl = text.find("\n", i, j)
        if nl >= 0:  # expressions do not span lines here; look again after this line
            out.append(text[pos : nl + 1])
            pos = nl + 1
            continue
        out.append(text[pos:i])
        out.append("_" * (j + 2 - i))
        pos = j + 2
    out.append(text[pos:])
    return "".join(out)


class _Builder:
    """Walks one tree-sitter tree and collects the script's commands, assignments and branches."""

    def __init__(self, m: _Mapper, script: Script) -> None:
        self.m = m
        self.script = script
        self.depth = 0  # nesting of $( … ) / <( … ) around the node being walked

    def walk(self, node: Any) -> None:
        t = node.type
        if t == "pipeline":
            self._pipeline(node)
        elif t == "redirected_statement":
            self._redirected(node)
        elif t == "command":
            self._command(node)
        elif t == "declaration_command":
            self._declaration(node)
        elif t == "variable_assignment":
            self._assignment(node, exported=False)
        else:
            if t in ("if_statement", "case_statement"):
                self._branch(node)
            elif t in ("simple_expansion", "expansion"):
                name = next((c.text.decode() for c in node.named_children
                             if c.type in ("variable_name", "special_variable_name")), None)
                if name:
                    self.script.expansions.append((name, self.m.pos(node)))
            nested = t in ("command_substitution", "process_substitution")
            self.depth += nested
            # anonymous children are tokens (`&&`, `then`, quotes): leaves nothing here reads
            for child in node.named_children:
                self.walk(child)
            self.depth -= nested

    def _top_new(self, before: int) -> list[Command]:
        """Commands added since ``before`` at this substitution depth (not inside a $( … ))."""
        return [c for c in self.script.commands[before:] if c.depth == self.depth]

    def _pipeline(self, node: Any) -> None:
        cmds: list[Command] = []
        for child in node.named_children:
            before = len(self.script.commands)
            self.walk(child)
            new = self._top_new(before)
            if new:
                cmds.append(max(new, key=lambda c: c.start))
        for i, c in enumerate(cmds):
            c.pipeline, c.pipe_index = cmds, i

    def _redirected(self, node: Any) -> None:
        before = len(self.script.commands)
        body = node.child_by_field_name("body")
        if body is not None:
            self.walk(body)
        # `a && b > f` parses as one statement redirected; bash gives the file to `b`, the
        # last simple command before the operator (never one inside a `$( … )`)
        new = self._top_new(before)
        owner = max(new, key=lambda c: c.start) if new else None
        for child in node.named_children:
            if child.type in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                self._redirect(child, owner)

    def _redirect(self, node: Any, owner: Command | None) -> None:
        op = next((c.type for c in node.children if not c.is_named), "")
        dest = node.child_by_field_name("destination")
        if owner is not None:
            if dest is not None:
                owner.redirects.append((op, self.m.word(dest)))
            if node.type == "herestring_redirect" and node.named_children:
                owner.stdin = self.m.word(node.named_children[-1])
        for sub in node.named_children:
            if sub is dest:
                continue
            if sub.type == "heredoc_body" and owner is not None:
                owner.stdin = self.m.word(sub)
            elif sub.type == "file_redirect":  # `cat <<EOF > file`: nested in the heredoc
                self._redirect(sub, owner)
            else:
                self.walk(sub)

    def _declaration(self, node: Any) -> None:
        keyword = node.children[0].type if node.children else ""
        for child in node.named_children:
            if child.type == "variable_assignment":
                self._assignment(child, exported=keyword in ("export", "declare", "typeset"))
            elif child.type == "variable_name":
                self.script.assignments.append(Assignment(
                    child.text.decode(), None, self.m.pos(child),
                    self.m.offset(*child.start_point), self.m.offset(*child.end_point),
                    keyword == "export", child))
            else:
                self.walk(child)

    def _assignment(self, node: Any, exported: bool) -> None:
        name_node = node.child_by_field_name("name")
        value_node = node.child_by_field_name("value")
        name = name_node.text.decode() if name_node is not None else ""
        self.script.assignments.append(Assignment(
            name, self.m.word(value_node) if value_node is not None else None,
            self.m.pos(node), self.m.offset(*node.start_point), self.m.offset(*node.end_point),
            exported, node))
        if value_node is not None:
            self.walk(value_node)

    def _command(self, node: Any) -> None:
        m = self.m
        env: dict[str, Word] = {}
        name_node = node.child_by_field_name("name")
        args: list[Word] = []
        for child in node.named_children:
            if child.type == "variable_assignment":
                n = child.child_by_field_name("name")
                v = child.child_by_field_name("value")
                if n is not None:
                    env[n.text.decode()] = m.word(v) if v is not None else m.word(child)
            elif child.type not in ("command_name", "file_redirect", "herestring_redirect"):
                args.append(m.word(child))
        for child in node.named_children:
            if child.type != "command_name":
                self.walk(child)
        if name_node is None:
            return
        raw = m.word(name_node).value
        name, args = _normalise(raw, args, env)
        cmd = Command(name, args, env, m.pos(node), m.offset(*node.start_point),
                      m.offset(*node.end_point), node, 0, self.depth > 0, raw_name=raw,
                      depth=self.depth)
        self.script.commands.append(cmd)
        for child in node.named_children:
            if child.type in ("file_redirect", "herestring_redirect"):
                dest = child.child_by_field_name("destination")
                op = next((c.type for c in child.children if not c.is_named), "")
                if dest is not None:
                    cmd.redirects.append((op, m.word(dest)))
                elif child.type == "herestring_redirect" and child.named_children:
                    cmd.stdin = m.word(child.named_children[-1])

    def _branch(self, node: Any) -> None:
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
            self.script.branches.append(Branching(
                "case", value.text.decode() if value is not None else "", default,
                self.m.pos(node), labels))
            return
        subject = _condition(node)
        default = False
        for child in node.named_children:
            if child.type == "elif_clause":
                subject += " " + _condition(child)
            elif child.type == "else_clause":
                default = True
        labels = re.findall(r"[\"']?(x86_64|aarch64|amd64|arm64|ppc64le|s390x)[\"']?", subject)
        self.script.branches.append(Branching("if", subject, default, self.m.pos(node), labels))


def parse_script(text: str, first_line: int = 1, starts: list[int] | None = None,
                 col_shift: list[int] | None = None) -> Script:
    """Parse ``text``; positions are reported from ``first_line`` with the given offsets."""
    nlines = text.count("\n") + 1
    offsets = starts or line_offsets(text)
    shift = col_shift or [0] * nlines
    masked = mask_expressions(text)
    m = _Mapper(masked, first_line, offsets, shift, original=text)
    tree = _parser().parse(masked.encode())
    root = tree.root_node
    script = Script(text, [], [], [], [], root.has_error, root)
    _Builder(m, script).walk(root)
    script.commands.sort(key=lambda c: c.start)
    for i, c in enumerate(script.commands):
        c.index = i
    # assignments are ordered relative to commands by file offset
    starts_sorted = [c.start for c in script.commands]
    for a in script.assignments:
        a.index = bisect.bisect_left(starts_sorted, a.start)
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
    i = text.find("\n")
    while i >= 0:
        out.append(i + 1)
        i = text.find("\n", i + 1)
    return out
