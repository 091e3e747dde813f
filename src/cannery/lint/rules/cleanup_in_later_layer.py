from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts, Instruction, expand
from cannery.lint.facts.shell import Command
from cannery.lint.model import Finding, Frozen, Severity
from cannery.lint.rule import LintContext, Rule, lazy_re
from cannery.lint.rules._shell import DOWNLOADERS, basename, downloaded_file

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any


class Cache(Frozen):
    """A package manager's cache: the tools that fill it, the paths it lives in, and the
    commands that clean it."""

    __slots__ = ("clean", "fill", "paths", "tools", "what")
    what: str
    tools: tuple[str, ...]
    fill: tuple[str, ...]  # subcommands that fill it
    paths: re.Pattern[str]
    clean: tuple[str, ...]  # subcommands (of ``tools``) that clean it

    def __init__(self, what: str, tools: tuple[str, ...], fill: tuple[str, ...],
                 paths: re.Pattern[str], clean: tuple[str, ...]) -> None:
        object.__setattr__(self, "what", what)
        object.__setattr__(self, "tools", tools)
        object.__setattr__(self, "fill", fill)
        object.__setattr__(self, "paths", paths)
        object.__setattr__(self, "clean", clean)


CACHES = (
    Cache("the apt lists and cache", ("apt-get", "apt", "apt-cache"), ("update", "install",
          "upgrade", "dist-upgrade", "build-dep"),
          lazy_re(r"^/var/lib/apt/lists|^/var/cache/apt"), ("clean", "autoclean")),
    Cache("the yum/dnf metadata and cache", ("yum", "dnf", "microdnf", "tdnf"),
          ("install", "update", "upgrade", "makecache", "groupinstall", "reinstall",
           "localinstall", "builddep", "distro-sync"),
          lazy_re(r"^/var/cache/(yum|dnf)"), ("clean",)),
    Cache("the pip cache", ("pip",), ("install", "wheel", "download"),
          lazy_re(r"^/root/\.cache/pip|^~/\.cache/pip|^\$HOME/\.cache/pip|"
                  r"^\$\{HOME\}/\.cache/pip"), ("cache",)),
)


def absolute(path: str, workdir: str) -> str:
    """A relative path as the instruction's WORKDIR makes it (a `cd` in the step is not
    followed; basenames are compared too)."""
    if path.startswith(("/", "~", "$")):
        return path.rstrip("/")
    return f"{workdir.rstrip('/')}/{path}".rstrip("/")


def _creates(c: Command, workdir: str) -> str | None:
    """The path a download or clone command creates."""
    f = downloaded_file(c) if c.name in DOWNLOADERS else None
    if f:
        return absolute(f, workdir)
    if c.name == "git" and c.subcommand() == "clone":
        pos = [w.value for w in c.operands()]
        if len(pos) >= 2:
            return absolute(pos[1], workdir)
        if pos:
            return absolute(basename(pos[0]).removesuffix(".git"), workdir)
    return None


GLOB = "*?["


class _Files:
    """Files made by earlier layers and still there: path (and basename) → line made; and
    what a COPY/ADD brought in, as path patterns (`/opt/pkgs/*.run`, `/opt/pkgs/**` for a
    directory whose members are not known)."""

    def __init__(self) -> None:
        self.made: dict[str, int] = {}
        self.copied: list[tuple[str, int]] = []

    def add(self, path: str, line: int) -> None:
        self.made.setdefault(path, line)
        self.made.setdefault(basename(path), line)

    def add_copied(self, pattern: str, line: int) -> None:
        self.copied.append((pattern, line))

    def find(self, path: str, made_here: set[str]) -> int | None:
        line = self.made.get(path) or self.made.get(basename(path))
        if line is not None:
            return line
        for pattern, at in self.copied:
            if _covers(path, pattern, made_here):
                return at
        return None

    def remove(self, path: str) -> None:
        for key in (path, basename(path)):
            self.made.pop(key, None)
        if any(ch in path for ch in GLOB):
            self.copied = [(p, at) for p, at in self.copied
                           if not (fnmatch.fnmatchcase(p, path) and not p.endswith("/**"))]


def _covers(target: str, pattern: str, made_here: set[str]) -> bool:
    """Whether removing ``target`` (a path, maybe a glob) removes something a COPY brought in
    as ``pattern``. Under a copied directory whose members lint cannot see (`DIR/**`), only a
    glob counts (`rm DIR/*.run`): a plain name there may be a file a later step made."""
    if pattern.endswith("/**"):
        folder = pattern[:-3]
        if not target.startswith(folder + "/") or not any(ch in target for ch in GLOB):
            return False
        return not any(fnmatch.fnmatchcase(m, target) for m in made_here)
    if any(ch in pattern for ch in GLOB):  # `COPY wheels/*.whl /tmp/wheels/`
        if fnmatch.fnmatchcase(target, pattern):
            return True
        # `rm /tmp/wheels/*` removes what `*.whl` brought in when some name fits both
        return posixpath.dirname(target) == posixpath.dirname(pattern) and any(
            ch in target for ch in GLOB) and _globs_meet(basename(target), basename(pattern))
    return False


def _globs_meet(a: str, b: str) -> bool:
    """Whether two file-name globs can name one file (`*` and `*.whl`; `*.run` and `*.whl`
    cannot): each one's fixed suffix and prefix must agree with the other's."""
    def fixed(g: str) -> tuple[str, str]:
        cut = [i for i, ch in enumerate(g) if ch in GLOB] or [len(g)]
        return g[: cut[0]], g[cut[-1] + 1 :]

    (pa, sa), (pb, sb) = fixed(a), fixed(b)
    return (pa.startswith(pb) or pb.startswith(pa)) and (sa.endswith(sb) or sb.endswith(sa))


