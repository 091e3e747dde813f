"""The main workflow's jobs: ``check`` (`cannery render --check`, then `cannery ci plan`,
which writes what this event builds as the job's outputs) and the call jobs that run the
reusable workflows over those outputs, one call job per group (groups.py), each with a matrix
over its chunk indices."""

from __future__ import annotations

from collections.abc import Sequence

from cannery.catalog.models import Catalog
from cannery.render.actions import Pin
from cannery.render.workflow.common import PUBLISH_IF, reusable_path, setup
from cannery.render.workflow.groups import Group
from cannery.render.yamltext import Commented, Literal


def _out(name: str) -> str:
    return f"needs.check.outputs.{name}"


def check_job(
    cat: Catalog, pins: dict[str, Pin], cat_args: str, shape: Sequence[Group],
) -> dict[str, object]:
    """`render --check`, so a hand edit or a stale rendered file fails before anything
    builds; then `cannery ci plan`, which prints every output below as a line of JSON."""
    ci = cat.ci
    outputs = {"images": "${{ steps.plan.outputs.images }}"}
    if ci.build_branches:
        outputs["publish"] = "${{ steps.plan.outputs.publish }}"
    if ci.pull_requests:
        outputs["pr"] = "${{ steps.plan.outputs.pr }}"
    for i in range(len(shape)):
        outputs[f"build_{i}"] = f"${{{{ steps.plan.outputs.build_{i} }}}}"
        outputs[f"merge_{i}"] = f"${{{{ steps.plan.outputs.merge_{i} }}}}"
    env = {
        "EVENT": "${{ github.event_name }}",
        "BEFORE": "${{ github.event.before }}",
        "WANTED": "${{ inputs.images }}",
        **({"TAGS": "${{ inputs.tags }}"} if ci.dispatch_tags else {}),
    }
    return {
        "name": "rendered files match the catalog; images to build",
        "runs-on": "ubuntu-latest",
        "permissions": {"contents": "read"},
        "concurrency": {"group": "cannery-check-${{ github.ref }}", "cancel-in-progress": True},
        "outputs": outputs,
        "steps": [
            *setup(cat, pins, history=True),
            {"name": "cannery render --check", "run": f"cannery render --check{cat_args}"},
            {
                "name": "Images this event builds, in chunks (cannery ci plan)",
                "id": "plan",
                # event data reaches cannery as words of env, never in the script's text
                "env": env,
                "run": Literal(
                    f"cannery ci plan{cat_args} --event \"${{EVENT}}\" --ref \"${{GITHUB_REF}}\""
                    ' \\\n  --before "${BEFORE}" --images "${WANTED}"'
                    + (' --tags "${TAGS}"' if ci.dispatch_tags else "")
                    + ' >> "${GITHUB_OUTPUT}"\n'
                ),
            },
        ],
    }


def pr_cond(cat: Catalog) -> str:
    """When the pull-request legs (build into a layout, push nothing) run: on a pull request
    (carrying ``pr_label``, when set), and on a push to one of ``build_branches``."""
    cond = "github.event_name == 'pull_request'"
    if cat.ci.pr_label:  # PR_LABEL has no quote: safe inside '…'
        label = cat.ci.pr_label
        # adding another label to a labelled pull request starts (and cancels) nothing
        cond += (f" && contains(github.event.pull_request.labels.*.name, '{label}') && "
                 f"(github.event.action != 'labeled' || github.event.label.name == '{label}')")
    if cat.ci.build_branches:
        cond = (f"({cond}) || (github.event_name == 'push' && "
                "needs.check.outputs.publish == 'false')")
    return cond


def publish_cond(cat: Catalog) -> str:
    """With ``build_branches``: the check job's say that this event publishes."""
    return " && needs.check.outputs.publish == 'true'" if cat.ci.build_branches else ""


