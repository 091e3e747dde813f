"""One final image of a Dockerfile as `compare` sees it, for one target architecture.

Built on lint's parsed facts: the stages the final stage is built FROM (root first), the ENV
that results (expanded), and every simple command of their RUNs with variables expanded the
way the build would for that architecture: Dockerfile ARG/ENV values, the script's own
assignments, `set --` before `"$@"`, the words of a `for` loop, the branch of a `case` on the
architecture, and `$(uname -m)`-style probes. What cannot be known (a value from the base
image, a file's contents) stays as written, in one spelling: ``${NAME}``.
"""

from __future__ import annotations

import posixpath
import re

from cannery.lint.facts.dockerfile import DockerfileFacts, Instruction, Stage
from cannery.lint.facts.shell import Command, Word

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

ARCHES = ("amd64", "arm64")
# What each architecture is called by the probes and case labels a Dockerfile uses.
ARCH_NAMES = {"amd64": ("amd64", "x86_64", "x64", "x86-64"),
              "arm64": ("arm64", "aarch64", "arm64v8", "armv8")}
UNAME = {"amd64": "x86_64", "arm64": "aarch64"}
# Commands whose output is the architecture, as written inside $( … ) or backquotes.
_PROBES = {"uname -m": "uname", "uname -p": "uname", "arch": "uname",
           "dpkg --print-architecture": "deb", "rpm --eval %{_arch}": "uname"}


class Cmd:
    """A simple command of a RUN with its words expanded for the architecture."""

    __slots__ = ("cmd", "cwd", "env", "inst", "name", "text")

    def __init__(self, cmd: Command, inst: Instruction, cwd: str, text: str,
                 env: dict[str, str] | None = None) -> None:
        self.cmd = cmd  # args hold expanded values (lint's helpers read them unchanged)
        self.inst = inst
        self.cwd = cwd  # the directory it runs in (WORKDIR, then `cd`)
        self.name = cmd.name
        self.text = text  # the command as written, on one line
        # the environment it runs with: ENV, the script's exports, its own prefix assignments
        self.env: dict[str, str] = {} if env is None else env

    @property
    def argv(self) -> list[str]:
        return self.cmd.argv

    @property
    def line(self) -> int:
        return self.cmd.pos.line


