from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts, Instruction, expand
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule, lazy_re
from cannery.lint.rules._shell import GitCommand, same_repo_after, stage_git_commands
from cannery.util.patterns import COMMIT

FULL = COMMIT
SHORT = lazy_re(r"^[0-9a-f]{7,39}$")
# what a checkout of a branch or tag looks like (not a path, HEAD~1, FETCH_HEAD or a variable)
REF = lazy_re(r"^(?!(?:HEAD|FETCH_HEAD|ORIG_HEAD)\b)[\w][\w./-]*$")
GIT_URL = lazy_re(r"^(?:[\w.-]+\s*@\s*)?git\+([^@#\s]+?)(?:@([^#\s]+))?(?:#.*)?$")


# a release tag: v1.2.3, 0.18.0, 8.5.2rc1, v0.11.0-post1 (no slash: `releases/v1` is a branch)
# (each suffix starts with a keyword, so no two ways to match one string: linear time)
TAG = lazy_re(r"^v?\d+(?:\.\d+)+(?:[.\-_+]?(?:rc|post|dev|alpha|beta|a|b|patch|p)\d*)*$",
              re.I)


# what is known to be a branch: the usual long-lived names, `release/…`-style prefixes, and
# vllm-ascend's `v0.9.1-dev` maintenance branches
BRANCH = lazy_re(r"^(main|master|develop|development|dev|trunk|stable|nightly|next|"
                 r"gh-pages|HEAD)$|^(release|releases|feature|features|hotfix|bugfix|dev|"
                 r"devel|branch|users?)/|^v?\d+(\.\d+)*[-_.]dev$", re.I)
# a date in the name (20260609, 2026-06-09): a snapshot, most often a tag
DATED = lazy_re(r"(?<!\d)20\d\d-?[01]\d-?[0-3]\d(?!\d)")


def moving(ref: str, what: str, hint: str) -> tuple[str, Severity, str]:
    """Message, severity and hint for a ref that is not a full commit. A ref is called a
    branch only when its name is a known branch form; otherwise the claim is lowered."""
    if SHORT.match(ref) and not TAG.match(ref):
        return (f"{what} {ref}: a short SHA cannot be fetched (servers accept only full "
                "object names) and can become ambiguous", Severity.ERROR,
                "use the full 40-hex commit")
    if TAG.match(ref) and not BRANCH.match(ref):
        return (f"{what} {ref}: a release tag is mutable (rarely moved); pin its commit",
                Severity.INFO, hint)
    if BRANCH.match(ref):
        return (f"{what} {ref}: a branch moves with every push; pin a full commit",
                Severity.WARNING, hint)
    if DATED.search(ref):
        return (f"{what} {ref}: a dated name, most likely a tag (lint cannot tell a tag from "
                "a branch); a tag can still be moved; pin its commit", Severity.INFO, hint)
    return (f"{what} {ref}: not a commit but a branch or a tag (lint cannot tell which); "
            "what it names can change; pin a full commit", Severity.WARNING, hint)


def val(op: GitCommand, text: str) -> str:
    """``text`` with the ARG/ENV values known where ``op`` runs."""
    inst = op.owner
    assert isinstance(inst, Instruction) and inst.stage is not None
    return expand(text, inst.stage.instructions, inst.index)


