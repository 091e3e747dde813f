from __future__ import annotations

from collections.abc import Iterator

from cannery.lint.facts.workflow import WorkflowFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule
from cannery.lint.rules._image_tools import tool_call

# the subcommands that delete a manifest (resolving a tag to it first)
DELETES = {"crane": ("delete",), "skopeo": ("delete",), "oras": ("manifest delete",),
           "regctl": ("manifest delete", "manifest rm", "image delete", "image rm")}


class UnsafeTagDeletion(Rule):
    """## What it does
    Finds `skopeo delete`, `crane delete`, `oras manifest delete` and `regctl manifest
    delete`/`regctl image delete` given a reference by tag. The command line is read as the
    tool reads it: option values (`--creds "${{ secrets.X }}"`, `--username`) are never
    taken for the reference.

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
            call = tool_call(cmd)
            if call is None or call.sub not in DELETES.get(cmd.name, ()):
                continue
            for w in call.refs():
                if "@sha256:" in w.value:
                    continue
                yield self.at(facts.path, w.pos, f"{cmd.name} deletes the manifest {w.value} "
                              "resolves to, and with it every other tag on that image",
                              hint="delete only the tag (regctl tag delete)")
