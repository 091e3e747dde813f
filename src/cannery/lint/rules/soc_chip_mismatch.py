from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule, lazy_re

CHIP = lazy_re(r":[^/]*?-(910b|a3|310p|950)-", re.I)


class SocChipMismatch(Rule):
    """## What it does
    Compares `SOC_VERSION` (from `ARG` or `ENV`) with the chip token of the base image's tag:
    an A3 SoC (`ascend910_93xx`) on a `-910b-` base, an A2 SoC (`ascend910b*`) on an `-a3-`
    base, and so on.

    ## Why is this bad?
    vllm-ascend compiles its custom kernels for `SOC_VERSION`; the base's ops package is for
    the chip in its tag. The mismatch builds fine and fails on the NPU host with missing or
    wrong kernels.

    ## Example
    ```dockerfile
    FROM ascendhub/cann:8.5.1-910b-ubuntu22.04-py3.11
    ARG SOC_VERSION=ascend910_9391
    ```

    ## Use instead
    ```dockerfile
    FROM ascendhub/cann:8.5.1-a3-ubuntu22.04-py3.11
    ARG SOC_VERSION=ascend910_9391
    ```
    """

    name = "soc-chip-mismatch"
    code = "CD020"
    severity = Severity.ERROR
    targets = ("dockerfile",)

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        global_soc = [p for i in facts.global_args for p in i.pairs if p.key == "SOC_VERSION"]
        for stage in facts.stages:
            root = stage.root
            m = CHIP.search(root.image)
            if not m:
                continue
            chip = m.group(1).lower()
            pairs = [p for i in stage.instructions if i.keyword in ("ARG", "ENV")
                     for p in i.pairs if p.key == "SOC_VERSION"]
            for pr in pairs or global_soc:
                want = ctx.soc_families.get((pr.value or "").lower())
                if want and want != chip:
                    yield self.finding(facts.path, pr.line, pr.column,
                                       f"SOC_VERSION={pr.value} is a {want} SoC but the base "
                                       f"image (line {root.line}) is built for chip {chip}",
                                       end_column=pr.column + len(pr.key),
                                       hint=f"use a -{want}- base image, or a {chip} SoC")
