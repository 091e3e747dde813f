from __future__ import annotations

from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule
from cannery.lint.rules._shell import is_download

SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "python", "python3", "perl", "ruby", "node"}


def pipe_to_shell(script) -> Iterator[object]:  # type: ignore[no-untyped-def]
    """Commands that run what a download streams to them (shared with the workflow rule)."""
    for cmd in script.commands:
        if cmd.pipeline and cmd.pipe_index > 0 and cmd.name in SHELLS:
            if any(is_download(c) for c in cmd.pipeline[: cmd.pipe_index]):
                yield cmd
        elif cmd.name in SHELLS and cmd.in_substitution is False:
            # bash <(curl …)  /  sh -c "$(curl …)"
            for w in cmd.args:
                if ("<(curl" in w.text or "<(wget" in w.text or "$(curl" in w.text
                        or "$(wget" in w.text):
                    yield cmd
                    break


class PipeToShell(Rule):
    """## What it does
    Finds a download piped straight into an interpreter: `curl … | bash`, `wget -O- … | sh`,
    `bash <(curl …)`, `sh -c "$(curl …)"`.

    ## Why is this bad?
    What runs is whatever the server sends at build time; it is never on disk to be checked,
    and a dropped connection can run half a script.

    ## Example
    ```dockerfile
    RUN curl -fsSL https://example.com/install.sh | bash
    ```

    ## Use instead
    ```dockerfile
    RUN curl -fsSLo /tmp/install.sh https://example.com/install.sh && \\
        echo "<sha256>  /tmp/install.sh" | sha256sum -c - && bash /tmp/install.sh
    ```
    """

    name = "pipe-to-shell"
    code = "CD003"
    severity = Severity.ERROR
    targets = ("dockerfile",)

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        for inst in facts.instructions:
            if inst.script is None:
                continue
            for cmd in pipe_to_shell(inst.script):
                yield self.at(facts.path, cmd.pos,  # type: ignore[attr-defined]
                              f"downloaded script piped into {cmd.name}: it runs unverified",  # type: ignore[attr-defined]
                              hint="download to a file, check its sha256, then run it")
