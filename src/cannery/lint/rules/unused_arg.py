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


def _refs(text: str, name: str) -> bool:
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
        for inst in facts.global_args:
            for pr in inst.pairs:
                if pr.key in ctx.implicit_args:
                    continue
                used = any(_refs(s_.base, pr.key) for s_ in facts.stages) or any(
                    i.keyword == "ARG" and any(q.key == pr.key for q in i.pairs)
                    for s_ in facts.stages for i in s_.instructions)
                if not used:
                    yield self._report(facts.path, pr, "no FROM or stage uses it")
        for stage in facts.stages:
            scripts = self._scripts(stage.instructions, ctx)
            for inst in stage.instructions:
                if inst.keyword != "ARG":
                    continue
                later = [i for i in stage.instructions if i.index > inst.index]
                for pr in inst.pairs:
                    if pr.key in ctx.implicit_args or ENV_CONFIG.match(pr.key):
                        continue  # read from the environment by a tool a later RUN runs
                    if any(_refs(i.original + "\n" + "\n".join(
                            facts.lines[i.line - 1 : i.end_line]), pr.key) for i in later):
                        continue
                    if any(i.script is not None and any(_reads_env(c, pr.key)
                                                        for c in i.script.commands)
                           for i in later):
                        continue  # a tool a later RUN runs reads it (or may) from the env
                    if any(index > inst.index and (text is None or re.search(
                            rf"\b{re.escape(pr.key)}\b", text)) for index, text in scripts):
                        continue  # read (or maybe read) by a script a later RUN runs
                    yield self._report(facts.path, pr, "no later instruction of its stage "
                                       "uses it")

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
