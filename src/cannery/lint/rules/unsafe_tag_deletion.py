from __future__ import annotations

from collections.abc import Iterator

from cannery.lint.facts.workflow import WorkflowFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule


class UnsafeTagDeletion(Rule):
    """## What it does
    Finds `skopeo delete`, `crane delete` and `oras manifest delete` given a reference by
    tag.

    ## Why is this bad?
    The registry API deletes manifests, not tags: these commands resolve the tag to its
    digest and delete the manifest, so every other tag that points at the same image (the
    release tag you meant to keep, `latest`) disappears too.

    ## Example
    ```yaml
    run: skopeo delete docker://quay.io/ascend/verl:tmp-${{ github.run_id }}-amd64
    ```

    ## Use instead
    ```yaml
    run: regctl tag delete quay.io/ascend/verl:tmp-${{ github.run_id }}-amd64
    ```
    (deletes only the tag where the registry supports it), or push temporaries by digest and
    never tag them.
    """

    name = "unsafe-tag-deletion"
    code = "CW006"
    severity = Severity.ERROR
    targets = ("workflow",)

    def check(self, facts: WorkflowFacts, ctx: LintContext) -> Iterator[Finding]:
        for _job, _step, cmd in facts.commands():
            deleting = (cmd.name in ("skopeo", "crane") and cmd.subcommand() == "delete") or (
                cmd.name == "oras" and cmd.argv[:2] == ["manifest", "delete"])
            if not deleting:
                continue
            for w in cmd.positional():
                if w.value in ("manifest", "delete") or "@sha256:" in w.value:
                    continue
                yield self.at(facts.path, w.pos, f"{cmd.name} deletes the manifest {w.value} "
                              "resolves to, and with it every other tag on that image",
                              hint="delete only the tag (regctl tag delete)")
