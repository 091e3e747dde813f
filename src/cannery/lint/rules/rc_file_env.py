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
        for _inst, cmd in facts.commands():
            targets = [w for op, w in cmd.redirects if op in (">", ">>")]
            if cmd.name == "tee":
                targets += cmd.positional()
            text = " ".join(cmd.argv)
            env_like = cmd.name == "tee" or any(
                word in text for word in ("export", "source", "set_env", "PATH"))
            for t in targets:
                if env_like and RC.search(t.value.replace("~", "/root")):
                    yield self.at(facts.path, cmd.pos, f"environment written to {t.value}: "
                                  "only interactive shells read it, not docker run or later "
                                  "RUN steps", hint="persist it with ENV")