class UnpinnedGitRef(Rule):
    """## What it does
    Finds git sources that are not pinned to a full commit: `git clone` of the default
    branch, `--branch` with a branch or tag, `git checkout` of a short SHA, `git submodule
    update --remote`, and `pip install git+URL@ref` with a ref that is not a 40-hex commit —
    unless a later `git checkout`/`reset`/`fetch` in the cloned directory (following `cd` and
    `git -C`, across the stage's RUNs) names a full commit; and `git fetch URL REF` of a
    non-commit REF. A checkout of a branch or tag in a directory nothing here cloned is
    reported on its own. A ref is called a branch only when it is known to be one: the
    default branch, or a known branch form (`main`, `master`, `develop`, `release/…`,
    `v0.9.1-dev`); a branch is a warning: it moves daily. A release tag (`v0.18.0`) and a
    dated name (`v3.1-20260609-master`, most likely a tag) are info: mutable, but rarely
    moved. Any other name is a warning that says it is a branch or a tag. A short SHA in a
    clone or fetch is an error: it cannot be fetched.

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
        for stage in facts.stages:
            ops = stage_git_commands(stage.instructions)
            paired: set[int] = set()  # checkouts that belong to a clone seen here
            for k, op in enumerate(ops):
                cmd = op.cmd
                if op.sub == "clone":
                    yield from self._clone(p, ops, k, paired)
                elif op.sub in ("checkout", "reset"):
                    yield from self._checkout(p, op, paired)
                elif op.sub == "fetch" and len(op.operands) >= 2:
                    yield from self._fetch(p, ops, k)
                elif op.sub == "submodule" and "update" in cmd.argv and cmd.has_flag(
                        "--remote"):
                    yield self.at(p, cmd.pos, "git submodule update --remote follows the "
                                  "submodules' branches instead of the recorded commits",
                                  hint="drop --remote")
            yield from self._pip_git_urls(p, stage.instructions)

    def _clone(self, p: str, ops: list[GitCommand], k: int,
               paired: set[int]) -> Iterator[Finding]:
        """A clone (``ops[k]``) not pinned by a later checkout, reset or fetch of a full commit
        in its directory; the checkouts that follow it are added to ``paired``."""
        op = ops[k]
        cmd = op.cmd
        later = same_repo_after(ops, k)
        moves = [o for o in later if o.sub in ("checkout", "reset", "switch")]
        paired.update(id(o) for o in moves)
        pinned = any(o.sub in ("checkout", "reset", "fetch", "switch")
                     and any(FULL.match(val(o, w.value)) for w in o.operands)
                     for o in later)
        short_later = any(o.sub in ("checkout", "reset") and any(
            SHORT.match(val(o, w.value)) for w in o.operands) for o in later)
        if pinned or short_later:  # a short SHA is reported where it stands
            return
        moved = next((o.operands[0] for o in moves if o.sub != "reset"
                      and o.operands), None)
        branch = cmd.flag_value("-b", "--branch")
        fetched = next((w for o in later if o.sub == "fetch"
                        for w in o.operands[1:2]), None)
        if moved is not None and not (fetched is not None and val(
                op, moved.value) == "FETCH_HEAD"):  # switched to a branch or tag
            msg, sev, hint = moving(val(op, moved.value), "git checkout",
                                    "git checkout <40-hex commit>")
            yield self.at(p, moved.pos, msg, severity=sev, hint=hint)
        elif fetched is not None:  # judged where the fetch names its ref
            return
        elif branch is None:
            yield self.at(p, cmd.pos, "git clone of the default branch: it "
                          "moves with every push", hint="fetch a full commit")
        else:
            ref = val(op, branch.value)
            if FULL.match(ref):
                return
            msg, sev, hint = moving(ref, "git clone --branch",
                                    "git fetch --depth 1 URL <40-hex> && "
                                    "git checkout FETCH_HEAD")
            yield self.at(p, branch.pos, msg, severity=sev, hint=hint)

    def _checkout(self, p: str, op: GitCommand, paired: set[int]) -> Iterator[Finding]:
        """A checkout or reset of a short SHA; a checkout of a branch or tag in a directory no
        clone here made (not in ``paired``)."""
        for w in op.operands[:1]:
            ref = val(op, w.value)
            if SHORT.match(ref) and not TAG.match(ref):
                yield self.at(p, w.pos, f"git {op.sub} {ref}: a short SHA can "
                              "become ambiguous; use the full 40-hex commit")
            elif (id(op) not in paired and op.sub == "checkout"
                  and REF.match(ref) and not FULL.match(ref)):
                # no clone into this directory here: judged on its own
                msg, sev, hint = moving(ref, "git checkout",
                                        "git checkout <40-hex commit>")
                yield self.at(p, w.pos, msg, severity=sev, hint=hint)

    def _fetch(self, p: str, ops: list[GitCommand], k: int) -> Iterator[Finding]:
        """`git fetch URL REF` (``ops[k]``): REF is what gets built unless a later checkout in
        this directory names a full commit."""
        op = ops[k]
        later = [o for o in ops[k + 1 :] if o.where == op.where]
        if any(o.sub in ("checkout", "reset") and any(
                FULL.match(val(o, w.value)) for w in o.operands) for o in later):
            return
        for w in op.operands[1:]:
            ref = val(op, w.value).removeprefix("refs/tags/").removeprefix(
                "refs/heads/")
            if FULL.match(ref) or not REF.match(ref) or ":" in ref:
                continue
            msg, sev, hint = moving(ref, "git fetch", "git fetch URL <40-hex "
                                    "commit> && git checkout FETCH_HEAD")
            yield self.at(p, w.pos, msg, severity=sev, hint=hint)

    def _pip_git_urls(self, p: str, insts: list[Instruction]) -> Iterator[Finding]:
        """`pip install git+URL@ref` in a stage's RUNs with a ref that is not a full commit."""
        for inst in insts:
            if inst.script is None:
                continue
            for cmd in inst.script.commands:
                if cmd.name != "pip":
                    continue
                for w in cmd.args:
                    m = GIT_URL.match(w.value)
                    if not m:
                        continue
                    ref = expand(m.group(2) or "", insts, inst.index)
                    if not FULL.match(ref):
                        what = f"@{ref}" if ref else "with no ref (default branch)"
                        yield self.at(p, w.pos, f"pip install git+… {what}: not pinned to "
                                      "a full commit", hint="use git+URL@<40-hex commit>")
