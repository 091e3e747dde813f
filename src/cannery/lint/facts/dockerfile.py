"""A Dockerfile as BuildKit parses it (the `dockerfile` package binds BuildKit's own parser),
with physical line numbers kept and per-stage SHELL, ARG and ENV tracked."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator, Sequence

from cannery.lint.facts import ParseFailure
from cannery.lint.facts.shell import (
    Command,
    Script,
    line_offsets,
    parse_script,
    resolve_names,
    unquote,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

INSTRUCTIONS = {
    "ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK", "LABEL",
    "MAINTAINER", "ONBUILD", "RUN", "SHELL", "STOPSIGNAL", "USER", "VOLUME", "WORKDIR",
}
POSIX_SHELL = ("/bin/sh", "-c")


# Plain classes, not dataclasses: see lint/facts/script.py.


class Pair:
    """One KEY=VALUE of an ENV, ARG or LABEL, with where it stands in the file."""

    __slots__ = ("column", "end", "key", "line", "raw", "start", "value")

    def __init__(self, key: str, value: str | None, raw: str, line: int, column: int,
                 start: int, end: int) -> None:
        self.key = key
        self.value = value  # quotes removed; None for `ARG NAME` with no default
        self.raw = raw  # value as written
        self.line = line
        self.column = column
        self.start = start  # file offset of the key
        self.end = end  # file offset just past the value


class Instruction:
    __slots__ = (
        "end",
        "end_line",
        "flags",
        "heredoc",
        "index",
        "json",
        "keyword",
        "line",
        "original",
        "pairs",
        "script",
        "shell",
        "stage",
        "start",
        "value",
        "workdir",
    )

    def __init__(self, index: int, keyword: str, flags: tuple[str, ...], value: tuple[str, ...],
                 original: str, line: int, end_line: int, start: int, end: int, json: bool,
                 stage: Stage | None, shell: tuple[str, ...] = POSIX_SHELL,
                 script: Script | None = None, pairs: list[Pair] | None = None,
                 heredoc: bool = False, workdir: str = "/") -> None:
        self.index = index
        self.keyword = keyword
        self.flags = flags
        self.value = value
        self.original = original
        self.line = line
        self.end_line = end_line
        self.start = start  # file offset of the first character of the instruction
        self.end = end  # file offset just past its last line (newline excluded)
        self.json = json
        self.stage = stage
        self.shell = shell
        self.script = script
        self.pairs: list[Pair] = [] if pairs is None else pairs
        self.heredoc = heredoc
        self.workdir = workdir  # effective WORKDIR when this instruction runs

    @property
    def shell_is_bash(self) -> bool:
        exe = self.shell[0].rsplit("/", 1)[-1] if self.shell else "sh"
        return exe in ("bash", "zsh", "ksh", "mksh")


class Stage:
    __slots__ = ("alias", "base", "image", "index", "instructions", "line", "parent")

    def __init__(self, index: int, base: str, alias: str | None, line: int,
                 instructions: list[Instruction] | None = None, parent: Stage | None = None,
                 image: str = "") -> None:
        self.index = index
        self.base = base
        self.alias = alias
        self.line = line
        self.instructions: list[Instruction] = [] if instructions is None else instructions
        self.parent = parent  # a FROM that names an earlier stage
        self.image = image  # ``base`` with global ARG defaults substituted

    @property
    def root(self) -> Stage:
        """The stage whose FROM names an image (not another stage)."""
        stage = self
        while stage.parent is not None:
            stage = stage.parent
        return stage


class DockerfileFacts:
    __slots__ = (
        "comments",
        "global_args",
        "instructions",
        "line_offsets",
        "lines",
        "path",
        "stages",
        "text",
    )

    def __init__(self, path: str, text: str, lines: list[str], line_offsets: list[int],
                 instructions: list[Instruction], stages: list[Stage],
                 global_args: list[Instruction], comments: dict[int, str]) -> None:
        self.path = path
        self.text = text
        self.lines = lines
        self.line_offsets = line_offsets
        self.instructions = instructions
        self.stages = stages
        self.global_args = global_args
        self.comments = comments  # line → comment text (whole-line comments only)

    def commands(self) -> Iterator[tuple[Instruction, Command]]:
        """Every simple command of every shell-form RUN, in file order."""
        for inst in self.instructions:
            if inst.script is not None:
                for cmd in inst.script.commands:
                    yield inst, cmd

    def shell_commands(self) -> Iterator[Command]:
        """The commands alone, for rules that read Dockerfiles and workflows alike."""
        return (entry[-1] for entry in self.commands())

    def shipping(self, target: str | None = None) -> list[Stage]:
        """The stages whose layers end up in the image: ``target`` (default: the last stage)
        and the stages it is built FROM. A stage reached only by `COPY --from` is not."""
        if not self.stages:
            return []
        last = self.stages[-1]
        if target:
            last = next((s for s in self.stages if (s.alias or "").lower() == target.lower()),
                        last)
        out = []
        stage: Stage | None = last
        while stage is not None:
            out.append(stage)
            stage = stage.parent
        return out

    def line_text(self, line: int) -> str:
        return self.lines[line - 1] if 0 < line <= len(self.lines) else ""

    def offset(self, line: int, column: int = 1) -> int:
        return self.line_offsets[line - 1] + column - 1


def _parse(text: str) -> tuple[object, ...]:
    import dockerfile

    return tuple(dockerfile.parse_string(text))


def _failure_line(lines: list[str]) -> int:
    """The first line from which every longer prefix of the file fails to parse."""
    if len(lines) > 2000:
        return 1
    line = len(lines)
    for n in range(len(lines), 0, -1):
        try:
            _parse("\n".join(lines[:n]) + "\n")
        except Exception:
            line = n
            continue
        break
    return line


def _pairs(inst: Instruction, facts_lines: list[str], offsets: list[int]) -> list[Pair]:
    """Locate each KEY=VALUE (or legacy `KEY value`) of ENV/ARG/LABEL in the physical text."""
    out: list[Pair] = []
    span_text = "\n".join(facts_lines[inst.line - 1 : inst.end_line])
    base = offsets[inst.line - 1]
    head = re.match(r"\s*\w+\s+", span_text)
    cursor = head.end() if head else 0
    values = list(inst.value)
    items: list[tuple[str, str | None]] = []
    if inst.keyword == "ARG":
        for v in values:
            k, eq, d = v.partition("=")
            items.append((k, d if eq else None))
    elif len(values) >= 2 and inst.keyword in ("ENV", "LABEL"):
        items = [(values[i], values[i + 1]) for i in range(0, len(values) - 1, 2)]
    for key, raw in items:
        start = _find_key(span_text, key, cursor)
        if start < 0:
            continue
        end = start + len(key)
        if raw is not None:
            rest = span_text[end:]
            gap = re.match(r"\s*=?\s*", rest)
            vstart = end + (gap.end() if gap else 0)
            vend = vstart + len(raw)
            if span_text[vstart : vstart + len(raw)] != raw:
                vend = vstart + len(raw.split("\n")[0])
            end = vend
        cursor = end
        line = inst.line + span_text.count("\n", 0, start)
        line_start = span_text.rfind("\n", 0, start) + 1
        value = None if raw is None else unquote(raw)
        out.append(Pair(key, value, raw or "", line, start - line_start + 1, base + start,
                        base + end))
    return out


def _find_key(text: str, key: str, pos: int) -> int:
    r"""Where ``key`` first stands as a whole name at or after ``pos`` (not preceded by a word
    character or `$`, followed by `=`, white space or the end), or -1. What the regular
    expression ``(?<![\w$])KEY(?=[=\s]|$)`` finds, without compiling one per key."""
    end = len(text)
    i = text.find(key, pos)
    while i >= 0:
        before = text[i - 1] if i > 0 else ""
        j = i + len(key)
        if (not before or not (before.isalnum() or before in "_$")) and (
                j == end or text[j] == "=" or text[j].isspace()):
            return i
        i = text.find(key, i + 1)
    return -1


def _script_text(inst: Instruction, lines: list[str]) -> str:
    """The RUN body as bash will see it, laid out on the instruction's physical lines."""
    phys = lines[inst.line - 1 : inst.end_line]
    first = phys[0]
    m = re.match(r"\s*RUN\s+((?:--\S+\s+)*)", first, re.I)
    cut = m.end() if m else 0
    body = [" " * cut + first[cut:]]
    for ln in phys[1:]:
        stripped = ln.strip()
        # Docker drops blank and comment lines inside a continuation; bash would not, so
        # they become bare continuations here (columns of other lines are untouched).
        body.append(" " * (len(ln) - 1) + "\\" if (not stripped or stripped.startswith("#"))
                    else ln)
    return "\n".join(body)


