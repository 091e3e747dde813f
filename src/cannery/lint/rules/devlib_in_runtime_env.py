from __future__ import annotations

from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule


class DevlibInRuntimeEnv(Rule):
    """## What it does
    Finds CANN's `devlib` directory in a variable persisted with `ENV` (usually
    `LD_LIBRARY_PATH`).

    ## Why is this bad?
    `devlib` holds a stub `libascend_hal.so` that exists only so extensions can link on a
    machine without an NPU driver. At runtime it shadows the host driver's real library, and
    every NPU call fails.

    ## Example
    ```dockerfile
    ENV LD_LIBRARY_PATH=/usr/local/Ascend/cann-8.5.2/x86_64-linux/devlib/linux/x86_64
    ```

    ## Use instead
    ```dockerfile
    RUN LD_LIBRARY_PATH=/usr/local/Ascend/cann-8.5.2/x86_64-linux/devlib/linux/x86_64 \\
        pip install -v -e vllm-ascend
    ```
    """

    name = "devlib-in-runtime-env"
    code = "CD012"
    severity = Severity.ERROR
    targets = ("dockerfile",)

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        for inst in facts.instructions:
            if inst.keyword != "ENV":
                continue
            for pr in inst.pairs:
                if "/devlib" in (pr.value or ""):
                    yield self.finding(facts.path, pr.line, pr.column,
                                       f"ENV {pr.key} puts CANN's build-only devlib stub on the "
                                       "runtime path: it shadows the host driver",
                                       end_column=pr.column + len(pr.key),
                                       hint="set it only inside the RUN that compiles")
