from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts, expand
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule

FULL = re.compile(r"^[0-9a-f]{40}$")
SHORT = re.compile(r"^[0-9a-f]{7,39}$")
GIT_URL = re.compile(r"^(?:[\w.-]+\s*@\s*)?git\+([^@#\s]+?)(?:@([^#\s]+))?(?:#.*)?$")


class UnpinnedGitRef(Rule):
    """## What it does
    Finds git sources that are not pinned to a full commit: `git clone` of the default
    branch, `--branch` with a branch or tag, `git checkout` of a short SHA, `git submodule
    update --remote`, and `pip install git+URL@ref` with a ref that is not a 40-hex commit —
    unless a later `git checkout`/`reset`/`fetch` in the same step names a full commit.

    ## Why is this bad?
    Branches and tags move (vllm-ascend's release branches did, and started to require a
    newer CANN); a short SHA can become ambiguous. A nightly rebuild then silently ships other
    code than the one reviewed.

    ## Example
    ```dockerfile
    RUN git clone -b releases/v0.18.0 https://github.com/vllm-project/vllm-ascend.git
    ```

    ## Use instead
    ```dockerfile
    RUN git init vllm-ascend && cd vllm-ascend && \\
        git fetch --depth 1 https://github.com/vllm-project/vllm-ascend.git <40-hex commit> && \\
        git checkout FETCH_HEAD
    ```
    """

    name = "unpinned-git-ref"
    code = "CD004"
    severity = Severity.WARNING
    targets = ("dockerfile",)

    def check(self, facts: DockerfileFacts, ctx: LintContext) -> Iterator[Finding]:
        p = facts.path
        for inst in facts.instructions:
            if inst.script is None or inst.stage is None:
                continue
            cmds = inst.script.commands
            insts = inst.stage.instructions

            def val(text: str) -> str:
                return expand(text, insts, inst.index)  # noqa: B023

            for i, cmd in enumerate(cmds):
                if cmd.name == "git":
                    sub = cmd.subcommand()
                    if sub == "clone":
                        later = cmds[i + 1 :]
                        nxt = next((j for j, c in enumerate(later) if c.name == "git"
                                    and c.subcommand() == "clone"), len(later))
                        pinned = any(
                            c.name == "git" and c.subcommand() in ("checkout", "reset", "fetch",
                                                                   "switch")
                            and any(FULL.match(val(a)) for a in c.argv)
                            for c in later[:nxt]
                        )
                        short_later = any(
                            c.name == "git" and c.subcommand() in ("checkout", "reset")
                            and any(SHORT.match(val(w.value)) for w in c.operands())
                            for c in later[:nxt]
                        )
                        if pinned or short_later:  # a short SHA is reported where it stands
                            continue
                        moved = next((w for c in later[:nxt] if c.name == "git"
                                      and c.subcommand() in ("checkout", "switch")
                                      for w in c.operands()[:1] if not w.value.startswith("-")),
                                     None)
                        branch = cmd.flag_value("-b", "--branch")
                        if moved is not None:  # cloned, then switched to a branch or tag
                            ref = val(moved.value)
                            yield self.at(p, moved.pos, f"git checkout {ref}: a branch or tag "
                                          "can move; pin a full commit",
                                          hint="git checkout <40-hex commit>")
                        elif branch is None:
                            yield self.at(p, cmd.pos, "git clone of the default branch: it "
                                          "moves with every push", hint="fetch a full commit")
                        else:
                            ref = val(branch.value)
                            if FULL.match(ref):
                                continue
                            yield self.at(p, branch.pos, f"git clone --branch {ref}: a "
                                          "branch or tag can move; pin a full commit",
                                          hint="git fetch --depth 1 URL <40-hex> && "
                                          "git checkout FETCH_HEAD")
                    elif sub in ("checkout", "reset"):
                        for w in cmd.operands():
                            ref = val(w.value)
                            if SHORT.match(ref):
                                yield self.at(p, w.pos, f"git {sub} {ref}: a short SHA can "
                                              "become ambiguous; use the full 40-hex commit")
                    elif sub == "submodule" and "update" in cmd.argv and cmd.has_flag(
                            "--remote"):
                        yield self.at(p, cmd.pos, "git submodule update --remote follows the "
                                      "submodules' branches instead of the recorded commits",
                                      hint="drop --remote")
                elif cmd.name == "pip":
                    for w in cmd.args:
                        m = GIT_URL.match(w.value)
                        if not m:
                            continue
                        ref = val(m.group(2) or "")
                        if not FULL.match(ref):
                            what = f"@{ref}" if ref else "with no ref (default branch)"
                            yield self.at(p, w.pos, f"pip install git+… {what}: not pinned to "
                                          "a full commit", hint="use git+URL@<40-hex commit>")
