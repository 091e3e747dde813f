from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule

RC = re.compile(r"(^|/)(\.bashrc|\.profile|\.bash_profile|\.zshrc|bash\.bashrc|profile|"
                r"environment)$|/etc/profile\.d/")


class RcFileEnv(Rule):
    """## What it does
    Finds environment "persisted" by appending `export`/`source` lines to `~/.bashrc`,
    `/etc/bash.bashrc`, `/etc/profile`, `/etc/profile.d/*` or `/etc/environment`.

    ## Why is this bad?
    Those files are read only by interactive or login shells. `docker run IMAGE python …`,
    Kubernetes `command:`, and every later `RUN` never read them; images that do this and
    also source the script elsewhere end up with paths repeated three or four times.

    ## Example
    ```dockerfile
    RUN echo "source /usr/local/Ascend/ascend-toolkit/set_env.sh" >> ~/.bashrc
    ```

    ## Use instead
    ```dockerfile
    ENV ASCEND_TOOLKIT_HOME=/usr/local/Ascend/cann-8.5.2
    ```
    """

    name = "rc-file-env"
    code = "CD013"
    severity = Severity.WARNING
    targets = ("dockerfile",)

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        for inst in facts.instructions:
            if inst.script is None:
                continue
            for cmd in inst.script.commands:
                targets = [w for op, w in cmd.redirects if op in (">", ">>")]
                if cmd.name == "tee":
                    targets += cmd.positional()
                for t in targets:
                    if RC.search(t.value.replace("~", "/root")) and (
                            "export" in " ".join(cmd.argv) or "source" in " ".join(cmd.argv)
                            or "set_env" in " ".join(cmd.argv) or "PATH" in " ".join(cmd.argv)
                            or cmd.name == "tee"):
                        yield self.at(facts.path, cmd.pos, f"environment written to {t.value}: "
                                      "only interactive shells read it, not docker run or "
                                      "later RUN steps", hint="persist it with ENV")
