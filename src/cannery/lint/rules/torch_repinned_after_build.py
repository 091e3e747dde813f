from __future__ import annotations

from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts, Instruction, arg_default
from cannery.lint.facts.shell import Command
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule
from cannery.lint.rules._shell import pip_packages

TORCH = {"torch", "torch_npu", "torchvision", "torchaudio"}


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
    Finds `pip install torch==…` (or torch_npu, torchvision, torchaudio) after an earlier
    step of the same stage compiled against the installed torch: a pip build with
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
                    pins = [(n, spec, w) for n, spec, w in pip_packages(cmd)
                            if n in TORCH and spec.startswith("==")]
                    if pins and built_at is not None:
                        for n, spec, w in pins:
                            yield self.at(facts.path, w.pos, f"{n}{spec} installed after line "
                                          f"{built_at} built against the torch installed then",
                                          hint="install torch first; constrain later installs "
                                          "to it (pip -c constraints.txt)")
                    if built_at is None and compiles_against_torch(cmd) and (
                            compile_off(cmd, inst, ctx) is None):
                        built_at = cmd.pos.line
