from __future__ import annotations

from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts
from cannery.lint.fixes import delete_lines
from cannery.lint.model import Finding, Fix, Severity
from cannery.lint.rule import LintContext, Rule


class EmptyContinuationLine(Rule):
    """## What it does
    Finds blank lines inside a multi-line instruction (after a `\\` continuation).

    ## Why is this bad?
    BuildKit still joins the next line into the instruction but warns that this is
    deprecated; a reader sees two instructions where the builder sees one, and a future
    builder may end the instruction at the blank line.

    ## Example
    ```dockerfile
    RUN apt-get update && \\

        apt-get install -y git
    ```

    ## Use instead
    ```dockerfile
    RUN apt-get update && \\
        apt-get install -y git
    ```
    """

    name = "empty-continuation-line"
    code = "CD015"
    severity = Severity.WARNING
    targets = ("dockerfile",)
    fix = "safe"

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        for inst in facts.instructions:
            if inst.end_line == inst.line or inst.heredoc:
                continue
            for line in range(inst.line + 1, inst.end_line):
                if not facts.line_text(line).strip():
                    yield self.finding(
                        facts.path, line, 1, "blank line inside a continued instruction",
                        fix=Fix("remove the blank line", (delete_lines(facts, line, line),),
                                safe=True),
                        hint="remove it",
                    )