def shell_for_base(base: str, shells: dict[str, list[str]]) -> tuple[str, ...] | None:
    for pattern, shell in shells.items():
        if fnmatch.fnmatch(base, pattern) or fnmatch.fnmatch(base.split("@")[0], pattern):
            return tuple(shell)
    return None


def parse_dockerfile(path: str, text: str, base_shells: dict[str, list[str]]) -> DockerfileFacts:
    """Parse ``text``; raise ParseFailure(line, message) when BuildKit would reject it."""
    if "\x00" in text:
        raise ParseFailure(text[: text.index("\x00")].count("\n") + 1, "file contains NUL bytes")
    lines = text.split("\n")
    try:
        commands = _parse(text)
    except Exception as exc:
        reason = str(exc).splitlines()[0] if str(exc) else "parse error"
        raise ParseFailure(_failure_line(lines), reason) from None
    offsets = line_offsets(text)
    comments = {i + 1: ln.strip() for i, ln in enumerate(lines) if ln.strip().startswith("#")}
    facts = DockerfileFacts(path, text, lines, offsets, [], [], [], comments)
    stage: Stage | None = None
    by_alias: dict[str, Stage] = {}
    shell: tuple[str, ...] = POSIX_SHELL
    workdir = "/"
    global_defaults: dict[str, str] = {}  # ARGs before the first FROM, for FROM lines
    for i, c in enumerate(commands):
        inst = _instruction(i, c, lines, offsets, stage, shell)
        kw, value = inst.keyword, inst.value
        if kw == "FROM":
            stage, shell, workdir = _open_stage(facts, inst, by_alias, global_defaults,
                                                base_shells)
            inst.stage = stage
            inst.shell = shell
        elif kw == "SHELL":
            shell = value
            inst.shell = shell
        elif kw == "WORKDIR":
            target = value[0]
            workdir = target if target.startswith("/") else f"{workdir.rstrip('/')}/{target}"
        inst.workdir = workdir
        if kw in ("ENV", "ARG", "LABEL"):
            inst.pairs = _pairs(inst, lines, offsets)
        if kw == "RUN" and not inst.json:
            inst.script = _run_script(inst, getattr(c, "heredocs", ()), lines, offsets)
        facts.instructions.append(inst)
        if stage is None:
            if kw == "ARG":
                facts.global_args.append(inst)
                global_defaults.update((p.key, p.value) for p in inst.pairs
                                       if p.value is not None)
        else:
            stage.instructions.append(inst)
    return facts


