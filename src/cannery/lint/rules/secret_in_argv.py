from __future__ import annotations

from collections.abc import Iterator

from cannery.lint.facts.shell import Command
from cannery.lint.facts.workflow import Step, WorkflowFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule, lazy_re

SECRET = lazy_re(r"\$\{\{\s*secrets\.")
LOGIN = {"docker", "podman", "buildah", "skopeo", "helm", "oras", "crane", "regctl", "nerdctl"}
# builtins: their arguments are not visible to other processes
BUILTINS = {"echo", "printf", "test", "[", "[[", "read", "export", "local", "declare", ":"}
USER_FLAGS = ("-u", "--username", "--user")
VAR_REF = lazy_re(r"\$\{?([A-Za-z_]\w*)")


def _tainted(step: Step, wf: WorkflowFacts) -> set[str]:
    """Variables holding a secret: `env:` entries set from `secrets.`, and shell variables
    or arrays assigned from those (followed to a fixed point)."""
    env = {**wf.env, **step.env}
    tainted = {k for k, v in env.items() if SECRET.search(v.text)}
    script = step.run
    if script is None:
        return tainted
    changed = True
    while changed:
        changed = False
        for a in script.assignments:
            if a.name in tainted or a.value is None:
                continue
            text = a.value.text
            if SECRET.search(text) or any(m in tainted for m in VAR_REF.findall(text)):
                tainted.add(a.name)
                changed = True
    return tainted


class SecretInArgv(Rule):
    """## What it does
    Finds secrets passed on a command line in a `run:` step: `${{ secrets.X }}` as an
    argument of an external command, or a variable that holds one (set in the step's or the
    workflow's `env:` from `secrets.`, or a shell variable or array assigned from such a
    value); `login -p/--password` of registry tools; a secret in `--build-arg` or in the
    `build-args:` of a build step, which also lands in the image's history. A user name kept
    in the secrets store (`-u`, `--username`) is an identity, not a credential: reported as
    info. `--password-stdin` is the way to pass one.

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
        from cannery.lint.rules._workflow import builds

        for b in builds(facts):
            args = b.step.with_.get("build-args")
            if args is not None and SECRET.search(args.text):
                yield self.finding(facts.path, args.line, args.column, "a secret in "
                                   "build-args is stored in the image's history",
                                   hint="use secrets: and RUN --mount=type=secret")
        for job in facts.jobs:
            for step in job.steps:
                if step.run is None:
                    continue
                tainted = _tainted(step, facts)
                for cmd in step.run.commands:
                    yield from self._command(facts.path, cmd, tainted)

    def _command(self, path: str, cmd: Command, tainted: set[str]) -> Iterator[Finding]:
        if cmd.name in BUILTINS or cmd.raw_name in BUILTINS:
            return
        for i, w in enumerate(cmd.args):
            if not (SECRET.search(w.text) or any(
                    n in tainted for n in VAR_REF.findall(w.text))):
                continue
            prev = cmd.args[i - 1].value if i else ""
            if prev in USER_FLAGS or w.value.startswith(("--username=", "--user=")):
                yield self.at(path, w.pos, f"{cmd.name} gets a user name from the secrets "
                              "store on its command line: an identity, not a credential",
                              severity=Severity.INFO)
                continue
            if prev == "--build-arg" or w.value.startswith("--build-arg="):
                yield self.at(path, w.pos, "a secret passed as --build-arg is visible in the "
                              "process list and stored in the image's history",
                              hint="use --secret id=…,env=… and RUN --mount=type=secret")
                continue
            yield self.at(path, w.pos, f"a secret is an argument of {cmd.name}: visible to "
                          "every process on the runner", hint="pass it through env: and stdin")
            return
        if cmd.name in LOGIN and "login" in cmd.argv:
            p = cmd.flag_value("-p", "--password")
            if p is not None and not any(
                    n in tainted for n in VAR_REF.findall(p.text)) and not SECRET.search(p.text):
                yield self.at(path, p.pos, f"{cmd.name} login --password puts the "
                              "password in the process list", hint="use --password-stdin")
