from __future__ import annotations

from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule


class SourceInPosixShell(Rule):
    """## What it does
    Finds `source` in a `RUN` whose effective shell is a POSIX `sh` (dash on Debian and
    Ubuntu), where `source` does not exist. The effective shell is the last `SHELL` of the
    stage, or the base image's (configurable per image pattern: CANN bases use bash).

    ## Why is this bad?
    `sh: source: not found` stops the build, or, after `|| true`, silently skips the setup.
    (hadolint reports every `source` this way; this rule knows the CANN bases' shell.)

    ## Example
    ```dockerfile
    FROM ubuntu:22.04
    RUN source /opt/env.sh && make
    ```

    ## Use instead
    ```dockerfile
    FROM ubuntu:22.04
    RUN . /opt/env.sh && make
    ```
    """

    name = "source-in-posix-shell"
    code = "CD014"
    severity = Severity.ERROR
    targets = ("dockerfile",)

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        for inst in facts.instructions:
            if inst.script is None or inst.shell_is_bash or inst.heredoc:
                continue
            for cmd in inst.script.commands:
                if cmd.raw_name == "source":
                    yield self.at(facts.path, cmd.pos, f"`source` in a RUN whose shell is "
                                  f"{' '.join(inst.shell)}: sh has no `source`",
                                  hint='use ". FILE", or SHELL ["/bin/bash", "-c"]')
