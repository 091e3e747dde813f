from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from cannery.lint.facts.dockerfile import DockerfileFacts, Instruction
from cannery.lint.facts.shell import Command
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule, lazy_re

# tools that read their settings from environment variables with these prefixes
ENV_CONFIG = lazy_re(r"^(PIP|UV|NPM_CONFIG|YARN|CONDA|MAMBA|CARGO|GIT|HF|HUGGINGFACE|"
                     r"TORCH|CUDA|NVCC|CMAKE|CC|CXX|LD|CFLAGS|CXXFLAGS|LDFLAGS|PYTHON)(_|$)")
INTERPRETERS = ("bash", "sh", "zsh", "dash", "python", "python3", "perl", "source", ".")
# What well-known tools read from their environment, when a later RUN runs them.
_C_BUILD = r"CC|CXX|CPP|FC|AR|LD|CFLAGS|CXXFLAGS|CPPFLAGS|FFLAGS|LDFLAGS|LDLIBS|MAKEFLAGS"
_PY_BUILD = (rf"{_C_BUILD}|MAX_JOBS|CMAKE_\w+|NVCC_\w+|TORCH_\w+|SETUPTOOLS_\w+|PIP_\w+|"
             r"NINJA_\w+|BUILD_\w+|USE_\w+|_PYTHON_\w+")
TOOL_ENV: dict[str, re.Pattern[str]] = {name: lazy_re(rf"^({pattern})$") for names, pattern in (
    (("go",), r"GO\w+|CGO_\w+"),
    (("cargo", "rustc", "rustup"), r"CARGO_\w+|RUST\w*"),
    (("pip", "python", "python3", "setup.py"), _PY_BUILD),
    (("make", "gmake", "configure"), _C_BUILD),
    (("cmake", "ninja"), rf"{_C_BUILD}|CMAKE_\w+|NINJA_\w+"),
    (("npm", "npx", "yarn", "pnpm", "node"), r"NPM_CONFIG_\w+|npm_config_\w+|YARN_\w+|NODE_\w+"),
    (("apt-get", "apt", "dpkg"), r"DEBIAN_FRONTEND|APT_\w+|DEBCONF_\w+"),
    (("uv",), r"UV_\w+"),
    (("conda", "mamba", "micromamba"), r"CONDA_\w+|MAMBA_\w+"),
    (("git",), r"GIT_\w+"),
) for name in names}
# Programs whose use of the environment is open (a source build, a build system, a script):
# an ARG named like a build setting may be read by them, and lint cannot tell, so it is quiet.
OPEN_PROGRAMS = {"make", "gmake", "cmake", "ninja", "meson", "bazel", "go", "cargo", "npm",
                 "yarn", "pnpm", "configure", "setup.py", "scons", "mvn", "gradle"}
SETTING_LIKE = lazy_re(r"(FLAGS|_ARGS|_OPTS|_OPTIONS|_JOBS|_LEVEL|_THREADS|_DEVICE|_TARGET\w*|"
                       r"_MODE|_BACKEND|_ARCH\w*)$|^(USE|ENABLE|DISABLE|WITH|WITHOUT|BUILD|"
                       r"NO|SKIP)_")


# `$NAME` or `${NAME…`: the names a text refers to, found in one pass
REF = lazy_re(r"\$\{?(\w+)")
WORD = lazy_re(r"\w+")  # a name of word characters; the words of a script


def _refs(text: str, name: str) -> bool:
    """Whether ``text`` refers to ``name`` as `$NAME`, `${NAME}` or `${NAME:…}`. For a name of
    word characters (every real ARG), ``name in REF.findall(text)`` says the same in one pass
    over the text for all names at once; this is the slow path for any other name."""
    return re.search(rf"\$(\{{{re.escape(name)}(\b|[:}}])|{re.escape(name)}\b)", text) is not None


def _tool(cmd: Command) -> str:
    """The program ``cmd`` runs, by its base name (`./configure` is configure)."""
    return cmd.name.rsplit("/", 1)[-1]


def _reads_env(cmd: Command, name: str) -> bool:
    """Whether ``cmd`` is known to read ``name`` from its environment, or may: an open
    program (a build) and a name that looks like a build setting."""
    from cannery.lint.rules._shell import builds_from_source

    tool = _tool(cmd)
    pattern = TOOL_ENV.get(tool)
    if pattern is not None and pattern.match(name):
        return True
    if any(a.endswith("setup.py") for a in cmd.argv[:1]) and TOOL_ENV["setup.py"].match(name):
        return True
    open_ = tool in OPEN_PROGRAMS or builds_from_source(cmd) or _script_run(cmd) is not None
    return open_ and SETTING_LIKE.search(name) is not None


