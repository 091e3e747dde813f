from __future__ import annotations

from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule

READ_ONLY = {"echo", "ls", "cat", "env", "printenv", "true", ":", "which", "uname", "nproc",
             "pwd", "whoami", "id", "df", "du", "free", "lscpu", "date", "printf", "head",
             "tail", "wc", "npu-smi"}


def _read_only(cmd) -> bool:  # type: ignore[no-untyped-def]
    if any(op in (">", ">>") for op, _ in cmd.redirects):
        return False
    if cmd.name == "pip":
        return cmd.subcommand() in ("list", "freeze", "show", "check", "--version")
    if cmd.name in ("python", "python3") and cmd.argv in (["--version"], ["-V"]):
        return True
    return cmd.name in READ_ONLY


class NoopLayer(Rule):
    """## What it does
    Finds a `RUN` made only of commands that change nothing: `RUN pip list`, `RUN echo …`,
    `RUN ls -la`, `RUN env`, in a stage that ships (the last stage, or the configured
    `target`, and the stages it is built `FROM`).

    ## Why is this bad?
    It adds an (empty) layer and a cache step to every build, and its output is lost in the
    build log; it is debugging left in.

    ## Example
    ```dockerfile
    RUN pip list
    ```

    ## Use instead
    Remove it, or print what you need in the step that changes it.
    """

    name = "noop-layer"
    code = "CD023"
    severity = Severity.INFO
    targets = ("dockerfile",)

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        ships = facts.shipping(ctx.target)
        for inst in facts.instructions:
            if inst.stage not in ships:
                continue
            s = inst.script
            if s is None or not s.commands or s.assignments or s.has_error:
                continue
            if all(_read_only(c) for c in s.commands):
                yield self.finding(facts.path, inst.line, 1, "this RUN changes nothing in the "
                                   "image: it only adds a layer",
                                   end_column=len(facts.line_text(inst.line)) + 1,
                                   hint="remove it")