def _instruction(i: int, c: object, lines: list[str], offsets: list[int], stage: Stage | None,
                 shell: tuple[str, ...]) -> Instruction:
    """The parser's command ``c`` (the ``i``-th) as an Instruction of ``stage`` run by
    ``shell``; ParseFailure for an unknown instruction or one that lacks its argument."""
    kw = str(getattr(c, "cmd", "")).upper()
    line = int(getattr(c, "start_line", 1))
    end_line = int(getattr(c, "end_line", line))
    if kw not in INSTRUCTIONS:
        raise ParseFailure(line, f"unknown instruction: {getattr(c, 'cmd', '')}")
    value = tuple(getattr(c, "value", ()) or ())
    if kw in ("FROM", "COPY", "ADD", "ENV", "LABEL", "WORKDIR", "USER") and not value:
        raise ParseFailure(line, f"{kw} requires at least one argument")
    end_col = len(lines[end_line - 1]) if end_line - 1 < len(lines) else 0
    return Instruction(
        i, kw, tuple(getattr(c, "flags", ()) or ()), value, str(getattr(c, "original", "")),
        line, end_line, offsets[line - 1], offsets[end_line - 1] + end_col,
        bool(getattr(c, "json", False)), stage, shell,
        heredoc=bool(getattr(c, "heredocs", ())),
    )


