from __future__ import annotations

from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule
from cannery.lint.rules._shell import builds_from_source, pip_packages

TORCH = {"torch", "torch_npu", "torchvision", "torchaudio"}


class TorchRepinnedAfterBuild(Rule):
    """## What it does
    Finds `pip install torch==…` (or torch_npu, torchvision, torchaudio) after an earlier
    step built a package from source (`pip install -e`, `--no-build-isolation`, `setup.py`,
    `git+…`), in the same stage.

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
                    if builds_from_source(cmd) and built_at is None:
                        built_at = cmd.pos.line
