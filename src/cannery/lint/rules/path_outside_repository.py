from __future__ import annotations

from collections.abc import Iterator

from cannery.lint.facts.workflow import WorkflowFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule
from cannery.lint.rules._workflow import builds, expand_env


class PathOutsideRepository(Rule):
    """## What it does
    Finds a build step (docker/build-push-action) whose `file:` or `context:` names a path
    outside the repository: absolute (`/dev/zero`, `/etc/…`), climbing out with `..`
    (`../../x`), or leading out through a symbolic link committed in the repository. Paths
    are taken relative to the repository root, as the action takes them from the checkout;
    `${{ env.X }}` is filled in from the workflow, and a value that still holds an
    expression, or a git or URL context, is not judged. Lint does not read such a file (no
    other rule looks inside it, and `missing-dockerfile` says nothing about it).

    ## Why is this bad?
    The image is then built from something the repository does not hold: a file the runner
    happens to have, another checkout, or a device. The build is not reproducible from the
    commit, and a pull request can point it at whatever it likes on the runner.

    ## Example
    ```yaml
    - uses: docker/build-push-action@v6
      with:
        context: ../shared
        file: /home/runner/Dockerfile
    ```

    ## Use instead
    ```yaml
    - uses: docker/build-push-action@v6
      with:
        context: .
        file: docker/Dockerfile
    ```
    """

    name = "path-outside-repository"
    code = "CW011"
    severity = Severity.ERROR
    targets = ("workflow",)

    def check(self, facts: WorkflowFacts, ctx: LintContext) -> Iterator[Finding]:
        for b in builds(facts):
            for key in ("file", "context"):
                value = b.step.with_.get(key)
                if value is None:
                    continue
                name = expand_env(value.text, facts, b.job, b.step).strip()
                if not name or "{{" in name or "://" in name or name.startswith("git@"):
                    continue
                why = ctx.outside(name)
                if why is not None:
                    yield self.finding(facts.path, value.line, value.column,
                                       f"{key}: {name} is outside the repository ({why}); "
                                       "lint does not read it",
                                       hint=f"name a {key} inside the repository, relative "
                                       "to its root")