class ImageView:
    """The final stage of ``facts`` built for ``arch``."""

    def __init__(self, label: str, facts: DockerfileFacts, arch: str) -> None:
        self.label = label  # how output names the file
        self.facts = facts
        self.arch = arch
        self.chain = _chain(facts, arch)
        self.base = _base(self.chain, facts, arch)
        self.instructions = [i for s in self.chain for i in s.instructions]
        self.env: dict[str, str] = {}  # ENV of the image, expanded, in the order last set
        self.commands: list[Cmd] = []
        self._walk()

    # ---------------------------------------------------------------- the walk
    def _walk(self) -> None:
        known: dict[str, str] = {"TARGETARCH": self.arch, "TARGETOS": "linux",
                                 "TARGETPLATFORM": f"linux/{self.arch}",
                                 "BUILDARCH": self.arch}
        global_args = {p.key: p.value for i in self.facts.global_args for p in i.pairs
                       if p.value is not None}
        for stage in self.chain:
            args: dict[str, str] = {}
            for inst in stage.instructions:
                if inst.keyword == "ARG":
                    for p in inst.pairs:
                        if p.key in known and p.key.startswith(("TARGET", "BUILD")):
                            args[p.key] = known[p.key]
                        elif p.value is not None:
                            args[p.key] = expand(p.value, {**known, **args, **self.env})
                        elif p.key in global_args:
                            args[p.key] = global_args[p.key]
                elif inst.keyword == "ENV":
                    for p in inst.pairs:
                        value = expand(p.value or "", {**known, **args, **self.env})
                        self.env.pop(p.key, None)  # a later ENV moves it to its new place
                        self.env[p.key] = value
                elif inst.keyword == "RUN" and inst.script is not None:
                    self._run(inst, {**known, **args, **self.env})

    def _run(self, inst: Instruction, values: dict[str, str]) -> None:
        script = inst.script
        assert script is not None
        values = dict(values)
        exported = set(self.env)  # what a command's environment holds, beside its prefix
        positional: list[str] = []
        cwd = inst.workdir
        events: list[tuple[int, int, Any]] = []
        for a in script.assignments:
            events.append((a.node.start_byte, 0, a))
        for node in _loops(script.root):
            events.append((node.start_byte, 1, node))
        for c in script.commands:
            events.append((c.node.start_byte, 2, c))
        events.sort(key=lambda e: (e[0], e[1]))
        for _, kind, item in events:
            node = item if kind == 1 else item.node
            if not self._selected(node, values):
                continue
            if kind == 0:
                values[item.name] = self._value(item, values)
                if item.exported:
                    exported.add(item.name)
            elif kind == 1:
                var = item.child_by_field_name("variable")
                words = [_expand_word(v.text.decode(errors="replace"), values, self.arch)
                         for v in item.children_by_field_name("value")]
                if var is not None:
                    values[var.text.decode()] = " ".join(words)
            else:
                cmd: Command = item
                if cmd.depth:
                    continue
                if cmd.name == "set" and cmd.argv[:1] == ["--"]:
                    positional = [_expand_word(w.text, values, self.arch) for w in cmd.args[1:]]
                    continue
                env = {k: values[k] for k in exported if k in values}
                for name, word in cmd.prefix_env.items():
                    env[name] = _expand_word(word.text, values, self.arch)
                args = self._args(cmd, values, positional)
                resolved = Command(cmd.name, args, cmd.prefix_env, cmd.pos, cmd.start, cmd.end,
                                   cmd.node, cmd.index, cmd.in_substitution, None, 0,
                                   [(op, Word(w.text, _expand_word(w.text, values, self.arch),
                                              w.pos, w.start, w.end))
                                    for op, w in cmd.redirects],
                                   cmd.raw_name, cmd.depth, cmd.stdin)
                if cmd.pipeline is not None:
                    resolved.pipe_index = cmd.pipe_index
                    resolved.pipeline = cmd.pipeline
                if cmd.name == "cd":
                    target = next((a.value for a in args if not a.value.startswith("-")), "/root")
                    cwd = join(cwd, target)
                text = " ".join(cmd.node.text.decode(errors="replace")
                                .replace("\\\n", " ").split())
                for op, dest in cmd.redirects:  # `a && b > f`: the file is outside b's node
                    if dest.text not in text:
                        text += f" {op} {dest.text}"
                self.commands.append(Cmd(resolved, inst, cwd, text, env))

    def _args(self, cmd: Command, values: dict[str, str], positional: list[str]) -> list[Word]:
        out: list[Word] = []
        for w in cmd.args:
            if w.text in ('"$@"', "$@", '"${@}"', "${@}"):
                out.extend(Word(w.text, p, w.pos, w.start, w.end) for p in positional)
                continue
            value = _expand_word(w.text, values, self.arch)
            if not w.text.startswith(('"', "'")) and w.text != value and re.search(r"\s", value):
                out.extend(Word(w.text, part, w.pos, w.start, w.end) for part in _fields(value))
            else:
                out.append(Word(w.text, value, w.pos, w.start, w.end))
        return out

    def _value(self, assignment: Any, values: dict[str, str]) -> str:
        """An assignment's value; `$(for x in WORDS; …)` stands for the loop's words."""
        if assignment.value is None:
            return ""
        node = assignment.node
        loops = list(_loops(node))
        if loops:
            return " ".join(_expand_word(v.text.decode(errors="replace"), values, self.arch)
                            for v in loops[0].children_by_field_name("value"))
        return _expand_word(assignment.value.text, values, self.arch)

    def _selected(self, node: Any, values: dict[str, str]) -> bool:
        """False inside a branch (of a `case`, or an `if` that compares strings) that this
        architecture does not take."""
        parent = node.parent
        child = node
        while parent is not None:
            if child.type == "case_item" and parent.type == "case_statement":
                chosen = _chosen_item(parent, self.arch)
                if chosen is not None and chosen.id != child.id:
                    return False
            branch = _if_branch(parent, child)
            if branch is not None:
                taken = self._if_choice(branch[0], values)
                if taken is not None and taken != branch[1]:
                    return False
            child, parent = parent, parent.parent
        return True

    def _if_choice(self, node: Any, values: dict[str, str]) -> int | None:
        """Which branch of an if_statement runs: 0 the first, 1… an elif, -1 the else; None
        when a condition cannot be decided here."""
        clauses = [node] + [c for c in node.named_children if c.type == "elif_clause"]
        for i, clause in enumerate(clauses):
            then = _then(clause)
            text = " ".join(c.text.decode(errors="replace") for c in clause.named_children
                            if then is None or c.end_byte <= then.start_byte)
            verdict = _test(text, values, self.arch)
            if verdict is None:
                return None
            if verdict:
                return i
        return -1