class CleanupInLaterLayer(Rule):
    """## What it does
    Finds clean-up that runs in a later `RUN` than the one that made the files: `rm` of a
    file downloaded (`wget`, `curl`, `aria2c`), cloned or copied by an earlier instruction
    and still there (a file downloaded and removed inside one `RUN` is gone from that
    layer: removing it again after a new download in a later `RUN` is fine), and a package
    manager's cache cleaned in a step that did not fill it after one that did. What a
    `COPY`/`ADD` brought in counts too: the destination, the files a glob source puts there
    (`COPY pkgs/*.run /opt/`, then `rm /opt/*.run` or `rm /opt/a.run`), and for a directory
    source a glob under the destination (`COPY installers /opt/pkgs`, then
    `rm -f /opt/pkgs/*.run`); paths are expanded from ARG/ENV values. Cache clean-ups: `apt-get
    clean` or `rm -rf /var/lib/apt/lists/*` after an earlier `apt-get update`/`install`,
    `yum clean all`/`dnf clean all` or `rm -rf /var/cache/dnf` after an earlier
    `yum`/`dnf install`, `pip cache purge` after an earlier `pip install`. Only the stages
    that ship are checked (the last stage, or the configured `target`, and the stages it is
    built `FROM`): a builder stage's size does not reach the image through `COPY --from`.

    ## Why is this bad?
    Layers only add. The earlier layer keeps the files; deleting them later hides them but
    the image is just as large, and one more layer is pushed.

    ## Example
    ```dockerfile
    RUN curl -fsSLO https://example.com/big.run && bash big.run
    RUN rm -f big.run
    ```

    ## Use instead
    ```dockerfile
    RUN curl -fsSLO https://example.com/big.run && bash big.run && rm -f big.run
    ```
    """

    name = "cleanup-in-later-layer"
    code = "CD007"
    severity = Severity.WARNING
    targets = ("dockerfile",)

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        for stage in facts.shipping(ctx.target):
            files = _Files()
            filled: dict[str, int] = {}  # cache → line of the last instruction that filled it
            for inst in stage.instructions:
                yield from self._instruction(facts, inst, files, filled)

    def _instruction(self, facts: DockerfileFacts, inst: Instruction, files: _Files,
                     filled: dict[str, int]) -> Iterator[Finding]:
        if inst.keyword in ("COPY", "ADD") and len(inst.value) >= 2:
            self._copied(inst, files)
        if inst.script is None:
            return
        assert inst.stage is not None
        earlier = inst.stage.instructions

        def val(text: str) -> str:
            return expand(text, earlier, inst.index) if "$" in text else text

        here: set[str] = set()  # made by this RUN: removing them here is right
        gone: set[str] = set()  # removed by this RUN: they are not in its layer
        fills = {cache.what for c in inst.script.commands for cache in CACHES
                 if c.name in cache.tools and c.subcommand() in cache.fill}
        for c in inst.script.commands:
            made = _creates(c, inst.workdir)
            if made is not None:
                here.add(made)
                gone.discard(made)
            if c.name == "rm":
                for w in c.positional():
                    target = absolute(val(w.value), inst.workdir)
                    line = files.find(target, here)
                    if line is not None and target not in gone:
                        yield self.at(facts.path, w.pos, f"{w.value} was created by "
                                      f"the instruction at line {line}; removing it "
                                      "in a later layer does not shrink the image",
                                      hint="remove it in the step that creates it")
                    gone.add(target)
                    here.discard(target)
                    for cache in CACHES:
                        if cache.paths.match(target):
                            yield from self._late_clean(facts, w.pos, cache, fills, filled)
            for cache in CACHES:
                if c.name in cache.tools and c.subcommand() in cache.clean and (
                        cache.what != "the pip cache" or c.argv[:2] == ["cache", "purge"]):
                    yield from self._late_clean(facts, c.pos, cache, fills, filled)
        for path in gone:
            files.remove(path)
        for path in here:
            files.add(path, inst.line)
        for what in fills:
            filled[what] = inst.line

    @staticmethod
    def _copied(inst: Instruction, files: _Files) -> None:
        """What a COPY/ADD brings in: the destination itself, and per source the paths it
        puts there (`COPY a/*.run /opt/` → `/opt/*.run`; a directory → everything under the
        destination)."""
        assert inst.stage is not None
        earlier = inst.stage.instructions

        def val(text: str) -> str:
            return expand(text, earlier, inst.index) if "$" in text else text

        dest = absolute(val(inst.value[-1]), inst.workdir)
        files.add(dest, inst.line)
        sources = [val(v) for v in inst.value[:-1]]
        into = inst.value[-1].endswith("/") or len(sources) > 1
        for src in sources:
            if "://" in src:
                continue  # ADD <url>: one file, named as the destination says
            name = basename(src)
            if any(ch in name for ch in GLOB):
                files.add_copied(f"{dest}/{name}", inst.line)
            elif into:
                files.add(f"{dest}/{name}", inst.line)
                files.add_copied(f"{dest}/{name}/**", inst.line)  # if it is a directory
            else:
                files.add_copied(f"{dest}/**", inst.line)  # a directory's members, or nothing

    def _late_clean(self, facts: DockerfileFacts, pos: Any, cache: Cache, fills: set[str],
                    filled: dict[str, int]) -> Iterator[Finding]:
        """A clean-up of ``cache`` in a step that did not fill it, after one that did."""
        if cache.what in fills or cache.what not in filled:
            return
        hint = ("use pip install --no-cache-dir" if cache.what == "the pip cache"
                else "clean up in the same RUN as the install")
        yield self.at(facts.path, pos, f"clearing {cache.what} in a step that did not fill "
                      f"them: the layer of line {filled[cache.what]} keeps them", hint=hint)
