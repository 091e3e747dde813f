from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts
from cannery.lint.facts.shell import Command
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule, lazy_re

RC = lazy_re(r"(^|/)(\.bashrc|\.profile|\.bash_profile|\.bash_login|\.zshrc|\.zprofile|"
             r"\.zshenv|bash\.bashrc|bashrc|profile|environment|zprofile|zshrc|zshenv)$|"
             r"/etc/profile\.d/")
ENV_WORDS = ("export", "source", "set_env", "PATH", ". /")


def _written(cmd: Command) -> str:
    """The text a writer puts into its target: its arguments (`echo`, `printf`), a heredoc
    or here-string fed to it (`cat >> F <<EOF`, `tee -a F <<EOF`), or, for `tee`, what the
    command before it in the pipe prints."""
    parts = [" ".join(cmd.argv)]
    if cmd.stdin is not None:
        parts.append(cmd.stdin.text)
    if cmd.name == "tee" and cmd.pipeline and cmd.pipe_index > 0:
        src = cmd.pipeline[cmd.pipe_index - 1]
        parts.append(" ".join(src.argv))
        if src.stdin is not None:
            parts.append(src.stdin.text)
    return "\n".join(parts)


class RcFileEnv(Rule):
    """## What it does
    Finds environment "persisted" by writing `export`/`source`/`PATH` lines into a shell
    start-up file — `~/.bashrc`, `/root/.bashrc`, `.profile`, `.bash_profile`,
    `/etc/bashrc`, `/etc/bash.bashrc`, `/etc/profile`, `/etc/profile.d/*`, zsh's files — or
    `/etc/environment`, by any writer: `echo`/`printf` redirected there, `tee`/`tee -a` fed
    by a pipe or a heredoc, `cat >> FILE <<EOF`, wherever the command stands in the `RUN`.

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
            targets = [w for op, w in cmd.redirects if op in (">", ">>", ">|")]
            if cmd.name == "tee":
                targets += cmd.positional()
            if not targets:
                continue
            env_like = any(word in _written(cmd) for word in ENV_WORDS)
            for t in targets:
                path = re.sub(r"^(~|\$HOME|\$\{HOME\})(?=/)", "/root", t.value)
                if env_like and RC.search(path):
                    yield self.at(facts.path, cmd.pos, f"environment written to {t.value}: "
                                  "only interactive shells read it, not docker run or later "
                                  "RUN steps", hint="persist it with ENV")
