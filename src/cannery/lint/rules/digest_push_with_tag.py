from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.facts.workflow import WorkflowFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule
from cannery.lint.rules._workflow import builds, expand_env, split_list


def tagged(ref: str) -> bool:
    """Whether an image reference carries a `:tag` (after its last `/`: a registry port is
    not a tag; a `@digest` is not either)."""
    ref = re.sub(r"\$\{\{.*?\}\}", "X", ref.split("@", 1)[0])
    return ":" in ref.rsplit("/", 1)[-1]


def output_names(outputs: str) -> list[str]:
    """The `name=` values of a buildx `outputs:` line (CSV; a quoted field may list several)."""
    import csv

    names: list[str] = []
    for line in outputs.splitlines():
        for row in csv.reader([line]):
            for field in row:
                key, eq, value = field.strip().partition("=")
                if eq and key.strip() == "name":
                    names += [n.strip() for n in value.split(",") if n.strip()]
    return names


class DigestPushWithTag(Rule):
    """## What it does
    Finds a build step that pushes by digest (`outputs: …push-by-digest=true`) while an
    image name in `tags:` or in the `name=` of `outputs:` carries a `:tag` (after its last
    `/`: `registry:5000/repo` has a port, not a tag). Repository-only `tags:` (the names the
    digest is pushed to) is the documented pattern and is not reported.

    ## Why is this bad?
    BuildKit refuses to push a tagged name by digest, so the build fails at the push, after
    the whole image was built. Even where a tag got through, it would point at one platform's
    image instead of the merged index.

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
            where = [(b.tags, n) for n in split_list(b.tags.text)] if b.tags is not None else []
            where += [(b.outputs, n) for n in output_names(b.outputs.text)]
            for value, name in where:
                full = expand_env(name, facts, b.job, b.step)
                if tagged(full):
                    yield self.finding(facts.path, value.line, value.column,
                                       f"{full} has a tag but is pushed by digest: BuildKit "
                                       "refuses to push a tagged name by digest",
                                       hint="name the repository only; tag the merged index "
                                       "in the merge job (imagetools create -t)")
                    break
