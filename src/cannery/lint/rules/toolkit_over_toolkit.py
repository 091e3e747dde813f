from __future__ import annotations

from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts, expand
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule
from cannery.lint.rules._cann import BASE_VERSION, INSTALLER


class ToolkitOverToolkit(Rule):
    """## What it does
    Finds a CANN toolkit installer of one version run on a base image whose tag says it
    already ships another (`cann:8.5.1-…` base, `Ascend-cann-toolkit_8.5.2_…run`).

    ## Why is this bad?
    The base's toolkit stays in its lower layer (several GB) under the new one; the image
    carries both, and the base's `ENV` still names the old paths unless every variable is
    set again.

    ## Example
    ```dockerfile
    FROM ascendhub/cann:8.5.1-910b-ubuntu22.04-py3.11
    RUN bash Ascend-cann-toolkit_8.5.2_linux-x86_64.run --quiet --install
    ```

    ## Use instead
    ```dockerfile
    FROM ascendhub/cann:8.5.2-910b-ubuntu22.04-py3.11
    ```
    (or install the toolkit on a plain OS base in a separate stage)
    """

    name = "toolkit-over-toolkit"
    code = "CD008"
    severity = Severity.WARNING
    targets = ("dockerfile",)

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        for stage in facts.stages:
            root = stage.root
            m = BASE_VERSION.search(root.image)
            if not m:
                continue
            base_v = m.group("v").lower()
            seen: set[str] = set()
            for inst in stage.instructions:
                if inst.script is None:
                    continue
                for cmd in inst.script.commands:
                    for w in cmd.args:
                        im = INSTALLER.search(expand(w.value, stage.instructions, inst.index))
                        if not im:
                            continue
                        v = im.group("v").lower()
                        if v != base_v and v not in seen:
                            seen.add(v)
                            yield self.at(facts.path, w.pos, f"CANN toolkit {v} installed over "
                                          f"a base that already ships {base_v} (line "
                                          f"{root.line}): the old toolkit stays in a lower "
                                          "layer", hint=f"start from a CANN {v} base image")
