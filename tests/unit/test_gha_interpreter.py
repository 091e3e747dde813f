"""The GitHub Actions job-graph interpreter (tests/services/gha.py) on small workflows written
here: each semantic it claims, as GitHub documents it, including what GitHub refuses."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.services.gha import EmptyMatrix, GitHubLimit, Interpreter, StepCall, StepFailed
from tests.services.gha_events import Event, matches, triggers
from tests.services.gha_expr import ExpressionError, condition, evaluate, interpolate


def write(repo: Path, name: str, body: str) -> None:
    path = repo / ".github" / "workflows" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(body))


def run1(repo: Path, event: Event, **kw: Any) -> Any:
    runs = Interpreter(repo, **kw).run(event)
    assert len(runs) == 1, [r.workflow for r in runs]
    return runs[0]


def results(run: Any) -> dict[str, str]:
    return {k: j.result for k, j in run.jobs.items()}


# --- expressions

CTX = {
    "github": {"event_name": "push", "ref": "refs/heads/main",
               "event": {"pull_request": {"labels": [{"name": "build"}, {"name": "Docs"}]}}},
    "needs": {"lock-update": {"result": "success", "outputs": {"legs": '[{"a": 1}, {"a": 2}]'}}},
    "inputs": {"force": True, "images": ""},
}


@pytest.mark.parametrize(("expr", "want"), [
    ("github.event_name == 'PUSH'", True),  # strings compare ignoring case
    ("github.EVENT_NAME", "push"),  # so do property names
    ("'1' == 1", True), ("null == 0", True), ("true == 1", True), ("'' == 0", True),
    ("'abc' == 0", False), ("fromJSON('[]') == fromJSON('[]')", False),  # arrays: identity
    ("1 < 2", True), ("'a' < 'B'", True), ("0xff == 255", True), ("-2.5e1 == -25", True),
    ("inputs.images || 'all'", "all"), ("inputs.force && 'yes'", "yes"),
    ("!inputs.images", True), ("!!inputs.force", True), ("github.missing.deeper", None),
    ("contains(github.event.pull_request.labels.*.name, 'docs')", True),
    ("contains(github.event.pull_request.labels.*.name, 'doc')", False),
    ("contains('Hello world', 'WORLD')", True),
    ("startsWith(github.ref, 'refs/HEADS/')", True), ("endsWith(github.ref, '/main')", True),
    ("format('{0}-{{x}}-{1}', 'a', 3)", "a-{x}-3"), ("join(fromJSON('[1, \"b\"]'), '+')", "1+b"),
    ("join(github.event.pull_request.labels.*.name)", "build,Docs"),
    ("fromJSON(needs.lock-update.outputs.legs)[1].a", 2),
    ("needs['lock-update'].result", "success"), ("toJSON(fromJSON('{\"a\": [1]}'))",
                                                  '{\n  "a": [\n    1\n  ]\n}'),
    ("'it''s'", "it's"), ("(1 == 1) && (2 != 2) || 'x'", "x"),
    ("false && fromJSON('')", False),  # short-circuit: the right side is not evaluated
])
def test_expression_values(expr: str, want: Any) -> None:
    assert evaluate(expr, CTX) == want


@pytest.mark.parametrize("expr", ["nope.x", "unknownFn(1)", "1 +", "github.", "fromJSON('{')",
                                  "success()", "format('{1}', 'a')"])
def test_expressions_github_refuses(expr: str) -> None:
    with pytest.raises(ExpressionError):
        evaluate(expr, CTX)


def test_interpolation_keeps_a_whole_expressions_type_and_makes_text_otherwise() -> None:
    assert interpolate("${{ inputs.force }}", CTX) is True
    assert interpolate("${{ fromJSON('[1]') }}", CTX) == [1]
    assert interpolate("v${{ 1 }}-${{ inputs.force }}-${{ null }}-${{ fromJSON('[1]') }}",
                       CTX) == "v1-true--Array"


def test_if_without_a_status_function_means_success_and() -> None:
    def failed(name: str) -> bool:
        return {"success": False, "failure": True, "always": True, "cancelled": False}[name]

    assert not condition("inputs.force", CTX, failed)
    assert condition("always() && inputs.force", CTX, failed)
    assert condition("${{ failure() }}", CTX, failed)
    assert not condition(None, CTX, failed)
    # text around ${{ }} makes a non-empty string, which is true (GitHub's pitfall)
    assert condition("${{ false }} || false", CTX, lambda n: True)


# --- triggers

def test_filter_patterns() -> None:
    assert matches(["release/**"], "release/a/b") and not matches(["release/*"], "release/a/b")
    assert matches(["v[0-9]+.*"], "v12.x") and not matches(["v[0-9]+.*"], "vx")
    assert not matches(["**", "!docs/**"], "docs/a.md") and matches(["**", "!docs/**"], "a.py")
    assert matches(["**", "!docs/**", "docs/keep.md"], "docs/keep.md")


PUSH_WF = {True: {"push": {"branches": ["main", "release/**"], "paths": ["src/**"]}}, "jobs": {}}


@pytest.mark.parametrize(("event", "want"), [
    (Event.push("refs/heads/main", changed=["src/a.py"]), True),
    (Event.push("refs/heads/main", changed=["docs/a.md"]), False),  # paths filter
    (Event.push("refs/heads/release/1.0", changed=["src/a.py"]), True),
    (Event.push("refs/heads/topic", changed=["src/a.py"]), False),
    (Event.push("refs/tags/v1"), False),  # only branches filtered: a tag push never triggers
    (Event.pull_request(), False), (Event.schedule(), False),
])
def test_push_filters(event: Event, want: bool) -> None:
    assert triggers(PUSH_WF, event) is want


def test_tags_pull_request_release_schedule_filters() -> None:
    tags = {"on": {"push": {"tags": ["v*"]}}}
    assert triggers(tags, Event.push("refs/tags/v1.2", changed=["x"]))
    assert not triggers(tags, Event.push("refs/heads/main"))  # only tags filtered
    pr = {"on": {"pull_request": {"branches": ["main"]}}}
    assert triggers(pr, Event.pull_request(base="main"))
    assert not triggers(pr, Event.pull_request(base="dev"))
    assert not triggers(pr, Event.pull_request(action="labeled"))  # not a default type
    assert triggers({"on": {"pull_request": {"types": ["labeled"]}}},
                    Event.pull_request(action="labeled"))
    rel = {"on": {"release": {"types": ["published"]}}}
    assert triggers(rel, Event.release("v1")) and not triggers(rel, Event.release("v1", "created"))
    cron = {"on": {"schedule": [{"cron": "0 3 * * *"}]}}
    assert triggers(cron, Event.schedule("0 3 * * *")) and not triggers(cron, Event.schedule("1"))
    assert not triggers({"on": "workflow_call"}, Event("workflow_call"))


# --- the job graph

GRAPH = """
on: [push, workflow_dispatch]
jobs:
  a:
    runs-on: ubuntu-latest
    steps: [{id: s, run: "step a"}]
  b:
    needs: a
    runs-on: ubuntu-latest
    steps: [{run: "step b"}]
  c:
    needs: b
    if: ${{ !cancelled() }}
    runs-on: ubuntu-latest
    steps: [{run: "step c"}]
  d:
    needs: c
    runs-on: ubuntu-latest
    steps: [{run: "step d"}]
  e:
    needs: [a]
    if: failure()
    runs-on: ubuntu-latest
    steps: [{run: "report"}]
  f:
    needs: [c]
    if: always() && needs.c.result == 'success'
    runs-on: ubuntu-latest
    steps: [{run: "step f"}]
