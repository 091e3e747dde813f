from __future__ import annotations

from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule, lazy_re
from cannery.lint.rules._shell import same_repo_after, stage_git_commands
from cannery.lint.rules.unpinned_git_ref import val

COMMIT = lazy_re(r"^[0-9a-f]{7,40}$")


class ShallowCloneCheckout(Rule):
    """## What it does
    Finds `git clone --depth N` (also with `--branch X`) followed, in the cloned directory, by
    a `git checkout`/`reset` of a specific commit, with no `git fetch` in between.

    ## Why is this bad?
    A shallow clone holds only the newest N commits of one branch. Checking out any other
    commit fails (`reference is not a tree`), so the build works only while that commit
    happens to be the tip, and breaks on the next push upstream.

    ## Example
    ```dockerfile
    RUN git clone --depth 1 https://github.com/vllm-project/vllm.git /src/vllm && \\
        git -C /src/vllm checkout 4045d67063052dcb800c918c107b8d5a87046006
    ```

    ## Use instead
    ```dockerfile
    RUN git init /src/vllm && \\
        git -C /src/vllm fetch --depth 1 https://github.com/vllm-project/vllm.git \\
          4045d67063052dcb800c918c107b8d5a87046006 && \\
        git -C /src/vllm checkout FETCH_HEAD
    ```
    """

    name = "shallow-clone-checkout"
    code = "CD024"
    severity = Severity.ERROR
    targets = ("dockerfile",)

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        for stage in facts.stages:
            ops = stage_git_commands(stage.instructions)
            for k, op in enumerate(ops):
                if op.sub != "clone" or not any(
                        a.startswith(("--depth", "--shallow-since", "--shallow-exclude"))
                        for a in op.cmd.argv):
                    continue
                for later in same_repo_after(ops, k):
                    if later.sub == "fetch":
                        break  # the commit (or more history) is fetched first
                    if later.sub not in ("checkout", "reset", "switch"):
                        continue
                    ref = next((val(later, w.value) for w in later.operands[:1]), "")
                    if COMMIT.match(ref):
                        yield self.at(facts.path, later.cmd.pos,
                                      f"git {later.sub} {ref} after a shallow clone (line "
                                      f"{op.cmd.pos.line}): it fails unless that commit is the "
                                      "tip of the cloned branch",
                                      hint="fetch that commit: git fetch --depth 1 URL <commit> "
                                      "&& git checkout FETCH_HEAD")
                    break
