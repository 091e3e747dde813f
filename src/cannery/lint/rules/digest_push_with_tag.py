from __future__ import annotations

from collections.abc import Iterator

from cannery.lint.facts.workflow import WorkflowFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule
from cannery.lint.rules._workflow import builds


class DigestPushWithTag(Rule):
    """## What it does
    Finds a build step that pushes by digest (`outputs: …push-by-digest=true`) and also
    sets `tags:`.

    ## Why is this bad?
    A per-platform push by digest is meant to be merged into one index afterwards; tagging it
    as well points the tag at a single-platform image, so between the push and the merge (or
    forever, if the merge job fails) users pulling the tag get one architecture only.

    ## Example
    ```yaml
    with:
      tags: quay.io/ascend/verl:verl-8.5.2-910b-…
      outputs: type=image,name=quay.io/ascend/verl,push-by-digest=true,push=true
    ```

    ## Use instead
    ```yaml
    with:
      outputs: type=image,name=quay.io/ascend/verl,push-by-digest=true,name-canonical=true,push=true
    ```
    and tag once, in the merge job: `docker buildx imagetools create -t TAG DIGEST…`.
    """

    name = "digest-push-with-tag"
    code = "CW003"
    severity = Severity.ERROR
    targets = ("workflow",)

    def check(self, facts: WorkflowFacts, ctx: LintContext) -> Iterator[Finding]:
        for b in builds(facts):
            if b.outputs is None or "push-by-digest=true" not in b.outputs.text.replace(" ", ""):
                continue
            if b.tags is not None and b.tags.text.strip():
                yield self.finding(facts.path, b.tags.line, b.tags.column,
                                   "tags set on a push by digest: the tag points at one "
                                   "platform until (unless) the merge job runs",
                                   hint="drop tags here; tag in the merge job")
