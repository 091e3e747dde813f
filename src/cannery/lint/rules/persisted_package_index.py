from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts, Instruction
from cannery.lint.facts.shell import Command
from cannery.lint.model import Finding, Frozen, Severity
from cannery.lint.rule import LintContext, Rule, lazy_re
from cannery.lint.rules._config_files import index, settings, tool_of
from cannery.lint.rules._shell import host_of

INDEX_ENV = {"PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "UV_INDEX_URL",
             "UV_EXTRA_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX", "NPM_CONFIG_REGISTRY",
             "CONDA_CHANNELS", "GOPROXY"}
URL = lazy_re(r"(?<![a-z])[a-z]{1,15}://[^\s'\"]+")  # bounded scheme: linear on long words
HOSTISH = lazy_re(r"://|\w\.\w")  # a sed expression that rewrites a host
CONFIG_FILES = lazy_re(
    r"(pip\.conf|pip\.ini|\.npmrc|\.condarc|sources\.list|\.pypirc|\.repo|yum\.conf|dnf\.conf)$"
)
# The file `pip config set` writes, by scope option (default: the user's file)
PIP_SCOPE_FILES = {"--global": lazy_re(r"^/etc/(xdg/pip/)?pip\.conf$"),
                   "--user": lazy_re(r"^/root/\.config/pip/pip\.conf$"),
                   "--site": lazy_re(r"pip\.conf$")}


def _path(text: str) -> str:
    return re.sub(r"^(~|\$HOME|\$\{HOME\})/", "/root/", text)


class _Undo(Frozen):
    """A later step that takes a setting back out of the image: a file removed or replaced,
    a `pip config unset KEY`, an `npm config delete KEY`."""

    __slots__ = ("file", "key", "where")
    where: tuple[int, int]  # (line, column), to order it after the setting
    file: str
    key: str

    def __init__(self, where: tuple[int, int], file: str = "", key: str = "") -> None:
        object.__setattr__(self, "where", where)
        object.__setattr__(self, "file", file)
        object.__setattr__(self, "key", key)


def _undos(facts: DockerfileFacts) -> dict[int, list[_Undo]]:
    """Per stage (by index), the steps that undo a package-index setting."""
    out: dict[int, list[_Undo]] = {}
    for inst in facts.instructions:
        if inst.script is None or inst.stage is None:
            continue
        events = out.setdefault(inst.stage.index, [])
        for cmd in inst.script.commands:
            where = (cmd.pos.line, cmd.pos.column)
            paths = [w.value for w in cmd.args if not w.value.startswith("-")]
            if cmd.name == "rm":
                events += [_Undo(where, file=_path(p)) for p in paths]
            elif cmd.name in ("mv", "cp", "install") and len(paths) >= 2:
                events.append(_Undo(where, file=_path(paths[-1])))
            elif cmd.name == "pip" and cmd.subcommand() == "config" and "unset" in cmd.argv:
                key = cmd.argv[cmd.argv.index("unset") + 1:][:1]
                events += [_Undo(where, key=_key(k)) for k in key]
            elif cmd.name in ("npm", "yarn") and "config" in cmd.argv and any(
                    a in ("delete", "rm", "unset") for a in cmd.argv):
                events += [_Undo(where, key=f"npm:{a}") for a in cmd.argv[2:]]
            # `> FILE` replaces the file (a new index written there is reported on its own)
            events += [_Undo(where, file=_path(w.value)) for op, w in cmd.redirects
                       if op in (">", ">|")]
    return out


def _sed_edits(cmd: Command) -> list[str]:
    """The package source files ``sed`` writes: those it edits in place (`-i`), and the one its
    output is redirected over where apt or dnf reads it. sed that only reads a source file into
    a copy elsewhere (a build-only mirror list in /tmp, handed to apt or dnf for one command)
    changes nothing in the image."""
    edited = [a for a in cmd.argv if CONFIG_FILES.search(a)] if cmd.has_flag(
        "-i", "--in-place") else []
    edited += [w.value for op, w in cmd.redirects
               if op in (">", ">>", ">|") and tool_of(w.value) in ("apt", "yum")]
    return edited


def _key(text: str) -> str:
    return text.lower().replace("_", "-")


def _pip_files(argv: list[str]) -> list[re.Pattern[str]]:
    scope = next((a for a in argv if a in PIP_SCOPE_FILES), "--user")
    return [PIP_SCOPE_FILES[scope]]


