from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.facts.workflow import WorkflowFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule

SECRET = re.compile(r"\$\{\{\s*secrets\.")
LOGIN = {"docker", "podman", "buildah", "skopeo", "helm", "oras", "crane", "regctl", "nerdctl"}
BUILTINS = {"echo", "printf"}  # builtins: their arguments are not visible to other processes


class SecretInArgv(Rule):
    """## What it does
    Finds secrets passed on a command line in a `run:` step: `${{ secrets.X }}` as an
    argument, and `login -p/--password` of registry tools.

    ## Why is this bad?
    Arguments are visible to every process on the runner (`ps`), are written to shell
    traces with `set -x`, and end up in error messages; GitHub masks known secrets in logs,
    not in other tools' output or in derived values.

    ## Example
    ```yaml
    run: docker login -u robot -p ${{ secrets.QUAY_PASSWORD }} quay.io
    ```

    ## Use instead
    ```yaml
    env: {QUAY_PASSWORD: "${{ secrets.QUAY_PASSWORD }}"}
    run: printf '%s' "$QUAY_PASSWORD" | docker login -u robot --password-stdin quay.io
    ```
    """

    name = "secret-in-argv"
    code = "CW007"
    severity = Severity.ERROR
    targets = ("workflow",)

    def check(self, facts: WorkflowFacts, ctx: LintContext) -> Iterator[Finding]:
        for _job, _step, cmd in facts.commands():
            if cmd.name in BUILTINS:
                continue
            secret = next((w for w in cmd.args if SECRET.search(w.text)), None)
            if secret is not None:
                yield self.at(facts.path, secret.pos, f"a secret is an argument of {cmd.name}: "
                              "visible to every process on the runner",
                              hint="pass it through env: and stdin")
            elif cmd.name in LOGIN and "login" in cmd.argv:
                p = cmd.flag_value("-p", "--password")
                if p is not None:
                    yield self.at(facts.path, p.pos, f"{cmd.name} login --password puts the "
                                  "password in the process list", hint="use --password-stdin")