"""


def failing(*names: str) -> Any:
    def step(call: StepCall) -> Mapping[str, str]:
        if call.run in names:
            raise StepFailed(call.run)
        return {}

    return step


def test_a_failed_need_skips_its_dependant_and_not_cancelled_runs_after_a_skipped_need(
        tmp_path: Path) -> None:
    write(tmp_path, "g.yml", GRAPH)
    run = run1(tmp_path, Event.push(), run_step=failing("step a"))
    # b: its need failed; c: !cancelled() runs though b was skipped; d: default success()
    # looks at every ancestor (a failed); e: failure(); f: always() and c succeeded
    assert results(run) == {"a": "failure", "b": "skipped", "c": "success", "d": "skipped",
                            "e": "success", "f": "success"}
    assert [g.job for g in run.ran()] == ["a", "c", "e", "f"]


def test_all_succeed_in_needs_order(tmp_path: Path) -> None:
    write(tmp_path, "g.yml", GRAPH)
    run = run1(tmp_path, Event.dispatch())
    assert results(run) == {"a": "success", "b": "success", "c": "success", "d": "success",
                            "e": "skipped", "f": "success"}
    assert [g.job for g in run.ran()] == ["a", "b", "c", "d", "f"]


def test_needs_cycles_and_unknown_needs_are_refused(tmp_path: Path) -> None:
    write(tmp_path, "g.yml", "on: push\njobs:\n  a: {needs: b, runs-on: x, steps: []}\n"
                             "  b: {needs: a, runs-on: x, steps: []}\n")
    with pytest.raises(GitHubLimit, match="cycle"):
        Interpreter(tmp_path).run(Event.push())
    write(tmp_path, "g.yml", "on: push\njobs:\n  a: {needs: zz, runs-on: x, steps: []}\n")
    with pytest.raises(GitHubLimit, match="unknown job 'zz'"):
        Interpreter(tmp_path).run(Event.push())


# --- matrices

def _matrix_wf(matrix: str, extra: str = "") -> str:
    return f"""