def _then(clause: Any) -> Any | None:
    return next((c for c in clause.children if c.type == "then"), None)


def _if_branch(parent: Any, child: Any) -> tuple[Any, int] | None:
    """(the if_statement, the branch ``child`` is in) when ``child`` is in a branch's body."""
    if parent.type == "if_statement":
        then = _then(parent)
        if child.type in ("elif_clause", "else_clause") or then is None or (
                child.start_byte < then.start_byte):
            return None
        return parent, 0
    if parent.type == "elif_clause" and parent.parent is not None:
        then = _then(parent)
        if then is None or child.start_byte < then.start_byte:
            return None
        elifs = [c for c in parent.parent.named_children if c.type == "elif_clause"]
        return parent.parent, 1 + next(i for i, c in enumerate(elifs) if c.id == parent.id)
    if parent.type == "else_clause" and parent.parent is not None:
        return parent.parent, -1
    return None


def _test(text: str, values: dict[str, str], arch: str) -> bool | None:
    """A `[ A = B ]` / `[[ A == B ]]` / `!=` test of two words, or `[ -n A ]` / `[ -z A ]`,
    when the words expand to text (an ARG is taken at its default)."""
    import fnmatch

    word = r"(\"[^\"]*\"|'[^']*'|[^\s\"']+)"
    text = _probes(text, arch)
    unary = re.fullmatch(r"\s*(\[\[?|test)\s+(-[nz])\s+" + word + r"\s*(\]\]?)?\s*;?\s*", text)
    if unary:  # [ -n "$X" ] / [ -z "$X" ] on an ARG default
        value = _expand_word(unary.group(3), values, arch)
        if "$" in value:
            return None
        return bool(value) if unary.group(2) == "-n" else not value
    m = re.fullmatch(r"\s*(\[\[?|test)\s+" + word + r"\s*(==|=|!=)\s*" + word
                     + r"\s*(\]\]?)?\s*;?\s*", text)
    if not m:
        return None
    left, right = (_expand_word(w, values, arch) for w in (m.group(2), m.group(4)))
    if "$" in left + right:
        return None
    same = fnmatch.fnmatchcase(left, right) if m.group(1) == "[[" else left == right
    return same if m.group(3) != "!=" else not same


def _fields(value: str) -> list[str]:
    """``value`` split into words at whitespace, as an unquoted expansion is; a ``$(…)`` it
    holds (a loop word whose output only the build knows) stays one word."""
    out: list[str] = []
    word, depth, i = "", 0, 0
    while i < len(value):
        c = value[i]
        if value.startswith("$(", i):
            depth += 1
            word += "$("
            i += 2
            continue
        if depth and c == ")":
            depth -= 1
        elif not depth and c.isspace():
            if word:
                out.append(word)
            word = ""
            i += 1
            continue
        word += c
        i += 1
    return [*out, word] if word else out


def _loops(node: Any) -> list[Any]:
    out = []
    stack = [node] if node is not None else []
    while stack:
        n = stack.pop()
        if n.type == "for_statement":
            out.append(n)
        stack.extend(reversed(n.named_children))
    out.sort(key=lambda n: n.start_byte)
    return out


def _chosen_item(case: Any, arch: str) -> Any | None:
    """The case_item the architecture takes, or None when the case is not on it."""
    value = case.child_by_field_name("value")
    subject = value.text.decode(errors="replace") if value is not None else ""
    if not re.search(r"ARCH|PLATFORM|uname|arch|dpkg", subject):
        return None
    default = None
    for item in case.named_children:
        if item.type != "case_item":
            continue
        for label in item.children_by_field_name("value"):
            text = label.text.decode(errors="replace").strip("\"'")
            if text == "*":
                default = item
            elif any(re.fullmatch(text.replace("*", ".*").replace("?", "."), name)
                     for name in ARCH_NAMES[arch] + (f"linux/{arch}",)):
                return item
    return default


