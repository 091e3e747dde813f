from __future__ import annotations

from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule
from cannery.lint.rules._shell import same_repo_after, stage_git_commands

HISTORY = {"log", "describe", "rev-list", "blame", "bisect", "shortlog"}


class FullCloneForOneCommit(Rule):
    """## What it does
    Finds `git clone` without `--depth` (or `--filter`) in an image build, where only one
    commit is ever checked out and no later git command reads the history, whatever other
    options it has (`--single-branch` still fetches the whole history of its branch). When a later
    checkout picks a commit, the hint is to fetch that commit (a `--depth 1` clone holds only
    the tip, and the checkout would fail).

    ## Why is this bad?
    The whole history is downloaded and, unless deleted in the same step, stored in a layer:
    transformers' history alone is hundreds of MB, for a build that needs one tree.

    ## Example
    ```dockerfile
    RUN git clone https://github.com/huggingface/transformers.git && \\
        cd transformers && git checkout cc7ab9be508ce6ed3637bba9e50367b29b742dc6
    ```

    ## Use instead
    ```dockerfile
    RUN git init transformers && cd transformers && \\
        git fetch --depth 1 https://github.com/huggingface/transformers.git \\
          cc7ab9be508ce6ed3637bba9e50367b29b742dc6 && git checkout FETCH_HEAD
    ```
    """

    name = "full-clone-for-one-commit"
    code = "CD006"
    severity = Severity.WARNING
    targets = ("dockerfile",)

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        for stage in facts.stages:
            ops = stage_git_commands(stage.instructions)
            for k, op in enumerate(ops):
                cmd = op.cmd
                if op.sub != "clone":
                    continue
                # `--single-branch` alone is not shallow: it fetches that branch's whole history
                if any(a.startswith(("--depth", "--shallow", "--filter")) for a in cmd.argv) or (
                        "--mirror" in cmd.argv or "--bare" in cmd.argv):
                    continue
                later = same_repo_after(ops, k)
                if any(o.sub in HISTORY for o in later):
                    continue
                checkout = next((o.cmd for o in later if o.sub in ("checkout", "reset")), None)
                if checkout is not None:
                    # a shallow clone would hold only the tip: fetch the commit instead
                    what = f"then checks out one commit (line {checkout.pos.line})"
                    hint = ("git init DIR && git -C DIR fetch --depth 1 URL <that commit> && "
                            "git -C DIR checkout FETCH_HEAD")
                else:
                    what, hint = "and builds one commit", "git clone --depth 1"
                yield self.at(facts.path, cmd.pos,
                              f"git clone downloads the full history {what}", hint=hint)