on: push
jobs:
  m:
    runs-on: ubuntu-latest
    strategy:
{textwrap.indent(matrix.strip(), " " * 6)}
{extra}
    steps: [{{run: "leg ${{{{ matrix.os }}}} ${{{{ matrix.py }}}} ${{{{ matrix.extra }}}}"}}]
"""


def test_matrix_product_exclude_include_and_max_parallel(tmp_path: Path) -> None:
    write(tmp_path, "m.yml", _matrix_wf("""
max-parallel: 2
matrix:
  os: [linux, mac]
  py: ['3.10', '3.11']
  exclude: [{os: mac, py: '3.10'}]
  include:
    - {os: linux, extra: x}   # added to both linux legs, which it does not overwrite
    - {py: '3.11', extra: y}  # added to the 3.11 legs (overwrites an include's key, not os/py)
    - {os: win, py: '3.12'}   # matches no leg: a leg of its own
    - {os: bsd}               # a leg of its own too: an include's leg takes no later include
"""))
    run = run1(tmp_path, Event.push())
    assert [g.matrix for g in run.ran()] == [
        {"os": "linux", "py": "3.10", "extra": "x"}, {"os": "linux", "py": "3.11", "extra": "y"},
        {"os": "mac", "py": "3.11", "extra": "y"}, {"os": "win", "py": "3.12"}, {"os": "bsd"}]
    assert {g.max_parallel for g in run.legs} == {2}
    assert run.legs[0].steps[0].run == "leg linux 3.10 x"


def test_the_include_example_of_githubs_documentation() -> None:
    from tests.services.gha import _matrix

    spec = {"fruit": ["apple", "pear"], "animal": ["cat", "dog"], "include": [
        {"color": "green"}, {"color": "pink", "animal": "cat"},
        {"fruit": "apple", "shape": "circle"}, {"fruit": "banana"},
        {"fruit": "banana", "animal": "cat"}]}
    assert _matrix(spec, "doc") == [
        {"fruit": "apple", "animal": "cat", "color": "pink", "shape": "circle"},
        {"fruit": "apple", "animal": "dog", "color": "green", "shape": "circle"},
        {"fruit": "pear", "animal": "cat", "color": "pink"},
        {"fruit": "pear", "animal": "dog", "color": "green"},
        {"fruit": "banana"}, {"fruit": "banana", "animal": "cat"}]


def test_a_257_leg_matrix_is_refused_and_256_runs(tmp_path: Path) -> None:
    many = ",".join(map(str, range(257)))
    write(tmp_path, "m.yml", _matrix_wf(f"matrix:\n  os: ${{{{ fromJSON('[{many}]') }}}}"))
    with pytest.raises(GitHubLimit, match="257 matrix legs, over GitHub's 256"):
        Interpreter(tmp_path).run(Event.push())
    half = ",".join(map(str, range(128)))
    write(tmp_path, "m.yml", _matrix_wf(f"matrix:\n  a: [{half}]\n  b: [0, 1]"))
    assert len(run1(tmp_path, Event.push()).ran()) == 256


def test_an_empty_matrix_is_an_error_or_a_failed_job_but_not_when_if_skips_it(
        tmp_path: Path) -> None:
    write(tmp_path, "m.yml", _matrix_wf("matrix:\n  include: ${{ fromJSON('[]') }}"))
    with pytest.raises(EmptyMatrix):
        Interpreter(tmp_path).run(Event.push())
    assert results(run1(tmp_path, Event.push(), empty_matrix="fail")) == {"m": "failure"}
    write(tmp_path, "m.yml", _matrix_wf("matrix:\n  os: ${{ fromJSON('[]') }}",
                                        "    if: false"))
    assert results(run1(tmp_path, Event.push())) == {"m": "skipped"}


FROM_OUTPUT = """
on: push
jobs:
  check:
    runs-on: ubuntu-latest
    outputs:
      legs: ${{ steps.plan.outputs.legs }}
      any: ${{ steps.plan.outputs.any }}
    steps:
      - id: plan
        run: cannery ci plan
  build:
    needs: check
    if: needs.check.outputs.any == 'true'
    runs-on: ${{ matrix.runner }}
    strategy:
      fail-fast: %s
      matrix:
        include: ${{ fromJSON(needs.check.outputs.legs) }}
    steps:
      - run: build ${{ matrix.image }}
  merge:
    needs: build
    runs-on: ubuntu-latest
    steps: [{run: merge}]
