from __future__ import annotations

from collections.abc import Iterator

from cannery.lint.facts.dockerfile import DockerfileFacts
from cannery.lint.facts.shell import Command
from cannery.lint.facts.workflow import WorkflowFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule
from cannery.lint.rules._image_tools import TOOLS, Tree, leaf_verb, tool_call

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

# What to use instead of a subcommand people reach for that the tool does not have
INSTEAD = {
    ("crane tag", "delete"): "crane has no tag deletion: `crane delete REF` deletes the "
    "manifest (and every tag on it); `regctl tag delete REF` deletes only the tag",
    ("crane tag", "rm"): "crane has no tag deletion: `regctl tag delete REF` deletes only "
    "the tag",
    ("skopeo", "tag"): "skopeo cannot tag: `skopeo copy docker://SRC docker://DST` copies "
    "under a new tag",
}


def hidden(cmd: Command) -> bool:
    """Whether a failure of ``cmd`` is hidden: it is the left side of `|| …`."""
    node: Any = cmd.node
    while node is not None and node.parent is not None:
        parent = node.parent
        if parent.type == "list":
            ops = [c.type for c in parent.children if not c.is_named]
            kids = parent.named_children
            if "||" in ops and kids and kids[0].id == node.id:
                return True
        if parent.type not in ("list", "redirected_statement", "pipeline"):
            return False
        node = parent
    return False


def _choices(tree: Tree, path: list[str]) -> list[str]:
    node: Tree | str = tree
    for p in path:
        if not isinstance(node, dict):
            return []
        node = node.get(p, "")
    return sorted(node) if isinstance(node, dict) else []


class UnknownSubcommand(Rule):
    """## What it does
    Finds a call of a well-known image tool — `crane`, `skopeo`, `docker` (and `docker
    buildx`), `regctl`, `oras`, `gh` — with a subcommand that tool does not have, at any
    level (`crane tag delete`, `skopeo tag`, `regctl tag remove`, `docker manifest
    delete`). The command line is read as the tool reads it: options and their values are
    skipped. A command that takes image references but is given a subcommand word (`delete`,
    `rm`, `ls`, `list`, `create`, …) where the first reference should be, followed by more
    operands, is reported too: `crane tag delete REF` (`crane tag` takes an image and a
    tag, and has no subcommands). An unknown top-level word of
    `docker` or `gh` is not reported (plugins, extensions and aliases add those), nor is a
    subcommand that comes from a variable. The finding is an error; the message says so
    when `|| true` (or any `||`) hides the failure.

    ## Why is this bad?
    The call always fails. Behind `|| true` it fails silently, and what it was for never
    happens: verl's workflows ran `crane tag delete REPO:tmp-… || true` after each merge, so
    the temporary per-arch tags were never deleted.

    ## Example
    ```yaml
    run: ./crane tag delete ${{ env.QUAY_REPO }}:tmp-a2-amd64 || true
    ```

    ## Use instead
    ```yaml
    run: regctl tag delete ${{ env.QUAY_REPO }}:tmp-a2-amd64
    ```
    (or `crane delete`, which deletes the manifest and every tag on it)
    """

    name = "unknown-subcommand"
    code = "CW010"
    severity = Severity.ERROR
    targets = ("dockerfile", "workflow")

    def check(self, facts: DockerfileFacts | WorkflowFacts, ctx: LintContext
              ) -> Iterator[Finding]:
        for cmd in facts.shell_commands():
            call = tool_call(cmd)
            if call is None:
                continue
            word = call.unknown
            parent = call.parent
            if word is None:
                word = leaf_verb(call)
                parent = " ".join([cmd.name, *(w.value for w in call.path)])
            if word is None:
                continue
            suffix = (": `||` hides the failure, so what it was for never happens"
                      if hidden(cmd) else ": the call always fails")
            hint = INSTEAD.get((parent, word.value))
            if hint is None:
                choices = _choices(TOOLS[cmd.name].tree, parent.split()[1:])
                import difflib  # only for a finding: its import is not free

                close = difflib.get_close_matches(word.value, choices, n=3)
                hint = (f"did you mean {', '.join(f'`{parent} {c}`' for c in close)}?" if close
                        else f"{parent} has: {', '.join(choices)}" if choices
                        else f"{parent} takes no subcommand")
            yield self.at(facts.path, word.pos, f"{parent} has no subcommand "
                          f"`{word.value}`{suffix}", hint=hint)
