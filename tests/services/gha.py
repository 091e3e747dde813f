"""An interpreter of GitHub Actions' job graph: which workflows an event triggers, which jobs
and matrix legs then run, in what order, with what inputs, env and secrets. It does not run
shell: each step goes to a callback the test gives (``run_step(call) -> outputs``), which may
run the step for real, stand in for it, or fail it (raise ``StepFailed``).

Written from GitHub's documentation (workflow syntax, contexts, expressions, reusable
workflows, Actions limits), not from a runner's code:

- ``needs`` orders jobs (run here one at a time, in file order where needs allow); a job's
  ``if:`` without a status function means ``success() && (...)``; for a job, ``success()`` is
  true when every ancestor job (needs, transitively) succeeded, ``failure()`` when one failed,
  ``always()`` always, ``cancelled()`` never (no run is cancelled here). So a skipped or failed
  need skips a dependant with the default ``if:``, and ``!cancelled()`` runs after them.
- ``strategy.matrix``: a cartesian product of its lists, ``exclude`` removing (partial match)
  and ``include`` adding keys to each combination whose original values it does not
  overwrite, or a combination of its own; any part may be an expression (``fromJSON``).
  ``fail-fast`` (default true): after a failed leg the rest are cancelled; a leg's
  ``continue-on-error`` keeps the job's result. A matrix job's outputs are the last leg's
  non-empty values (GitHub gives whichever leg wrote last). ``max-parallel`` is recorded.
- a call job (``uses: ./.github/workflows/X.yml``) runs that workflow's jobs per leg, with
  ``with:`` checked against ``on.workflow_call.inputs`` (unknown, missing required or
  mistyped input: an error; defaults filled), ``secrets:`` a map or ``inherit`` (a secret not
  passed is empty; an undeclared or missing required one an error) and the workflow's
  ``outputs`` mapped back from its ``jobs`` context; its ``github`` context is the caller's.
- steps: ``if:`` (default ``success()``: no earlier step failed), ``env`` (workflow, job, then
  step), ``with``, ``run`` with ``${{ }}`` evaluated, ``id`` -> ``steps.<id>.outputs``/
  ``outcome``/``conclusion``, ``continue-on-error``; the callback also gets GitHub's default
  variables (``GITHUB_REF``, ``GITHUB_EVENT_NAME``, ``RUNNER_TEMP``...) and the ``runner``
  context (the ``runner`` hook's, e.g. a temp directory per leg).
- secrets: the test gives names (each value then a marker ``<secret:NAME>``) or values; a pull
  request from a fork gets none but ``GITHUB_TOKEN``. Each leg records the repository secrets
  whose values reach its steps' env, ``with:`` or script (a call job's leg: those it passes).
- the trace: every leg in the order it ran (``Run.legs``), named by its job's path (caller
  job ids and the job id, ``build-0/build``) and its matrix values at each level; every job's
  result and outputs by path (``Run.jobs``).
- limits, raised as ``GitHubLimit``: a workflow file over 500 KB (500,000 bytes), a matrix over
  256 legs, an empty matrix (GitHub fails the job; ``empty_matrix="fail"`` makes it a failed
  job instead), more than 4 levels of workflows (the caller and 3 nested), more than 20
  unique reusable workflows reachable from one file (both counted statically, as GitHub
  checks them before a run starts). Newer github.com allows more (10 levels, 50 workflows);
  these are the documented limits that hold everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any

import yaml

from tests.services.gha_events import Event, dispatch_inputs, on_call, triggers
from tests.services.gha_expr import condition, interpolate, text, to_string

MAX_FILE_BYTES = 500_000
MAX_MATRIX = 256
MAX_LEVELS = 4
MAX_REUSABLE = 20
TOKEN = "GITHUB_TOKEN"


class GitHubLimit(Exception):
    """GitHub would refuse this workflow or fail this job for a limit or a malformed graph."""


class EmptyMatrix(GitHubLimit):
    """A matrix with no legs: GitHub fails the job."""


class StepFailed(Exception):
    """Raised by a ``run_step`` callback: the step failed (a non-zero exit)."""


def marker(name: str) -> str:
    return f"<secret:{name}>"


@dataclass
class StepCall:
    """One step as the runner would start it: everything already evaluated."""

    workflow: str  # the file, relative to the repository
    job: str  # the job's path: caller job ids and the job id, joined by "/"
    leg: str  # unique per leg: the job's path and each level's matrix values
    matrix: dict[str, Any]
    step: dict[str, Any]  # as written
    name: str
    id: str | None
    uses: str
    run: str | None
    with_: dict[str, str]
    env: dict[str, str]
    runner: dict[str, Any]
    inputs: dict[str, Any]  # the inputs context of the workflow the step is in
    defaults: dict[str, str] = field(default_factory=dict)  # GitHub's default env variables


RunStep = Callable[[StepCall], Mapping[str, str] | None]


@dataclass
class Leg:
    """The trace of one job leg that ran (or was cancelled by fail-fast)."""

    workflow: str
    job: str
    job_id: str
    leg: str
    matrix: dict[str, Any]
    runs_on: Any
    environment: Any
    concurrency: Any
    max_parallel: Any
    env: dict[str, str]
    inputs: dict[str, Any]
    steps: list[StepCall] = field(default_factory=list)
    secrets: set[str] = field(default_factory=set)  # repository secret names reaching the leg
    result: str = "success"
    outputs: dict[str, str] = field(default_factory=dict)
    uses: str = ""  # a call job's workflow


@dataclass
class Job:
    result: str  # success | failure | cancelled | skipped
    outputs: dict[str, Any] = field(default_factory=dict)


@dataclass
class Run:
    """One triggered workflow's run: every job's result by path, and every leg in order."""

    workflow: str
    jobs: dict[str, Job] = field(default_factory=dict)
    legs: list[Leg] = field(default_factory=list)

    def ran(self, job: str | None = None) -> list[Leg]:
        return [g for g in self.legs if g.result != "cancelled" and (job is None or g.job == job)]


@dataclass
class _Scope:
    """What a workflow's jobs see: its file, the inputs and secrets it was given, its depth."""

    path: str
    doc: dict[str, Any]
    inputs: dict[str, Any]
    secrets: dict[str, str]
    level: int
    prefix: str  # the calling job's path and leg, "" at the top
    leg_prefix: str