"""


def _plan(legs: list[dict[str, str]]) -> Any:
    def step(call: StepCall) -> Mapping[str, str]:
        if call.run == "cannery ci plan":
            return {"legs": json.dumps(legs), "any": "true" if legs else "false"}
        if call.run == "build b":
            raise StepFailed("b")
        return {}

    return step


def test_a_matrix_from_json_of_a_job_output_and_fail_fast(tmp_path: Path) -> None:
    legs = [{"image": i, "runner": f"r-{i}"} for i in ("a", "b", "c")]
    write(tmp_path, "w.yml", FROM_OUTPUT % "true")
    run = run1(tmp_path, Event.push(), run_step=_plan(legs))
    assert [(g.job, g.matrix.get("image"), g.runs_on, g.result) for g in run.legs] == [
        ("check", None, "ubuntu-latest", "success"), ("build", "a", "r-a", "success"),
        ("build", "b", "r-b", "failure"), ("build", "c", None, "cancelled")]
    assert results(run) == {"check": "success", "build": "failure", "merge": "skipped"}
    write(tmp_path, "w.yml", FROM_OUTPUT % "false")  # every leg runs; the job still fails
    run = run1(tmp_path, Event.push(), run_step=_plan(legs))
    assert [g.result for g in run.ran("build")] == ["success", "failure", "success"]
    # no legs: the if: guard skips the job, and its dependant
    run = run1(tmp_path, Event.push(), run_step=_plan([]))
    assert results(run) == {"check": "success", "build": "skipped", "merge": "skipped"}


# --- steps, outputs, env, secrets

STEPS = """
on: [push, pull_request]
env: {LEVEL: workflow, KEEP: w}
jobs:
  j:
    runs-on: ubuntu-latest
    env: {LEVEL: job, TOKEN: "${{ secrets.REGISTRY_PASSWORD }}", USER: "${{ vars.USER }}"}
    outputs:
      first: ${{ steps.one.outputs.value }}
      outcome: ${{ steps.two.outcome }}/${{ steps.two.conclusion }}
    steps:
      - {id: one, run: "echo one", env: {LEVEL: step}}
      - {id: two, run: "fails", continue-on-error: true}
      - {id: three, run: "fails"}
      - {name: skipped after a failure, run: "never"}
      - {name: on failure, if: failure(), run: "cleanup ${{ steps.one.outputs.value }}"}
      - {name: always, if: always(), run: "always ${{ job.status }}"}
