from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts, Instruction, arg_default
from cannery.lint.facts.shell import Command, Word, unquote
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule, lazy_re
from cannery.lint.rules._shell import pip_packages

TORCH = {"torch", "torch_npu", "torchvision", "torchaudio"}
# a torch wheel given by file or URL: torch-2.9.0+cpu-cp311-….whl, torch_npu-2.9.0.post1-….whl
WHEEL = lazy_re(r"(?:^|/)(torch|torch_npu|torchvision|torchaudio)-([0-9][^-/]*)-[^/]*\.whl$",
                re.I)
REPLACING = ("-U", "--upgrade", "--force-reinstall", "--ignore-installed", "-I")


def repins(cmd: Command) -> list[tuple[str, str, Word]]:
    """(package, how, word) of each torch-family package ``cmd`` installs over the one
    present: an exact or compatible pin (`==`, `===`, `~=`, spaces or quotes as written), any
    requirement with `-U`/`--force-reinstall`/`-I`, or a torch wheel by file or URL."""
    if cmd.name != "pip" or cmd.subcommand() != "install":
        return []
    replacing = cmd.has_flag(*REPLACING)
    out = [(n, spec.replace(" ", "") or " (upgraded)", w) for n, spec, w in pip_packages(cmd)
           if n in TORCH and (spec.lstrip().startswith(("==", "~=")) or replacing)]
    for w in cmd.args:
        m = WHEEL.search(unquote(w.value).split("?", 1)[0].replace("%2B", "+"))
        if m:
            out.append((m.group(1).lower(), f"=={m.group(2)} (wheel)", w))
    return out


def compiles_against_torch(cmd: Command) -> bool:
    """A build that links against the torch installed now: pip without build isolation (the
    installed torch is the build's torch), `setup.py` builds, cmake pointed at torch. An
    isolated `pip install -e .` builds against its own torch; a pure-Python package builds
    nothing."""
    if cmd.name == "pip" and cmd.subcommand() in ("install", "wheel"):
        return "--no-build-isolation" in cmd.argv
    if cmd.name in ("python", "python3") and any(a.endswith("setup.py") for a in cmd.argv):
        return any(a in ("build", "build_ext", "install", "develop", "bdist_wheel")
                   for a in cmd.argv)
    if cmd.name == "cmake":
        return any("torch" in a.lower() for a in cmd.argv)
    return False


def compile_off(cmd: Command, inst: Instruction, ctx: LintContext) -> str | None:
    """The NAME=VALUE in effect for ``cmd`` that turns native compilation off, if any."""
    assert inst.stage is not None and inst.script is not None
    for item in ctx.no_compile_env:
        name, _, value = item.partition("=")
        if name in cmd.prefix_env and cmd.prefix_env[name].value == value:
            return item
        local = [a for a in inst.script.assignments if a.name == name and a.start < cmd.start]
        if local:
            if local[-1].exported and local[-1].value is not None and (
                    local[-1].value.value == value):
                return item
            continue
        if arg_default(inst.stage.instructions, name, inst.index) == value:
            return item
    return None


class TorchRepinnedAfterBuild(Rule):
    """## What it does
    Finds a re-install of torch (or torch_npu, torchvision, torchaudio) after an earlier
    command of the same stage (a later one in the same `RUN`, or a later `RUN`) compiled
    against the installed torch. A re-install is `pip install torch==…` however it is
    written (`~=`, quoted, `uv pip`, `python -m pip`, with or without `--force-reinstall`),
    any torch requirement with `-U`/`--upgrade`/`--force-reinstall`/`-I`, or a torch wheel
    by file or URL (`torch_npu-2.9.0.post1-….whl`). A compiling step is: a pip build with
    `--no-build-isolation`, a `setup.py` build, cmake pointed at torch. A build whose
    environment turns native compilation off (`VLLM_TARGET_DEVICE=empty`; config
    `no-compile-env`) and an isolated `pip install -e .` do not count.

    ## Why is this bad?
    Extensions compiled earlier (vllm-ascend's custom kernels, torch_npu plugins) were built
    against the torch that was installed then. Replacing it afterwards gives ABI errors or
    undefined symbols at import time, on the NPU host, not in CI.

    ## Example
    ```dockerfile
    RUN cd vllm-ascend && pip install --no-build-isolation -e .
    RUN pip install torch==2.9.0 torch_npu==2.9.0
    ```

    ## Use instead
    ```dockerfile
    RUN pip install torch==2.9.0 torch_npu==2.9.0
    RUN cd vllm-ascend && pip install -c constraints.txt --no-build-isolation -e .
    ```
    """

    name = "torch-repinned-after-build"
    code = "CD018"
    severity = Severity.WARNING
    targets = ("dockerfile",)

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        for stage in facts.stages:
            built_at: int | None = None
            for inst in stage.instructions:
                if inst.script is None:
                    continue
                for cmd in inst.script.commands:
                    pins = repins(cmd)
                    if pins and built_at is not None:
                        for n, spec, w in pins:
                            yield self.at(facts.path, w.pos, f"{n}{spec} installed after line "
                                          f"{built_at} built against the torch installed then",
                                          hint="install torch first; constrain later installs "
                                          "to it (pip -c constraints.txt)")
                    if built_at is None and compiles_against_torch(cmd) and (
                            compile_off(cmd, inst, ctx) is None):
                        built_at = cmd.pos.line