class Interpreter:
    """Runs a repository's workflows for an event. ``secrets``: names (values become markers)
    or name -> value; ``runner``: the ``runner`` context for a leg name (e.g. a temp dir)."""

    def __init__(self, repo: Path, run_step: RunStep | None = None, *,
                 secrets: Iterable[str] | Mapping[str, str] = (),
                 variables: Mapping[str, str] | None = None, repository: str = "owner/repo",
                 runner: Callable[[str], dict[str, Any]] | None = None,
                 empty_matrix: str = "error") -> None:
        self.repo = repo
        self.run_step: RunStep = run_step or (lambda call: {})
        given = secrets if isinstance(secrets, Mapping) else {n: marker(n) for n in secrets}
        self.secrets = {TOKEN: marker(TOKEN), **given}
        self.vars = dict(variables or {})
        self.repository = repository
        self.runner = runner or (lambda leg: {"os": "Linux", "arch": "X64", "name": leg,
                                              "temp": "/tmp/runner", "tool_cache": "/opt/hosted"})
        self.empty_matrix = empty_matrix
        self._docs: dict[str, dict[str, Any]] = {}

    # --- files
    def load(self, rel: str) -> dict[str, Any]:
        if rel not in self._docs:
            path = self.repo / rel
            if not path.is_file():
                raise GitHubLimit(f"{rel}: no such workflow file")
            size = path.stat().st_size
            if size > MAX_FILE_BYTES:
                raise GitHubLimit(f"{rel}: {size} bytes, over GitHub's {MAX_FILE_BYTES}")
            doc = yaml.safe_load(path.read_text())
            if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), dict):
                raise GitHubLimit(f"{rel}: not a workflow (no jobs)")
            self._docs[rel] = doc
        return self._docs[rel]

    def workflows(self) -> list[str]:
        base = self.repo / ".github" / "workflows"
        files = sorted([*base.glob("*.yml"), *base.glob("*.yaml")])
        return [str(p.relative_to(self.repo)) for p in files]

    def check_limits(self, rel: str) -> None:
        """GitHub's static limits for a top-level workflow: nesting levels, unique reusable
        workflows reachable from it, and every file's size."""
        seen: set[str] = set()

        def walk(path: str, level: int) -> None:
            if level > MAX_LEVELS:
                raise GitHubLimit(f"{rel}: reusable workflows nested over {MAX_LEVELS} levels "
                                  f"(at {path})")
            for jid, job in self.load(path)["jobs"].items():
                used = str((job or {}).get("uses", ""))
                if not used:
                    continue
                if not used.startswith("./"):
                    raise GitHubLimit(f"{path}: job {jid}: only local reusable workflows "
                                      f"are interpreted, not {used}")
                seen.add(used[2:])
                if len(seen) > MAX_REUSABLE:
                    raise GitHubLimit(f"{rel}: over {MAX_REUSABLE} unique reusable workflows")
                walk(used[2:], level + 1)

        walk(rel, 1)

    # --- the run
    def run(self, event: Event) -> list[Run]:
        """Every workflow this event triggers, run."""
        runs = []
        for rel in self.workflows():
            doc = self.load(rel)
            if not triggers(doc, event):
                continue
            self.check_limits(rel)
            inputs: dict[str, Any] = {}
            text_inputs: dict[str, str] = {}
            if event.name == "workflow_dispatch":
                inputs, text_inputs = dispatch_inputs(doc, event)
            github = self._github(event, doc, rel, text_inputs)
            secrets = {TOKEN: self.secrets[TOKEN]} if event.fork else dict(self.secrets)
            run = Run(rel)
            scope = _Scope(rel, doc, inputs, secrets, 1, "", "")
            self._workflow(run, scope, github)
            runs.append(run)
        return runs

    def _github(self, event: Event, doc: dict[str, Any], rel: str,
                text_inputs: dict[str, str]) -> dict[str, Any]:
        ref = event.ref
        kind = "tag" if ref.startswith("refs/tags/") else "branch"
        pr = event.payload.get("pull_request") or {}
        payload = dict(event.payload)
        if event.name == "workflow_dispatch":
            payload["inputs"] = text_inputs
        owner = self.repository.split("/")[0]
        payload.setdefault("repository", {"full_name": self.repository, "fork": False,
                                          "private": True})
        return {
            "event_name": event.name, "event": payload, "ref": ref,
            "ref_name": ref.split("/", 2)[2] if ref.count("/") >= 2 else ref,
            "ref_type": kind, "sha": event.sha,
            "base_ref": pr.get("base", {}).get("ref", ""),
            "head_ref": pr.get("head", {}).get("ref", ""),
            "repository": self.repository, "repository_owner": owner, "actor": "octocat",
            "workflow": doc.get("name") or rel, "run_id": "1", "run_number": "1",
            "run_attempt": "1", "token": self.secrets[TOKEN],
            "server_url": "https://github.com", "api_url": "https://api.github.com",
            "workspace": "/home/runner/work/repo/repo", "action": "", "job": "",
        }

    def _workflow(self, run: Run, scope: _Scope, github: dict[str, Any]) -> dict[str, Job]:
        """Run one workflow's jobs in needs order; returns each job's result and outputs."""
        jobs = scope.doc["jobs"]
        results: dict[str, Job] = {}
        for jid in _order(scope.path, jobs):
            job = jobs[jid] or {}
            results[jid] = self._job(run, scope, github, jid, job, results)
            run.jobs[f"{scope.prefix}{jid}"] = results[jid]
        return results

    def _job(self, run: Run, scope: _Scope, github: dict[str, Any], jid: str,
             job: dict[str, Any], results: dict[str, Job]) -> Job:
        needs = _needs(job)
        ancestors = _ancestors(jid, scope.doc["jobs"])
        ctx: dict[str, Any] = {
            "github": {**github, "job": jid}, "inputs": scope.inputs, "vars": self.vars,
            "needs": {n: {"result": results[n].result, "outputs": results[n].outputs}
                      for n in needs},
        }

        def status(name: str) -> bool:
            got = [results[a].result for a in ancestors]
            return {"success": all(r == "success" for r in got), "always": True,
                    "cancelled": False, "failure": "failure" in got}[name]

        if not condition(job.get("if"), ctx, status):
            return Job("skipped")
        strategy = job.get("strategy") or {}
        try:
            legs = _matrix(interpolate(strategy.get("matrix"), ctx), f"{scope.path}: {jid}")
        except EmptyMatrix:
            if self.empty_matrix == "fail":
                return Job("failure")
            raise
        fail_fast = strategy.get("fail-fast", True) is not False
        outputs: dict[str, Any] = {}
        result = "success"
        for index, matrix in enumerate(legs):
            if result == "failure" and fail_fast:
                run.legs.append(self._trace(scope, jid, job, matrix, index, ctx, "cancelled"))
                continue
            leg_ctx = {**ctx, "matrix": matrix, "strategy": {
                "fail-fast": fail_fast, "job-index": index, "job-total": len(legs),
                "max-parallel": strategy.get("max-parallel", len(legs))}}
            leg = self._trace(scope, jid, job, matrix, index, leg_ctx, "success")
            run.legs.append(leg)
            if "uses" in job:
                self._call(run, scope, github, job, leg, leg_ctx)
            else:
                self._steps(scope, job, leg, leg_ctx)
            outputs.update({k: v for k, v in leg.outputs.items() if v not in ("", None)})
            if leg.result == "failure" and not truthy_text(
                    interpolate(job.get("continue-on-error", False), leg_ctx)):
                result = "failure"
        for key in (job.get("outputs") or {}) if "uses" not in job else ():
            outputs.setdefault(key, "")
        return Job(result, outputs)

    def _trace(self, scope: _Scope, jid: str, job: dict[str, Any], matrix: dict[str, Any],
               index: int, ctx: dict[str, Any], result: str) -> Leg:
        values = ", ".join(to_string(v) for v in matrix.values())
        name = f"{scope.leg_prefix}{jid}" + (f" ({values})" if matrix else "")
        strategy = job.get("strategy") or {}
        live = result != "cancelled"
        ctx = {**ctx, "secrets": scope.secrets}
        env = {k: text(v, ctx) for k, v in (job.get("env") or {}).items()} if live else {}
        return Leg(
            scope.path, f"{scope.prefix}{jid}", jid, name, matrix,
            interpolate(job.get("runs-on"), ctx) if live else None,
            interpolate(job.get("environment"), ctx) if live else None,
            interpolate(job.get("concurrency"), ctx) if live else None,
            strategy.get("max-parallel"), env, scope.inputs, result=result,
            uses=str(job.get("uses", "")))

    def _steps(self, scope: _Scope, job: dict[str, Any], leg: Leg, ctx: dict[str, Any]) -> None:
        """Run one leg's steps through the callback; fills the leg's steps, result, outputs."""
        steps: dict[str, Any] = {}
        failed = False
        wf_env = {k: text(v, {**ctx, "secrets": scope.secrets})
                  for k, v in (scope.doc.get("env") or {}).items()}
        base_env = {**wf_env, **leg.env}
        runner = self.runner(leg.leg)
        for step in job.get("steps") or []:
            sctx = {**ctx, "secrets": scope.secrets, "env": base_env, "steps": steps,
                    "runner": runner, "job": {"status": "failure" if failed else "success"}}

            def status(name: str, failed: bool = failed) -> bool:
                return {"success": not failed, "failure": failed, "always": True,
                        "cancelled": False}[name]

            if not condition(step.get("if"), sctx, status):
                if "id" in step:
                    steps[step["id"]] = {"outputs": {}, "outcome": "skipped",
                                         "conclusion": "skipped"}
                continue
            env = {**base_env, **{k: text(v, sctx) for k, v in (step.get("env") or {}).items()}}
            sctx["env"] = env
            call = StepCall(
                scope.path, leg.job, leg.leg, leg.matrix, step,
                text(step.get("name") or step.get("uses") or step.get("run", ""), sctx),
                step.get("id"), str(step.get("uses", "")),
                text(step["run"], sctx) if "run" in step else None,
                {k: text(v, sctx) for k, v in (step.get("with") or {}).items()}, env, runner,
                scope.inputs, _defaults(ctx["github"], runner))
            leg.steps.append(call)
            leg.secrets |= self._seen(call)
            try:
                out = {k: to_string(v) for k, v in (self.run_step(call) or {}).items()}
                outcome = "success"
            except StepFailed:
                out, outcome = {}, "failure"
            tolerated = truthy_text(interpolate(step.get("continue-on-error", False), sctx))
            conclusion = "success" if tolerated else outcome
            failed = failed or conclusion == "failure"
            if "id" in step:
                steps[step["id"]] = {"outputs": out, "outcome": outcome, "conclusion": conclusion}
        leg.result = "failure" if failed else "success"
        octx = {**ctx, "secrets": scope.secrets, "steps": steps, "runner": runner}
        leg.outputs = {k: text(v, octx) for k, v in (job.get("outputs") or {}).items()}

    def _seen(self, call: StepCall) -> set[str]:
        blob = "\n".join([call.run or "", *call.env.values(), *call.with_.values()])
        return {n for n, v in self.secrets.items() if v and v in blob}

    def _call(self, run: Run, scope: _Scope, github: dict[str, Any], job: dict[str, Any],
              leg: Leg, ctx: dict[str, Any]) -> None:
        """A call job's leg: the reusable workflow's jobs, then its outputs mapped back."""
        if "steps" in job:
            raise GitHubLimit(f"{scope.path}: {leg.job}: a call job has no steps")
        rel = str(job["uses"])[2:]
        doc = self.load(rel)
        spec = on_call(doc)
        if spec is None:
            raise GitHubLimit(f"{rel}: called by {scope.path} but has no on.workflow_call")
        where = f"{scope.path}: {leg.job} -> {rel}"
        inputs = _typed_inputs(where, spec.get("inputs") or {},
                               interpolate(job.get("with") or {}, ctx))
        secrets = self._pass_secrets(where, spec.get("secrets") or {}, job.get("secrets"),
                                     {**ctx, "secrets": scope.secrets}, scope.secrets)
        leg.inputs = inputs
        inner = _Scope(rel, doc, inputs, secrets, scope.level + 1, f"{leg.job}/", f"{leg.leg} / ")
        results = self._workflow(run, inner, github)
        leg.secrets |= {n for n, v in self.secrets.items() if v and v in secrets.values()
                        and n != TOKEN}
        leg.result = "failure" if any(j.result in ("failure", "cancelled")
                                      for j in results.values()) else "success"
        jobs_ctx = {k: {"result": j.result, "outputs": j.outputs} for k, j in results.items()}
        octx = {"github": github, "inputs": inputs, "vars": self.vars, "jobs": jobs_ctx}
        leg.outputs = {k: text((v or {}).get("value", ""), octx)
                       for k, v in (spec.get("outputs") or {}).items()}

    def _pass_secrets(self, where: str, declared: dict[str, Any], given: Any,
                      ctx: dict[str, Any], mine: dict[str, str]) -> dict[str, str]:
        if given == "inherit":
            return dict(mine)
        passed = {k: text(v, ctx) for k, v in (given or {}).items()}
        unknown = set(passed) - set(declared)
        if unknown:
            raise GitHubLimit(f"{where}: secrets {sorted(unknown)} are not declared")
        missing = [k for k, v in declared.items() if (v or {}).get("required") and k not in passed]
        if missing:
            raise GitHubLimit(f"{where}: required secrets {missing} not passed")
        return {TOKEN: mine.get(TOKEN, ""), **passed}