def _chain(facts: DockerfileFacts, arch: str) -> list[Stage]:
    """The final stage and the stages it is built FROM, root first (`FROM arch-${TARGETARCH}`
    follows the stage that architecture names)."""
    if not facts.stages:
        return []
    by_alias = {(s.alias or "").lower(): s for s in facts.stages if s.alias}
    values = {"TARGETARCH": arch, "TARGETPLATFORM": f"linux/{arch}", "TARGETOS": "linux"}
    out: list[Stage] = []
    stage: Stage | None = facts.stages[-1]
    while stage is not None and stage not in out:
        out.append(stage)
        name = expand(stage.image, values).lower()
        parent = by_alias.get(name)
        stage = parent if parent is not None and parent.index < stage.index else None
    return list(reversed(out))


def _base(chain: list[Stage], facts: DockerfileFacts, arch: str) -> str:
    if not chain:
        return ""
    values = {p.key: p.value for i in facts.global_args for p in i.pairs if p.value is not None}
    values.update(TARGETARCH=arch, TARGETPLATFORM=f"linux/{arch}", TARGETOS="linux")
    return expand(chain[0].image, values)


def join(cwd: str, path: str) -> str:
    if path.startswith("/"):
        return posixpath.normpath(path)
    if path.startswith("~"):
        return posixpath.normpath("/root" + path[1:])
    return posixpath.normpath(posixpath.join(cwd or "/", path))


# ---------------------------------------------------------------- expansion
def _probe(inner: str, arch: str) -> str | None:
    kind = _PROBES.get(" ".join(inner.split()))
    if kind == "uname":
        return UNAME[arch]
    if kind == "deb":
        return arch
    return None


def _expand_word(text: str, values: dict[str, str], arch: str) -> str:
    """A shell word's value: quotes removed, probes and known variables substituted."""
    from cannery.lint.facts.shell import unquote

    return _basenames(expand(unquote(_probes(text, arch)), values))


def _basenames(text: str) -> str:
    """``$(basename WORD)`` replaced by WORD's last path part, once WORD is known (a URL or a
    path without ``$`` left in it): a wheel saved under its own name stays recognisable."""
    return re.sub(r"\$\(\s*basename\s+[\"']?([^$()\s\"']+)[\"']?\s*\)",
                  lambda m: posixpath.basename(m.group(1)), text)


def _probes(text: str, arch: str) -> str:
    """``$(uname -m)`` and the like replaced by what they print on ``arch``."""

    def probe(m: re.Match[str]) -> str:
        got = _probe(m.group(1) or m.group(2) or "", arch)
        return got if got is not None else m.group(0)

    return re.sub(r"\$\(\s*([^()]*?)\s*\)|`\s*([^`]*?)\s*`", probe, text)


def expand(text: str, values: dict[str, str]) -> str:
    """``$X``, ``${X}``, ``${X:-d}``, ``${X:+v}`` (nested) substituted from ``values``. A name
    with no value is taken to be set by the base image: it stays, spelled ``${X}``, and
    ``${X:+v}`` gives ``v``, so ``/a${PATH:+:${PATH}}`` and ``/a:$PATH`` read the same."""
    if "$" not in text:
        return text
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch != "$" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "{":
            depth, j = 1, i + 2
            while j < n and depth:
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                j += 1
            body = text[i + 2 : j - 1]
            out.append(_brace(body, values))
            i = j
            continue
        m = re.match(r"[A-Za-z_]\w*", text[i + 1 :])
        if m:
            name = m.group(0)
            out.append(values[name] if name in values else "${" + name + "}")
            i += 1 + len(name)
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _brace(body: str, values: dict[str, str]) -> str:
    m = re.match(r"([A-Za-z_]\w*)(?:(:?[-+=?])(.*))?$", body, re.S)
    if not m:
        return "${" + body + "}"
    name, op, word = m.group(1), m.group(2), m.group(3) or ""
    known = name in values
    value = values.get(name, "")
    if op is None:
        return value if known else "${" + name + "}"
    colon = op.startswith(":")
    set_ = known and (bool(value) or not colon)
    if op.endswith("+"):
        if not known:  # the base's value: taken to be set
            return expand(word, values)
        return expand(word, values) if set_ else ""
    if op.endswith(("-", "=")):
        if not known:
            return "${" + name + "}"
        return value if set_ else expand(word, values)
    return value if known else "${" + name + "}"
