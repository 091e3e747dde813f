from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.facts.workflow import Job, WorkflowFacts
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule, lazy_re

# Events that also run in a fork (its own pushes, schedules, releases) or for a fork's pull
# request; a manual dispatch, a call from another workflow and a repository dispatch (which
# needs a token) are chosen by someone who holds the secrets.
FORK_EVENTS = ("push", "pull_request", "pull_request_target", "pull_request_review",
               "pull_request_review_comment", "issue_comment", "issues", "workflow_run",
               "schedule", "release", "create", "delete", "merge_group", "discussion",
               "discussion_comment", "registry_package", "page_build", "watch", "fork")
SECRET = lazy_re(r"\$\{\{[^}]*?\bsecrets\.([A-Za-z_][\w-]*)")
# A condition that keeps the job to the home repository (or off fork pull requests), or
# that tests that a secret is there at all.
GUARD = lazy_re(
    r"github\.repository(_owner)?\s*==|==\s*github\.repository(_owner)?\b|"
    r"\bgithub\.repository_owner\b\s*==|head\.repo\.fork\s*==\s*false|!\s*github\.event\."
    r"pull_request\.head\.repo\.fork|head\.repo\.full_name\s*==|==\s*github\.event\."
    r"pull_request\.head\.repo\.full_name|(secrets|env)\.[\w-]+\s*!=\s*''|"
    r"''\s*!=\s*(secrets|env)\.[\w-]+|"
    # the repository running the workflow is not a fork
    r"!\s*github\.event\.repository\.fork\b|github\.event\.repository\.fork\s*==\s*false|"
    # a repository variable: forks do not get the home repository's variables
    r"\bvars\.[\w-]+\s*(==|!=)")
# A job with one of these in its `if:` runs even when the jobs it needs were skipped.
RUNS_ANYWAY = lazy_re(r"\b(always|failure|cancelled)\s*\(")


def _secrets(wf: WorkflowFacts, job: Job) -> list[tuple[str, int]]:
    """(name, line) of each repository secret the job reads; GITHUB_TOKEN is everywhere."""
    out = []
    end = job.end_line or len(wf.lines)
    for no in range(job.line, min(end, len(wf.lines)) + 1):
        text = wf.lines[no - 1]
        if text.lstrip().startswith("#"):
            continue
        out += [(m.group(1), no) for m in SECRET.finditer(text)
                if m.group(1) != "GITHUB_TOKEN"]
    if job.secrets_inherit:
        out.append(("inherit", job.line))
    # the workflow's env: reaches every job; count it where this job's steps read it
    for key, value in wf.env.items():
        for m in SECRET.finditer(value.text):
            if m.group(1) != "GITHUB_TOKEN" and any(
                    re.search(rf"\b{re.escape(key)}\b", wf.lines[n - 1])
                    for n in range(job.line, min(end, len(wf.lines)) + 1)):
                out.append((m.group(1), value.line))
    return out


_EVENT_TEST = lazy_re(r"github\.event_name\s*(==|!=)\s*'([^']*)'|'([^']*)'\s*(==|!=)\s*"
                      r"github\.event_name")


def may_run_on(cond: str, event: str) -> bool:
    """Whether an `if:` can be true when the workflow runs for ``event``: the
    `github.event_name == '…'` tests are decided, everything else is unknown (Kleene logic
    over `&&`, `||`, `!` and parentheses). Unparsable conditions may run."""
    text = cond.strip()
    m = re.fullmatch(r"\$\{\{(.*)\}\}", text, re.S)
    text = m.group(1) if m else text

    def decide(m: re.Match[str]) -> str:
        op = m.group(1) or m.group(4)
        name = m.group(2) if m.group(2) is not None else m.group(3)
        return " T " if (name == event) == (op == "==") else " F "

    text = _EVENT_TEST.sub(decide, text)
    for _ in range(10):  # function calls and quoted strings are unknown atoms
        new = re.sub(r"[\w.]+\([^()]*\)|'[^']*'", " U ", text)
        if new == text:
            break
        text = new
    tokens = re.findall(r"&&|\|\||!(?!=)|\(|\)|[^\s()&|!]+(?:\s*[!=<>]=?\s*[^\s()&|]+)*",
                        text)
    pos = 0

    def atom() -> bool | None:
        nonlocal pos
        if pos >= len(tokens):
            return None
        tok = tokens[pos]
        pos += 1
        if tok == "!":
            v = atom()
            return None if v is None else not v
        if tok == "(":
            v = disj()
            if pos < len(tokens) and tokens[pos] == ")":
                pos += 1
            return v
        return {"T": True, "F": False}.get(tok.strip())

    def conj() -> bool | None:
        nonlocal pos
        v = atom()
        while pos < len(tokens) and tokens[pos] == "&&":
            pos += 1
            w = atom()
            v = False if v is False or w is False else (True if v and w else None)
        return v

    def disj() -> bool | None:
        nonlocal pos
        v = conj()
        while pos < len(tokens) and tokens[pos] == "||":
            pos += 1
            w = conj()
            v = True if v is True or w is True else (False if v is False and w is False
                                                     else None)
        return v

    try:
        return disj() is not False
    except RecursionError:
        return True


