from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts
from cannery.lint.facts.workflow import WorkflowFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule

# command → how the word after it looks when it is used as that command (so that a package
# called `git` in `apt-get install -y \` + `git curl` is not taken for a command)
USAGE = {
    "rm": r"^-[rfRv]+$|^/",
    "pip": r"^(install|uninstall|download|wheel|cache|config)$",
    "pip3": r"^(install|uninstall|download|wheel|cache|config)$",
    "python": r"^(-m|-c)$|\.py$",
    "python3": r"^(-m|-c)$|\.py$",
    "git": r"^(clone|checkout|fetch|submodule|apply|config|init|reset|pull|-C)$",
    "cd": r"^[/~$.]|^\w[\w./-]*$",
    "apt-get": r"^(install|update|upgrade|clean|remove|purge|autoremove)$",
    "apt": r"^(install|update|upgrade|clean|remove|purge|autoremove)$",
    "yum": r"^(install|clean|makecache|update|remove)$",
    "dnf": r"^(install|clean|makecache|update|remove)$",
    "mkdir": r"^-p$|^/",
    "cp": r"^-[arfRv]+$|^/",
    "mv": r"^-[fv]+$|^/",
    "chmod": r"^(\+|[0-7]{3,4}$|[ugoa]+[+-=])",
    "ln": r"^-s",
    "curl": r"^-|^https?://",
    "wget": r"^-|^https?://",
    "export": r"^[A-Za-z_]\w*=",
    "source": r"^[/~$.]",
    "conda": r"^(install|create|clean|activate|env)$",
    "npm": r"^(install|ci|config)$",
    "sed": r"^-i",
    "cmake": r"^(-S|-B|--build|--install|\.\.?)$",
    "bash": r"\.(sh|run)$",
}
# commands whose arguments are commands or words to look up
TAKES_COMMANDS = {"which", "command", "type", "hash", "time", "xargs", "sudo", "env", "nohup",
                  "exec", "eval", "trap"}


class SwallowedCommand(Rule):
    """## What it does
    Finds a continuation line that starts with a command (`rm -rf`, `pip install`, `git
    clone`, `cd /src`, `apt-get install`, …) but is an argument of the command on the line
    before, because that line ends in `\\` without `&&` or `;`.

    ## Why is this bad?
    The line never runs as a command: `pip uninstall -y a b \\` followed by `rm -rf /tmp/x`
    asks pip to uninstall packages named `rm`, `-rf` and `/tmp/x`. Depending on the tool the
    build fails with a puzzling error or, worse, passes with the step silently skipped.

    ## Example
    ```dockerfile
    RUN pip uninstall -y torchvision torchaudio \\
        rm -rf /root/.cache/pip
    ```

    ## Use instead
    ```dockerfile
    RUN pip uninstall -y torchvision torchaudio && \\
        rm -rf /root/.cache/pip
    ```
    """

    name = "swallowed-command"
    code = "CD025"
    severity = Severity.ERROR
    targets = ("dockerfile", "workflow")

    def check(self, facts: DockerfileFacts | WorkflowFacts, ctx: LintContext
              ) -> Iterator[Finding]:
        for cmd in facts.shell_commands():
            if cmd.name in TAKES_COMMANDS or cmd.raw_name in TAKES_COMMANDS:
                continue
            args = cmd.args
            for i, w in enumerate(args):
                usage = USAGE.get(w.text)
                if usage is None or w.pos.line == cmd.pos.line or i + 1 >= len(args):
                    continue
                line = facts.lines[w.pos.line - 1] if w.pos.line <= len(facts.lines) else ""
                if line[: w.pos.column - 1].strip():
                    continue  # not the first word of its line
                nxt = args[i + 1]
                if nxt.pos.line == w.pos.line and re.search(usage, nxt.value):
                    yield self.at(facts.path, w.pos, f"`{w.text} {nxt.value}` is an argument "
                                  f"of {cmd.raw_name or cmd.name} (line {cmd.pos.line}), not a "
                                  "command: the line before ends in `\\` without `&&` or `;`",
                                  hint="end the line before with `&& \\`")
                    break
