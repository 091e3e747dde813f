from __future__ import annotations

from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule, lazy_re

LINE_ADDRESS = lazy_re(r"(^|;|\n)\s*\d+(,\d+)?\s*[sdaic]")


class SedLinePatch(Rule):
    """## What it does
    Finds `sed -i` scripts that address lines by number (`sed -i '34s/cuda/npu/'`) to patch
    an installed package.

    ## Why is this bad?
    Line 34 is only line 34 in one release. When the package moves (an unpinned install, a
    new wheel), the edit lands on another line, silently, or changes nothing and the bug it
    worked around is back.

    ## Example
    ```dockerfile
    RUN sed -i '34s/cuda/npu/;51s/cuda/npu/' "$(pip show mbridge | …)/dequant_fp8_safetensor_io.py"
    ```

    ## Use instead
    ```dockerfile
    RUN sed -i 's/torch\\.cuda\\.current_device()/torch.npu.current_device()/' …
    ```
    (match the text to change, and fail when it is not there; or apply a patch file)
    """

    name = "sed-line-patch"
    code = "CD022"
    severity = Severity.WARNING
    targets = ("dockerfile",)

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        for _inst, cmd in facts.commands():
            if cmd.name != "sed" or not any(a.startswith("-i") or a == "--in-place"
                                            for a in cmd.argv):
                continue
            expr = cmd.flag_value("-e", "--expression")
            scripts = [w for w in cmd.args if not w.value.startswith("-")]
            for w in ([expr] if expr is not None else []) + scripts[:1]:
                if LINE_ADDRESS.search(w.value):
                    yield self.at(facts.path, w.pos, f"sed edits by line number "
                                  f"({w.value!s:.40}): it breaks silently when the file "
                                  "changes", hint="match the text instead, or apply a patch")
                    break