def _strategy(output: str) -> dict[str, object]:
    # one matrix job per chunk; a leg's failure never cancels another image's
    strategy: dict[str, object] = {"fail-fast": False}
    return strategy | {"matrix": {"chunk": f"${{{{ fromJSON({_out(output)}).chunks }}}}"}}


def _legs(output: str) -> Commented:
    # (the index is the matrix's chunk: zizmor's obfuscation audit flags any computed index)
    return Commented(f"${{{{ toJSON(fromJSON({_out(output)}).legs[matrix.chunk]) }}}}",
                     "zizmor: ignore[obfuscation]")


def _has(output: str) -> str:
    # (a matrix over an empty list fails the run: no legs, no call)
    return f"fromJSON({_out(output)}).count > 0"


def _uses(cat: Catalog, kind: str) -> Commented:
    # the documented form of a reusable workflow of the same repository and commit
    return Commented("./" + reusable_path(cat, kind), "zizmor: ignore[self-repository]")


def pr_call(cat: Catalog) -> dict[str, object]:
    """The pull-request legs: no secret is passed, and the reusable workflow names none."""
    return {
        "name": "pull request: build, push nothing",
        "needs": "check",
        # (parenthesised whole: in an expression && binds tighter than ||)
        "if": f"${{{{ ({pr_cond(cat)}) && {_has('pr')} }}}}",
        "permissions": {"contents": "read"},
        "strategy": _strategy("pr"),
        "uses": _uses(cat, "pr"),
        "with": {"legs": _legs("pr")},
    }


def _secrets(names: Sequence[str]) -> dict[str, str]:
    return {n: f"${{{{ secrets.{n} }}}}" for n in names}


def build_call(
    cat: Catalog, index: int, group: Group, shape: Sequence[Group],
) -> dict[str, object]:
    """One group's legs. A later wave (images built FROM another catalog image) runs after
    the previous wave's merges, whatever their result: a leg whose parent was built in this
    run and not merged finds no digest of it and fails, unbuilt."""
    out = f"build_{index}"
    cond = f"{PUBLISH_IF}{publish_cond(cat)} && {_has(out)}"
    needs: list[str] = ["check"]
    if group.wave > 0:
        needs += [f"merge-{j}" for j, g in enumerate(shape) if g.wave == group.wave - 1]
        cond = f"!cancelled() && needs.check.result == 'success' && {cond}"
    secrets = group.build_secrets(cat)
    return {
        "name": f"build (group {index})",
        "needs": needs[0] if len(needs) == 1 else needs,
        # registry secrets: never on a pull request, never in a fork (where they are empty)
        "if": f"${{{{ {cond} }}}}",
        "permissions": {"contents": "read"},
        "strategy": _strategy(out),
        "uses": _uses(cat, "build"),
        "with": {"legs": _legs(out), "force": "${{ inputs.force == true }}"},
        **({"secrets": _secrets(secrets)} if secrets else {}),
    }


def merge_call(cat: Catalog, index: int, group: Group) -> dict[str, object]:
    """One group's merges, after its legs, whatever their result: each merge first checks
    that every leg of its own image uploaded a descriptor, so one image's failed leg stops
    that image's merge only."""
    build, out = f"build-{index}", f"merge_{index}"
    return {
        "name": f"merge (group {index})",
        "needs": ["check", build],
        # (never on a pull request nor in a fork, as its build call job)
        "if": f"${{{{ !cancelled() && {PUBLISH_IF} && needs.{build}.result != 'skipped' && "
              f"{_has(out)} }}}}",
        "permissions": {
            "contents": "read",
            "id-token": Commented("write", "keyless signing: the OIDC token to certify"),
            "attestations": Commented("write", "keyless signing: GitHub stores the bundle"),
        },
        "strategy": _strategy(out),
        "uses": _uses(cat, "merge"),
        "with": {"legs": _legs(out),
                 **({"tags": "${{ inputs.tags || '' }}"} if cat.ci.dispatch_tags else {})},
        "secrets": _secrets(group.merge_secrets(cat)),
    }