def _defaults(github: dict[str, Any], runner: dict[str, Any]) -> dict[str, str]:
    """The default environment variables GitHub sets for every step (a subset)."""
    return {"CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_REF": github["ref"],
            "GITHUB_REF_NAME": github["ref_name"], "GITHUB_REF_TYPE": github["ref_type"],
            "GITHUB_EVENT_NAME": github["event_name"], "GITHUB_SHA": github["sha"],
            "GITHUB_BASE_REF": github["base_ref"], "GITHUB_HEAD_REF": github["head_ref"],
            "GITHUB_REPOSITORY": github["repository"], "GITHUB_JOB": github["job"],
            "RUNNER_OS": to_string(runner.get("os", "")),
            "RUNNER_TEMP": to_string(runner.get("temp", ""))}


def truthy_text(value: Any) -> bool:
    return value is True or to_string(value).lower() == "true"


def _typed_inputs(where: str, declared: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    unknown = set(given) - set(declared)
    if unknown:
        raise GitHubLimit(f"{where}: inputs {sorted(unknown)} are not declared")
    out: dict[str, Any] = {}
    for name, spec in declared.items():
        spec = spec or {}
        kind = spec.get("type", "string")
        if name not in given:
            if spec.get("required"):
                raise GitHubLimit(f"{where}: required input {name!r} not given")
            out[name] = spec.get("default", {"boolean": False, "number": 0}.get(kind, ""))
            continue
        value = given[name]
        ok = {"boolean": isinstance(value, bool),
              "number": isinstance(value, (int, float)) and not isinstance(value, bool),
              "string": isinstance(value, str)}.get(kind, True)
        if not ok:
            raise GitHubLimit(f"{where}: input {name!r} wants a {kind}, got {value!r}")
        out[name] = value
    return out


def _needs(job: dict[str, Any]) -> list[str]:
    needs = job.get("needs") or []
    return [needs] if isinstance(needs, str) else [str(n) for n in needs]


def _ancestors(jid: str, jobs: dict[str, Any]) -> set[str]:
    out: set[str] = set()
    todo = _needs(jobs[jid] or {})
    while todo:
        n = todo.pop()
        if n not in out:
            out.add(n)
            todo.extend(_needs(jobs[n] or {}))
    return out


def _order(path: str, jobs: dict[str, Any]) -> list[str]:
    """Jobs in an order their needs allow (file order otherwise); unknown needs and cycles
    are errors, as GitHub reports them before the run."""
    for jid, job in jobs.items():
        for n in _needs(job or {}):
            if n not in jobs:
                raise GitHubLimit(f"{path}: job {jid} needs unknown job {n!r}")
    done: list[str] = []
    left = list(jobs)
    while left:
        ready = [j for j in left if all(n in done for n in _needs(jobs[j] or {}))]
        if not ready:
            raise GitHubLimit(f"{path}: a cycle in needs among {left}")
        done.append(ready[0])
        left.remove(ready[0])
    return done


def _matrix(spec: Any, where: str) -> list[dict[str, Any]]:
    """The legs of a strategy.matrix (already evaluated); ``[{}]`` without one."""
    if spec is None:
        return [{}]
    if not isinstance(spec, dict):
        raise GitHubLimit(f"{where}: strategy.matrix is not a mapping: {spec!r}")
    include = spec.get("include") or []
    exclude = spec.get("exclude") or []
    if not isinstance(include, list) or not isinstance(exclude, list):
        raise GitHubLimit(f"{where}: matrix include/exclude must be lists")
    keys = [k for k in spec if k not in ("include", "exclude")]
    for k in keys:
        if not isinstance(spec[k], list):
            raise GitHubLimit(f"{where}: matrix vector {k!r} is not a list: {spec[k]!r}")
        if not spec[k]:
            raise EmptyMatrix(f"{where}: matrix vector {k!r} is empty (GitHub fails the job)")
    combos = [dict(zip(keys, vals, strict=True)) for vals in product(*(spec[k] for k in keys))]
    if not keys:
        combos = []
    combos = [c for c in combos
              if not any(all(c.get(k) == v for k, v in ex.items()) for ex in exclude)]
    originals: list[dict[str, Any] | None] = [dict(c) for c in combos]
    for extra in include:
        hit = False
        for combo, orig in zip(combos, originals, strict=True):
            # an include's own combination takes no later include (None)
            if orig is not None and all(orig[k] == v for k, v in extra.items() if k in orig):
                combo.update(extra)
                hit = True
        if not hit:
            combos.append(dict(extra))
            originals.append(None)
    if not combos:
        raise EmptyMatrix(f"{where}: the matrix is empty (GitHub fails the job)")
    if len(combos) > MAX_MATRIX:
        raise GitHubLimit(f"{where}: {len(combos)} matrix legs, over GitHub's {MAX_MATRIX}")
    return combos


_SECRET = re.compile(r"<secret:([A-Za-z0-9_]+)>")


def markers(text_: str) -> set[str]:
    """The secret names whose markers appear in a text."""
    return set(_SECRET.findall(text_))