class PersistedPackageIndex(Rule):
    """## What it does
    Finds build-time package index or mirror configuration saved into the image: `ENV
    PIP_INDEX_URL`/`PIP_EXTRA_INDEX_URL`, `pip config set …index-url`, `npm config set
    registry`, index settings written into `pip.conf`, `.npmrc` or `.condarc` (by `echo`,
    `printf`, `tee`, a heredoc or `COPY <<EOF`), and `sed` edits that put a host into a
    package source file (`sources.list`, a yum/dnf `.repo` file, `yum.conf`, `dnf.conf`) in
    place (`-i`) or by redirecting over it; `sed` that reads one into a copy elsewhere (a
    build-only mirror list handed to apt or dnf, removed in the same step) is not reported.
    Hosts in `trusted-registries` are allowed. A setting that a later
    step of the same stage takes back out is not reported: `pip config unset` of the same
    key, `npm config delete registry`, or the file removed (`rm`) or replaced (`> FILE`,
    `cp`/`mv` onto it) after it was written.

    ## Why is this bad?
    A mirror that was fast from the build farm is slow, unreachable or untrusted where the
    image runs; an extra index (for x86_64 CPU torch wheels) silently changes what every
    later `pip install` in the container resolves.

    ## Example
    ```dockerfile
    RUN pip config set global.extra-index-url https://download.pytorch.org/whl/cpu/
    ```

    ## Use instead
    ```dockerfile
    RUN pip install --extra-index-url https://download.pytorch.org/whl/cpu/ torch==2.9.0
    ```
    """

    name = "persisted-package-index"
    code = "CD019"
    severity = Severity.WARNING
    targets = ("dockerfile",)

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        def trusted(text: str) -> bool:
            hosts = {host_of(u) for u in URL.findall(text)}
            return bool(hosts) and all(h in ctx.trusted_registries for h in hosts)

        undos = _undos(facts)

        def undone(inst: Instruction, line: int, column: int, files: list[re.Pattern[str]],
                   key: str = "") -> bool:
            """Whether a later step of ``inst``'s stage takes the setting back out."""
            events = undos.get(inst.stage.index, []) if inst.stage is not None else []
            return any(u.where > (line, column) and (
                (key and u.key == key) or (u.file and any(f.search(u.file) for f in files)))
                for u in events)

        for inst in facts.instructions:
            if inst.keyword == "ENV":
                for pr in inst.pairs:
                    if pr.key in INDEX_ENV and not trusted(pr.value or ""):
                        yield self.finding(facts.path, pr.line, pr.column,
                                           f"ENV {pr.key} keeps a build-time package index in "
                                           "the image for every later install and user",
                                           end_column=pr.column + len(pr.key),
                                           hint="pass it per command (--extra-index-url) or as "
                                           "a RUN-local variable")
            if inst.script is None:
                continue
            for cmd in inst.script.commands:
                argv = cmd.argv
                text = " ".join(argv)
                if cmd.name == "pip" and cmd.subcommand() == "config" and "set" in argv and (
                        "index" in text or "find-links" in text) and not trusted(text) and (
                        not undone(inst, cmd.pos.line, cmd.pos.column, _pip_files(argv),
                                   _key((argv[argv.index("set") + 1:] or [""])[0]))):
                    yield self.at(facts.path, cmd.pos, "pip config set saves a package index "
                                  "into the image's pip.conf", hint="pass --extra-index-url to "
                                  "the pip install that needs it")
                elif cmd.name in ("npm", "yarn") and "config" in argv and "registry" in text \
                        and not trusted(text) and "set" in argv and not undone(
                            inst, cmd.pos.line, cmd.pos.column,
                            [re.compile(r"^/root/\.npmrc$")], "npm:registry"):
                    yield self.at(facts.path, cmd.pos, "npm registry config is saved into the "
                                  "image", hint="use --registry on the command")
                elif cmd.name == "sed" and (edited := _sed_edits(cmd)) and any(
                        HOSTISH.search(a) for a in argv if not CONFIG_FILES.search(a)) and (
                        not undone(inst, cmd.pos.line, cmd.pos.column,
                                   [re.compile(re.escape(_path(a)) + "$") for a in edited])):
                    yield self.at(facts.path, cmd.pos, "mirror rewritten in a package source "
                                  "file that stays in the image",
                                  hint="use a build-only mount or restore it in the same RUN")
        by_line = {i.line: i for i in facts.instructions}
        for st in settings(facts):
            owner = next((by_line[n] for n in range(st.line, 0, -1) if n in by_line), None)
            if owner is not None and undone(owner, st.line, st.column,
                                            [re.compile(re.escape(_path(st.file)) + "$")]):
                continue
            if index(st) and not trusted(st.text):
                yield self.finding(facts.path, st.line, st.column,
                                   f"package index written to {st.file}, which stays in "
                                   "the image", hint="use a build secret or mount for it")
