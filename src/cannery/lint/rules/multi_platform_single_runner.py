from __future__ import annotations

from collections.abc import Iterator

from cannery.lint.facts.workflow import WorkflowFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule
from cannery.lint.rules._image_tools import is_docker_build
from cannery.lint.rules._workflow import builds, split_list


class MultiPlatformSingleRunner(Rule):
    """## What it does
    Finds one build step (or `docker buildx build --platform a,b`) that builds several
    platforms on a single runner.

    ## Why is this bad?
    All but the runner's own platform build under QEMU emulation: compiling vllm-ascend's
    kernels or torch extensions for arm64 on an x86_64 runner takes many times longer and
    often hits the job time limit. Native runners per platform, each pushing by digest, then
    one merge job, are faster and fail independently.

    ## Example
    ```yaml
    runs-on: ubuntu-latest
    steps:
      - uses: docker/build-push-action@v6
        with: {platforms: "linux/amd64,linux/arm64", push: true}
    ```

    ## Use instead
    ```yaml
    strategy: {matrix: {include: [{platform: linux/amd64, runner: ubuntu-24.04},
                                  {platform: linux/arm64, runner: ubuntu-24.04-arm}]}}
    runs-on: ${{ matrix.runner }}
    ```
    """

    name = "multi-platform-single-runner"
    code = "CW002"
    severity = Severity.WARNING
    targets = ("workflow",)

    def check(self, facts: WorkflowFacts, ctx: LintContext) -> Iterator[Finding]:
        for b in builds(facts):
            if b.platforms is None:
                continue
            plats = [p for p in split_list(b.platforms.text) if "${{" not in p]
            if len(plats) > 1:
                yield self.finding(facts.path, b.platforms.line, b.platforms.column,
                                   f"{len(plats)} platforms built on one runner "
                                   f"({b.job.runs_on or 'unknown'}): all but one run under "
                                   "emulation", hint="one native runner per platform, push by "
                                   "digest, then merge")
        for _job, _step, cmd in facts.commands():
            if is_docker_build(cmd) or cmd.name == "buildah":
                v = cmd.flag_value("--platform")
                if v and len(split_list(v.value)) > 1 and "${{" not in v.value:
                    yield self.at(facts.path, v.pos, "several platforms built on one runner: "
                                  "all but one run under emulation",
                                  hint="one native runner per platform")
