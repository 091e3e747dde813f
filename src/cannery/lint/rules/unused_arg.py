from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule


def _refs(text: str, name: str) -> bool:
    return re.search(rf"\$(\{{{re.escape(name)}(\b|[:}}])|{re.escape(name)}\b)", text) is not None


class UnusedArg(Rule):
    """## What it does
    Finds an `ARG` that no later instruction of its stage (or, before the first `FROM`, no
    `FROM` line or stage) refers to as `$NAME`, and that is not in the list of arguments
    consumed implicitly: an `ARG` is an environment variable in later `RUN`s, so builds that
    read it by name (vllm-ascend's `SOC_VERSION`, `MAX_JOBS`, proxies, BuildKit's
    `TARGETARCH`…) use it without `$`. Configure more with `implicit-args`.

    ## Why is this bad?
    An argument nobody reads suggests a build setting that is silently ignored: the caller
    passes `--build-arg` and nothing changes.

    ## Example
    ```dockerfile
    ARG CANN_VERSION=8.5.2
    RUN bash Ascend-cann-toolkit_8.5.1_linux-x86_64.run --install
    ```

    ## Use instead
    ```dockerfile
    ARG CANN_VERSION=8.5.2
    RUN bash Ascend-cann-toolkit_${CANN_VERSION}_linux-x86_64.run --install
    ```
    """

    name = "unused-arg"
    code = "CD017"
    severity = Severity.WARNING
    targets = ("dockerfile",)

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        for inst in facts.global_args:
            for pr in inst.pairs:
                if pr.key in ctx.implicit_args:
                    continue
                used = any(_refs(s_.base, pr.key) for s_ in facts.stages) or any(
                    i.keyword == "ARG" and any(q.key == pr.key for q in i.pairs)
                    for s_ in facts.stages for i in s_.instructions)
                if not used:
                    yield self._report(facts.path, pr, "no FROM or stage uses it")
        for stage in facts.stages:
            for inst in stage.instructions:
                if inst.keyword != "ARG":
                    continue
                later = [i for i in stage.instructions if i.index > inst.index]
                for pr in inst.pairs:
                    if pr.key in ctx.implicit_args:
                        continue
                    if any(_refs(i.original + "\n" + "\n".join(
                            facts.lines[i.line - 1 : i.end_line]), pr.key) for i in later):
                        continue
                    yield self._report(facts.path, pr, "no later instruction of its stage "
                                       "uses it")

    def _report(self, path: str, pr, why: str) -> Finding:  # type: ignore[no-untyped-def]
        return self.finding(path, pr.line, pr.column, f"ARG {pr.key} is never used: {why}",
                            end_column=pr.column + len(pr.key),
                            hint="use it, remove it, or list it in implicit-args if a build "
                            "reads it from the environment")