"""


def test_steps_if_outputs_env_and_continue_on_error(tmp_path: Path) -> None:
    write(tmp_path, "s.yml", STEPS)

    def step(call: StepCall) -> Mapping[str, str]:
        if call.run == "fails":
            raise StepFailed("fails")
        return {"value": "v1"} if call.id == "one" else {}

    run = run1(tmp_path, Event.push(), run_step=step, secrets=["REGISTRY_PASSWORD"],
               variables={"USER": "bot"})
    (leg,) = run.legs
    assert [s.run for s in leg.steps] == ["echo one", "fails", "fails", "cleanup v1",
                                          "always failure"]
    first = leg.steps[0].env
    assert (first["LEVEL"], first["KEEP"], first["USER"]) == ("step", "w", "bot")
    assert first["TOKEN"] == "<secret:REGISTRY_PASSWORD>"
    assert leg.steps[1].env["LEVEL"] == "job"
    assert run.jobs["j"].result == "failure"
    assert run.jobs["j"].outputs == {"first": "v1", "outcome": "failure/success"}
    assert leg.secrets == {"REGISTRY_PASSWORD"}


def test_a_pull_request_from_a_fork_gets_no_secrets(tmp_path: Path) -> None:
    write(tmp_path, "s.yml", STEPS)
    run = run1(tmp_path, Event.pull_request(fork=True), secrets=["REGISTRY_PASSWORD"])
    assert run.legs[0].steps[0].env["TOKEN"] == "" and not run.legs[0].secrets
    run = run1(tmp_path, Event.pull_request(), secrets=["REGISTRY_PASSWORD"])
    assert run.legs[0].secrets == {"REGISTRY_PASSWORD"}


def test_dispatch_inputs_are_typed_and_their_text_is_in_the_event(tmp_path: Path) -> None:
    write(tmp_path, "d.yml", """
on:
  workflow_dispatch:
    inputs:
      images: {type: string, default: ""}
      force: {type: boolean, default: false}
jobs:
  j:
    if: inputs.force && github.event.inputs.force == 'true'
    runs-on: x
    steps: [{run: "build ${{ inputs.images }}"}]
""")
    run = run1(tmp_path, Event.dispatch({"images": "a b", "force": True}))
    assert [s.run for s in run.legs[0].steps] == ["build a b"]
    assert results(run1(tmp_path, Event.dispatch({"images": "a"}))) == {"j": "skipped"}
    with pytest.raises(ValueError, match="undeclared inputs"):
        Interpreter(tmp_path).run(Event.dispatch({"nope": "1"}))


# --- reusable workflows

CALLER = """
on: [push, pull_request]
jobs:
  check:
    runs-on: ubuntu-latest
    outputs: {chunks: "${{ steps.p.outputs.chunks }}", legs: "${{ steps.p.outputs.legs }}"}
    steps: [{id: p, run: plan}]
  build:
    needs: check
    if: needs.check.outputs.chunks != '[]'
    strategy:
      max-parallel: 3
      matrix:
        chunk: ${{ fromJSON(needs.check.outputs.chunks) }}
    uses: ./.github/workflows/build.yml
    with:
      legs: ${{ toJSON(fromJSON(needs.check.outputs.legs)[matrix.chunk]) }}
      push: ${{ github.event_name != 'pull_request' }}
    secrets:
      password: ${{ secrets.REGISTRY_PASSWORD }}
  report:
    needs: build
    runs-on: ubuntu-latest
    steps: [{run: "digest ${{ needs.build.outputs.digest }}"}]
"""

CALLED = """
on:
  workflow_call:
    inputs:
      legs: {type: string, required: true}
      push: {type: boolean, default: false}
    secrets:
      password: {required: false}
      other: {required: false}
    outputs:
      digest: {value: "${{ jobs.leg.outputs.digest }}"}