def _open_stage(facts: DockerfileFacts, inst: Instruction, by_alias: dict[str, Stage],
                global_defaults: dict[str, str], base_shells: dict[str, list[str]],
                ) -> tuple[Stage, tuple[str, ...], str]:
    """The stage a FROM starts, added to ``facts`` (and to ``by_alias`` under its alias), with
    the SHELL and WORKDIR it starts with: an earlier stage's it names, else its base's."""
    value = inst.value
    base = value[0]
    image = _substitute(base, global_defaults)
    alias = value[2] if len(value) >= 3 and value[1].upper() == "AS" else None
    parent = by_alias.get(image.lower())
    stage = Stage(len(facts.stages), base, alias, inst.line, parent=parent, image=image)
    if alias:
        by_alias[alias.lower()] = stage
    facts.stages.append(stage)
    if parent is not None and parent.instructions:
        return stage, parent.instructions[-1].shell, parent.instructions[-1].workdir
    return stage, shell_for_base(image, base_shells) or POSIX_SHELL, "/"


def _run_script(inst: Instruction, heredocs: Sequence[Any], lines: list[str],
                offsets: list[int]) -> Script:
    """A RUN's script (its heredoc, when it runs one), with each command named by a variable
    named again from the ARG/ENV values of its stage before it."""
    line, value = inst.line, inst.value
    if heredocs and value and str(value[0]).lstrip().startswith("<<"):
        content = heredocs[0].content
        script = parse_script(content, line + 1, offsets[line : line + content.count("\n") + 1])
    else:
        script = parse_script(_script_text(inst, lines), line, offsets[line - 1 : inst.end_line])
    stage = inst.stage
    if stage is not None and any("$" in cmd.name for cmd in script.commands):
        def outer(text: str, insts: list[Instruction] = stage.instructions,
                  before: int = inst.index) -> str:
            return expand(text, insts, before)

        resolve_names(script, outer)
    return script


def _substitute(text: str, values: dict[str, str]) -> str:
    """``$X``/``${X}``/``${X:-d}`` replaced from ``values`` (BuildKit's FROM expansion)."""
    if "$" not in text:
        return text

    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(4)
        got = values.get(name)
        if got:
            return got
        if m.group(2) == ":-" or (m.group(2) == "-" and got is None):
            return m.group(3) or ""
        return m.group(0) if got is None else got

    return re.sub(r"\$\{([A-Za-z_]\w*)(?:(:?-)([^}]*))?\}|\$([A-Za-z_]\w*)", sub, text)


def arg_default(stage_insts: list[Instruction], name: str, before: int) -> str | None:
    """The value ARG/ENV give ``name`` before instruction ``before`` in this stage."""
    value = None
    for inst in stage_insts:
        if inst.index >= before:
            break
        for p in inst.pairs:
            if p.key == name and inst.keyword in ("ARG", "ENV") and p.value is not None:
                value = p.value
    return value


def expand(text: str, stage_insts: list[Instruction], before: int) -> str:
    """Substitute ``$X``/``${X}`` with the ARG/ENV values known at ``before``."""

    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        got = arg_default(stage_insts, name, before)
        return got if got is not None else m.group(0)

    return re.sub(r"\$\{([A-Za-z_]\w*)\}|\$([A-Za-z_]\w*)", sub, text)