def _guarded(job: Job, jobs: dict[str, Job], seen: set[str], events: list[str]) -> bool:
    """Whether the job, or one of the jobs it needs, carries a repository guard or an `if:`
    that keeps it off every fork event."""
    if job.id in seen:
        return False
    seen = seen | {job.id}
    cond = job.if_.text if job.if_ is not None else ""
    if GUARD.search(cond) or not any(may_run_on(cond, e) for e in events):
        return True
    if RUNS_ANYWAY.search(cond) or not job.needs:
        return False
    # a job is skipped when a job it needs was skipped: one guarded need is enough
    return any(_guarded(jobs[n], jobs, seen, events) for n in job.needs if n in jobs)


def _reading_events(wf: WorkflowFacts, job: Job, lines: set[int], events: list[str]
                    ) -> list[str]:
    """The events on which some place that reads a secret runs: outside any step, every
    event the job runs on; in a step, those its own `if:` allows, none when that `if:`
    carries a guard."""
    steps = job.steps
    out: set[str] = set()
    for n in lines:
        owner = None
        for i, step in enumerate(steps):
            end = steps[i + 1].line - 1 if i + 1 < len(steps) else (job.end_line or len(wf.lines))
            if step.line <= n <= end:
                owner = step
        cond = owner.if_.text if owner is not None and owner.if_ is not None else ""
        if GUARD.search(cond):
            continue
        out.update(e for e in events if may_run_on(cond, e))
    return [e for e in events if e in out]


class SecretsWithoutForkGuard(Rule):
    """## What it does
    Finds a workflow job that reads repository secrets (`${{ secrets.X }}` anywhere in the
    job, `secrets: inherit`, or the workflow's `env:` set from a secret and read by the
    job; `GITHUB_TOKEN` does not count) on events that a fork can trigger (`push`,
    `pull_request`, `pull_request_target`, `schedule`, `release`, `workflow_run`,
    `issue_comment`, …) with no guard that keeps it to the home repository: an `if:` on the
    job (or on a job it `needs:`, unless its own `if:` runs it anyway with `always()`)
    comparing `github.repository` or `github.repository_owner`, checking that the
    repository running it is not a fork (`!github.event.repository.fork`) or that a pull
    request's head is not one, or testing a repository variable (`vars.PUBLISH == 'true'`:
    forks do not get the home repository's variables); or an `if:` on every step that reads
    a secret, with such a
    comparison or a test that the secret is set (`env.TOKEN != ''`). `github.event_name`
    tests in the job's and the steps' `if:` are decided, so the message names only the
    events on which a secret is read. A workflow that only
    runs on `workflow_dispatch`, `workflow_call` or `repository_dispatch` is not reported,
    nor is a job whose `if:` keeps it off every fork event (`github.event_name ==
    'workflow_dispatch' && …`); the message names the events the job can run on.

    ## Why is this bad?
    In a fork (its own pushes and schedules) and on a fork's pull request, the secrets are
    empty: the job logs in with an empty password and fails, every night, in every fork,
    and the fork's owners get the failure mails. With `pull_request_target` it is worse: the
    job runs with the secrets and may run the fork's code.

    ## Example
    ```yaml
    on: {push: {branches: [main]}, schedule: [{cron: "0 16 * * *"}]}
    jobs:
      build:
        runs-on: ubuntu-latest
        steps:
          - uses: docker/login-action@v3
            with: {registry: quay.io, password: "${{ secrets.QUAY_PASSWORD }}"}
    ```

    ## Use instead
    ```yaml
    jobs:
      build:
        if: github.repository_owner == 'verl-project'
    ```
    """

    name = "secrets-without-fork-guard"
    code = "CW009"
    severity = Severity.WARNING
    targets = ("workflow",)

    def check(self, facts: WorkflowFacts, ctx: LintContext) -> Iterator[Finding]:
        forks = [e for e in facts.events if e in FORK_EVENTS]
        if not forks:
            return
        jobs = {j.id: j for j in facts.jobs}
        for job in facts.jobs:
            used = _secrets(facts, job)
            if not used or _guarded(job, jobs, set(), forks):
                continue
            cond = job.if_.text if job.if_ is not None else ""
            events = _reading_events(facts, job, {n for _, n in used},
                                     [e for e in forks if may_run_on(cond, e)])
            if not events:
                continue
            names = sorted({n for n, _ in used})
            first = min(n for _, n in used)
            shown = ", ".join(names[:3]) + (", …" if len(names) > 3 else "")
            worse = ("; on pull_request_target a fork's pull request runs with them"
                     if "pull_request_target" in events else "")
            text = facts.lines[job.line - 1] if job.line <= len(facts.lines) else ""
            column = len(text) - len(text.lstrip()) + 1
            yield self.finding(
                facts.path, job.line, column,
                f"job {job.id} uses secrets ({shown}, line {first}) on "
                f"{', '.join(events)}, which forks trigger too, with no repository or owner "
                f"guard: in a fork, or for a fork's pull request, the secrets are empty{worse}",
                end_column=column + len(job.id),
                hint="add `if: github.repository_owner == 'OWNER'` (or github.repository == "
                "'OWNER/NAME') to the job")
