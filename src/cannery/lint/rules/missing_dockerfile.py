from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from cannery.lint.facts import ParseFailure
from cannery.lint.facts.workflow import WorkflowFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule
from cannery.lint.rules._image_tools import is_docker_build
from cannery.lint.rules._workflow import bake_files, dockerfiles


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # a name too long, or not a path at all, names no file
        return False


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:
        return False


class MissingDockerfile(Rule):
    """## What it does
    Checks that the Dockerfile a workflow builds (`file:` of docker/build-push-action, or
    `docker build -f`) exists in the repository, and that the bake file a
    `docker/bake-action` step reads (JSON or HCL) parses: one that does not is reported at
    the step, naming the file and the line where parsing fails. A `file:` outside the
    repository is left to `path-outside-repository`.

    ## Why is this bad?
    A renamed or deleted Dockerfile (`Dockerfile.ascend_8.5.2_a2_qwen3-5` →
    `…_qwen3_5`) fails only when the workflow next runs, often a manual or nightly one,
    long after the rename was merged.

    ## Example
    ```yaml
    with: {file: docker/ascend/Dockerfile.ascend_8.5.2_a2_qwen3_5}
    ```

    ## Use instead
    Point `file:` at a path that exists (this check runs in pre-commit).
    """

    name = "missing-dockerfile"
    code = "CW005"
    severity = Severity.ERROR
    targets = ("workflow",)

    def check(self, facts: WorkflowFacts, ctx: LintContext) -> Iterator[Finding]:
        root = Path(ctx.root)
        for _b, file, name in dockerfiles(facts):
            if ctx.outside(name) is not None:
                continue  # path-outside-repository reports it
            if not _is_file(root / name):
                what = "is not a regular file" if _exists(root / name) else "does not exist"
                yield self.finding(facts.path, file.line, file.column,
                                   f"{name} {what} (relative to {root})",
                                   hint="fix the path")
        for job in facts.jobs:
            for step in job.steps:
                if step.uses.split("@")[0] != "docker/bake-action":
                    continue
                at = step.with_.get("files")
                line, column = (at.line, at.column) if at is not None else (step.line, 1)
                for name, doc in bake_files(facts, step, ctx):
                    if isinstance(doc, ParseFailure):
                        yield self.finding(facts.path, line, column,
                                           f"{name}:{doc.line}: bake file does not parse: "
                                           f"{doc.message}",
                                           hint="fix the bake file; bake fails on it too")
        for _job, _step, cmd in facts.commands():
            if is_docker_build(cmd) or (cmd.name in ("podman", "buildah")
                                        and cmd.subcommand() in ("build", "bud")):
                f = cmd.flag_value("-f", "--file")
                if f and "$" not in f.value and not _is_file(root / f.value):
                    yield self.at(facts.path, f.pos, f"{f.value} does not exist (relative to "
                                  f"{root})", hint="fix the path")