jobs:
  leg:
    runs-on: ${{ matrix.runner }}
    strategy:
      matrix:
        include: ${{ fromJSON(inputs.legs) }}
    outputs: {digest: "${{ steps.b.outputs.digest }}"}
    env: {PASSWORD: "${{ secrets.password }}", OTHER: "${{ secrets.other }}"}
    steps:
      - {id: b, run: "build ${{ matrix.image }} push=${{ inputs.push }}"}
"""


def _chunks(call: StepCall) -> Mapping[str, str]:
    if call.run == "plan":
        legs = [[{"image": "a", "runner": "x"}, {"image": "b", "runner": "y"}],
                [{"image": "c", "runner": "x"}]]
        return {"chunks": "[0, 1]", "legs": json.dumps(legs)}
    if call.run and call.run.startswith("build"):
        return {"digest": f"sha256:{call.matrix['image']}"}
    return {}


def test_a_reusable_workflow_called_with_a_matrix(tmp_path: Path) -> None:
    write(tmp_path, "main.yml", CALLER)
    write(tmp_path, "build.yml", CALLED)
    run = run1(tmp_path, Event.push(), run_step=_chunks,
               secrets=["REGISTRY_PASSWORD", "OTHER_SECRET"])
    built = run.ran("build/leg")
    assert [(g.matrix["image"], g.runs_on, g.steps[0].run) for g in built] == [
        ("a", "x", "build a push=true"), ("b", "y", "build b push=true"),
        ("c", "x", "build c push=true")]
    assert built[0].leg == "build (0) / leg (a, x)"
    # a secret not passed is empty; the passed one reaches the legs under its new name
    assert {g.env["OTHER"] for g in built} == {""}
    assert {g.env["PASSWORD"] for g in built} == {"<secret:REGISTRY_PASSWORD>"}
    assert all(g.secrets == {"REGISTRY_PASSWORD"} for g in built)
    assert [g.inputs["push"] for g in run.ran("build")] == [True, True]
    assert {g.max_parallel for g in run.ran("build")} == {3}
    # the output is mapped back through on.workflow_call.outputs; a matrix call job's
    # outputs are the last leg's
    assert run.jobs["build"].outputs == {"digest": "sha256:c"}
    assert run.ran("report")[0].steps[0].run == "digest sha256:c"
    pr = run1(tmp_path, Event.pull_request(), run_step=_chunks, secrets=["REGISTRY_PASSWORD"])
    assert {g.steps[0].run.split()[-1] for g in pr.ran("build/leg")} == {"push=false"}


def test_secrets_inherit_passes_every_secret(tmp_path: Path) -> None:
    write(tmp_path, "main.yml", CALLER.replace(
        "    secrets:\n      password: ${{ secrets.REGISTRY_PASSWORD }}\n",
        "    secrets: inherit\n"))
    write(tmp_path, "build.yml", CALLED.replace("secrets.other", "secrets.OTHER_SECRET"))
    run = run1(tmp_path, Event.push(), run_step=_chunks,
               secrets=["REGISTRY_PASSWORD", "OTHER_SECRET"])
    legs = run.ran("build/leg")
    assert {g.env["OTHER"] for g in legs} == {"<secret:OTHER_SECRET>"}
    assert {g.env["PASSWORD"] for g in legs} == {""}  # inherit keeps the caller's names


@pytest.mark.parametrize(("change", "error"), [
    (("legs: ${{ toJSON", "lgs: ${{ toJSON"), r"inputs \['lgs'\] are not declared"),
    (("push: ${{ github.event_name != 'pull_request' }}", "push: 'yes'"),
     "input 'push' wants a boolean"),
    (("password: ${{ secrets.REGISTRY_PASSWORD }}", "pw: ${{ secrets.REGISTRY_PASSWORD }}"),
     r"secrets \['pw'\] are not declared"),
    (("      legs: ${{ toJSON(fromJSON(needs.check.outputs.legs)[matrix.chunk]) }}\n", ""),
     "required input 'legs' not given"),
])
def test_a_call_github_would_refuse(tmp_path: Path, change: tuple[str, str], error: str) -> None:
    write(tmp_path, "main.yml", CALLER.replace(*change))
    write(tmp_path, "build.yml", CALLED)
    with pytest.raises(GitHubLimit, match=error):
        Interpreter(tmp_path, run_step=_chunks).run(Event.push())


def _chain(repo: Path, levels: int) -> None:
    """main.yml calling l1.yml calling l2.yml ... down to l<levels-1>.yml."""
    for n in range(levels):
        name = "main.yml" if n == 0 else f"l{n}.yml"
        on = "push" if n == 0 else "workflow_call"
        job = (f"    uses: ./.github/workflows/l{n + 1}.yml\n" if n < levels - 1
               else "    runs-on: x\n    steps: [{run: deepest}]\n")
        write(repo, name, f"on: {on}\njobs:\n  j{n}:\n{job}")


def test_four_levels_of_workflows_run_and_five_are_refused(tmp_path: Path) -> None:
    _chain(tmp_path, 4)
    run = run1(tmp_path, Event.push())
    assert [g.job for g in run.ran()] == ["j0", "j0/j1", "j0/j1/j2", "j0/j1/j2/j3"]
    _chain(tmp_path, 5)
    with pytest.raises(GitHubLimit, match="nested over 4 levels"):
        Interpreter(tmp_path).run(Event.push())


def test_more_than_20_unique_reusable_workflows_are_refused(tmp_path: Path) -> None:
    def calls(n: int) -> str:
        return "on: push\njobs:\n" + "".join(
            f"  c{i}:\n    uses: ./.github/workflows/r{i}.yml\n" for i in range(n))

    for i in range(21):
        write(tmp_path, f"r{i}.yml", "on: workflow_call\njobs:\n  j: {runs-on: x, steps: []}\n")
    write(tmp_path, "main.yml", calls(20))
    assert len(run1(tmp_path, Event.push()).ran()) == 40
    write(tmp_path, "main.yml", calls(21))
    with pytest.raises(GitHubLimit, match="over 20 unique reusable workflows"):
        Interpreter(tmp_path).run(Event.push())


def test_a_workflow_file_over_500_kb_is_refused(tmp_path: Path) -> None:
    pad = "# " + "x" * 98 + "\n"
    body = "on: push\njobs:\n  j: {runs-on: x, steps: []}\n"
    write(tmp_path, "big.yml", body + pad * ((500_000 - len(body)) // len(pad)))
    assert len(run1(tmp_path, Event.push()).ran()) == 1
    write(tmp_path, "big.yml", body + pad * (500_000 // len(pad) + 1))
    with pytest.raises(GitHubLimit, match="over GitHub's 500000"):
        Interpreter(tmp_path).run(Event.push())


@pytest.mark.parametrize(("main", "called", "error"), [
    ("  c:\n    uses: ./.github/workflows/r.yml\n    steps: [{run: x}]\n",
     "on: workflow_call\njobs:\n  j: {runs-on: x, steps: []}\n", "a call job has no steps"),
    ("  c:\n    uses: ./.github/workflows/r.yml\n",
     "on: push\njobs:\n  j: {runs-on: x, steps: []}\n", "has no on.workflow_call"),
    ("  c:\n    uses: ./.github/workflows/r.yml\n",
     "on:\n  workflow_call:\n    secrets: {TOKEN_X: {required: true}}\n"
     "jobs:\n  j: {runs-on: x, steps: []}\n", r"required secrets \['TOKEN_X'\] not passed"),
    ("  c:\n    uses: octo/repo/.github/workflows/r.yml@v1\n", "", "only local reusable"),
])
def test_reusable_workflow_calls_github_refuses(tmp_path: Path, main: str, called: str,
                                                error: str) -> None:
    write(tmp_path, "main.yml", "on: push\njobs:\n" + main)
    if called:
        write(tmp_path, "r.yml", called)
    with pytest.raises(GitHubLimit, match=error):
        Interpreter(tmp_path).run(Event.push())