def _script_run(cmd: Command) -> str | None:
    """The script file ``cmd`` runs (`bash x.sh`, `./x.sh`, `python3 tools/build.py`)."""
    if "/" in cmd.raw_name or cmd.raw_name.endswith(".sh"):
        return cmd.raw_name
    if cmd.name in INTERPRETERS:
        for w in cmd.args:
            if w.value in ("-c", "-m"):
                return None
            if not w.value.startswith("-"):
                return w.value
    return None


def _absolute(path: str, workdir: str) -> str:
    import posixpath

    return posixpath.normpath(path if path.startswith("/") else f"{workdir}/{path}")


def _context_file(path: str, copies: list[Instruction]) -> str | None:
    """The build-context path that the latest COPY covering image path ``path`` copied."""
    import posixpath

    for inst in reversed(copies):
        *srcs, dest = inst.value
        dest = _absolute(dest, inst.workdir)
        for src in srcs:
            src = src.rstrip("/")
            if dest == path and len(srcs) == 1:
                return src
            if path.startswith(dest.rstrip("/") + "/"):
                rest = path[len(dest.rstrip("/")) + 1 :]
                if rest == posixpath.basename(src):  # a file copied into the directory
                    return src
                return rest if src in (".", "") else f"{src}/{rest}"  # a directory copied
    return None


def _read_context(rel: str, ctx: LintContext) -> str | None:
    """A build-context file, looked up from the Dockerfile's directory up to the repository
    root (the context directory itself is not known to lint); None when it cannot be read
    (lint reads only what LintContext.read allows) or lies outside any build context."""
    import os

    from cannery.lint.files import within

    if rel.startswith("/") or ".." in rel.split("/"):
        return None  # outside any build context
    here = Path(ctx.root).resolve()
    top = os.path.realpath(ctx.boundary)
    for d in [here, *here.parents]:
        if not within(str(d), top):
            break
        f = d / rel
        try:
            if os.path.lexists(f):
                return ctx.read(str(f))  # None: there, but lint may not read it
        except (OSError, ValueError):
            return None
        if (d / ".git").exists():
            break
    return None


class _Later:
    """What the instructions after a point of a stage use, gathered walking the stage
    backwards so that each instruction is read once: the names they refer to, the tools
    their RUNs run, and the words of the scripts they execute. Every question an ARG asks
    is then a set lookup, and the rule is linear in the file's length (it was quadratic:
    each ARG rescanned every later instruction, 70 s for 8,000 ARGs)."""

    __slots__ = ("open_program", "refs", "script_texts", "script_unknown", "script_words",
                 "setup_py", "texts", "tools")

    def __init__(self) -> None:
        self.refs: set[str] = set()  # names referred to as $NAME / ${NAME…}
        self.texts: list[str] = []  # the instructions' texts, for a name that is not a word
        self.tools: set[str] = set()  # TOOL_ENV keys of the programs RUNs run
        self.setup_py = False  # a RUN runs setup.py
        self.open_program = False  # a RUN runs a build whose use of the environment is open
        self.script_unknown = False  # a RUN runs a context script lint cannot read
        self.script_words: set[str] = set()  # the words of the scripts it can
        self.script_texts: list[str] = []

    def add(self, inst: Instruction, text: str, scripts: list[str | None]) -> None:
        from cannery.lint.rules._shell import builds_from_source

        self.texts.append(text)
        if "$" in text:
            self.refs.update(REF.findall(text))
        if inst.script is not None:
            for cmd in inst.script.commands:
                tool = _tool(cmd)
                if tool in TOOL_ENV:
                    self.tools.add(tool)
                if any(a.endswith("setup.py") for a in cmd.argv[:1]):
                    self.setup_py = True
                if not self.open_program and (tool in OPEN_PROGRAMS or builds_from_source(cmd)
                                              or _script_run(cmd) is not None):
                    self.open_program = True
        for script in scripts:
            if script is None:
                self.script_unknown = True
            else:
                self.script_words.update(WORD.findall(script))
                self.script_texts.append(script)

    def uses(self, name: str) -> bool:
        word = WORD.fullmatch(name) is not None
        if (name in self.refs) if word else any(_refs(t, name) for t in self.texts):
            return True
        if any(TOOL_ENV[t].match(name) for t in self.tools) or (
                self.setup_py and TOOL_ENV["setup.py"].match(name)) or (
                self.open_program and SETTING_LIKE.search(name)):
            return True  # a tool a later RUN runs reads it (or may) from the environment
        if self.script_unknown:
            return True  # a script lint cannot read may read it
        if word:
            return name in self.script_words
        return any(re.search(rf"\b{re.escape(name)}\b", t) for t in self.script_texts)


class UnusedArg(Rule):
    """## What it does
    Finds an `ARG` that no later instruction of its stage (or, before the first `FROM`, no
    `FROM` line or stage) refers to as `$NAME`, and that is not in the list of arguments
    consumed implicitly: an `ARG` is an environment variable in later `RUN`s, so builds that
    read it by name (vllm-ascend's `SOC_VERSION`, `MAX_JOBS`, proxies, BuildKit's
    `TARGETARCH`…) use it without `$`, and so do tools configured through prefixed
    variables (`PIP_*`, `UV_*`, `CMAKE_*`, `TORCH_*`, `CUDA_*`, `HF_*`, …). A later `RUN`
    that runs a tool which reads the variable uses it too: `go` (`GOFLAGS`, `CGO_*`), pip
    and Python source builds (`MAX_JOBS`, `CMAKE_ARGS`, `CFLAGS`, …), make and cmake
    (`CC`, `CFLAGS`, `MAKEFLAGS`…), cargo, npm/yarn, apt (`DEBIAN_FRONTEND`), uv, conda and
    git. When a later `RUN` runs a build whose use of the environment is open (make, cmake,
    a source `pip install`, a script) and the name looks like a build setting (`*FLAGS`,
    `*_ARGS`, `*_OPTS`, `*_JOBS`, `USE_*`, `ENABLE_*`, `BUILD_*`, …), lint cannot tell, and
    says nothing. Configure more with `implicit-args`. For the same
    reason a script from the build context that a later `RUN` executes (`COPY build.sh …`
    then `RUN bash build.sh`) uses every ARG it names; when that script cannot be read, ARGs
    declared before that `RUN` are not reported.

    ## Why is this bad?
    An argument nobody reads suggests a build setting that is silently ignored: the caller
    passes `--build-arg` and nothing changes.

    ## Example
    ```dockerfile
    ARG CANN_VERSION=8.5.2
    RUN bash Ascend-cann-toolkit_8.5.1_linux-x86_64.run --install
    ```

    ## Use instead
    ```dockerfile
    ARG CANN_VERSION=8.5.2
    RUN bash Ascend-cann-toolkit_${CANN_VERSION}_linux-x86_64.run --install
    ```
    """

    name = "unused-arg"
    code = "CD017"
    severity = Severity.WARNING
    targets = ("dockerfile",)

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        # a global ARG is used by a FROM line that refers to it, or by a stage that declares it
        bases = [s_.base for s_ in facts.stages]
        base_refs = {name for b in bases if "$" in b for name in REF.findall(b)}
        redeclared = {q.key for s_ in facts.stages for i in s_.instructions
                      if i.keyword == "ARG" for q in i.pairs}
        for inst in facts.global_args:
            for pr in inst.pairs:
                if pr.key in ctx.implicit_args or pr.key in redeclared:
                    continue
                if (pr.key in base_refs) if WORD.fullmatch(pr.key) else any(
                        _refs(b, pr.key) for b in bases):
                    continue
                yield self._report(facts.path, pr, "no FROM or stage uses it")
        for stage in facts.stages:
            scripts: dict[int, list[str | None]] = {}
            for index, text in self._scripts(stage.instructions, ctx):
                scripts.setdefault(index, []).append(text)
            later = _Later()
            found: list[Finding] = []
            for inst in reversed(stage.instructions):
                if inst.keyword == "ARG":
                    for pr in reversed(inst.pairs):
                        if pr.key in ctx.implicit_args or ENV_CONFIG.match(pr.key):
                            continue  # read from the environment by a tool a later RUN runs
                        if not later.uses(pr.key):
                            found.append(self._report(facts.path, pr, "no later instruction "
                                                      "of its stage uses it"))
                text = inst.original + "\n" + "\n".join(facts.lines[inst.line - 1 : inst.end_line])
                later.add(inst, text, scripts.get(inst.index, []))
            yield from reversed(found)

    @staticmethod
    def _scripts(insts: list[Instruction], ctx: LintContext) -> list[tuple[int, str | None]]:
        """(instruction index, text or None if unreadable) of each script a RUN executes."""
        out: list[tuple[int, str | None]] = []
        copies: list[Instruction] = []
        for inst in insts:
            if inst.keyword in ("COPY", "ADD") and len(inst.value) >= 2 and not any(
                    f.startswith("--from") for f in inst.flags) and not inst.heredoc:
                copies.append(inst)
            if inst.script is None:
                continue
            for cmd in inst.script.commands:
                run = _script_run(cmd)
                if run is None or "$" in run:
                    continue
                rel = _context_file(_absolute(run, inst.workdir), copies)
                if rel is not None:  # not from the context (downloaded, in the base): skip
                    out.append((inst.index, _read_context(rel, ctx)))
        return out

    def _report(self, path: str, pr, why: str) -> Finding:  # type: ignore[no-untyped-def]
        return self.finding(path, pr.line, pr.column, f"ARG {pr.key} is never used: {why}",
                            end_column=pr.column + len(pr.key),
                            hint="use it, remove it, or list it in implicit-args if a build "
                            "reads it from the environment")
