"""Compare two image-build workflows: what triggers them, which of those events publish, the
tags each event pushes, the registries, secrets and variables they use, and their runners.

Jobs, steps and `run:` commands come from lint's workflow facts; the `on:` block's filters are
read from the YAML itself (lint keeps only the event names)."""

from __future__ import annotations

import re
from collections.abc import Callable

from cannery.compare.expr import evaluate
from cannery.compare.model import Difference, mapping_diff
from cannery.lint.facts.workflow import Job, Step, WorkflowFacts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

FILTERS = ("branches", "branches-ignore", "tags", "tags-ignore", "paths", "paths-ignore",
           "types")
# Commands of a `run:` step that push to a registry (name, subcommand or None for any).
PUSHERS = {("docker", "push"), ("buildah", "push"), ("podman", "push"), ("skopeo", "copy"),
           ("crane", "push"), ("crane", "copy"), ("oras", "push"), ("cannery", "copy")}


class WorkflowView:
    """A workflow file with its `on:` block; ``published`` lists tags (and registries) that a
    `cannery build --push` in it publishes, which the file alone does not name (catalog mode
    fills it from the catalog)."""

    def __init__(self, label: str, facts: WorkflowFacts, on: Any,
                 published_tags: list[str] | None = None,
                 published_registries: list[str] | None = None) -> None:
        self.label = label
        self.facts = facts
        self.on = on if isinstance(on, dict) else (
            {e: None for e in on} if isinstance(on, list) else ({on: None} if on else {}))
        self.published_tags = published_tags or []
        self.published_registries = published_registries or []

    @property
    def events(self) -> list[str]:
        return [str(e) for e in self.on]


def load_view(label: str, text: str, facts: WorkflowFacts,
              published_tags: list[str] | None = None,
              published_registries: list[str] | None = None) -> WorkflowView:
    """``facts`` with its `on:` block (YAML 1.1 reads a bare `on` key as True)."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:  # what lint's parse accepted but PyYAML cannot construct
        data = None
    top = data if isinstance(data, dict) else {}
    on = top.get("on", top.get(True))
    return WorkflowView(label, facts, on, published_tags, published_registries)


# ---------------------------------------------------------------- categories
def triggers(a: WorkflowView, b: WorkflowView) -> list[Difference]:
    return mapping_diff("triggers", dict.fromkeys(a.events, "triggers"),
                        dict.fromkeys(b.events, "triggers"))


def _filters(view: WorkflowView) -> dict[str, str]:
    out: dict[str, str] = {}
    for event, body in view.on.items():
        if event == "schedule" and isinstance(body, list):
            crons = sorted(str(x.get("cron")) for x in body if isinstance(x, dict))
            out["schedule.cron"] = ", ".join(crons)
        elif isinstance(body, dict):
            for key in FILTERS:
                if key in body:
                    value = body[key]
                    items = value if isinstance(value, list) else [value]
                    out[f"{event}.{key}"] = ", ".join(sorted(str(x) for x in items))
            if event == "workflow_dispatch" and isinstance(body.get("inputs"), dict):
                out["workflow_dispatch.inputs"] = ", ".join(sorted(body["inputs"]))
    return out


def filters(a: WorkflowView, b: WorkflowView) -> list[Difference]:
    return mapping_diff("filters", _filters(a), _filters(b))


def _step_pushes(step: Step, event: str) -> bool:
    if step.if_ is not None and evaluate(step.if_.text, event) is False:
        return False
    action = step.uses.split("@")[0]
    if action in ("docker/build-push-action", "docker/bake-action"):
        push = step.with_.get("push")
        return push is not None and evaluate(push.text, event) is not False
    if step.run is None:
        return False
    for cmd in step.run.commands:
        sub = cmd.subcommand()
        if (cmd.name, sub) in PUSHERS:
            return True
        if cmd.name == "cannery" and sub == "build" and "--push" in cmd.argv:
            return True
        if cmd.name == "docker" and sub == "buildx" and (
                "--push" in cmd.argv or "imagetools" in cmd.argv
                or any("type=registry" in a for a in cmd.argv)):
            return True
    return False


def _job_runs(view: WorkflowView, job: Job, event: str, seen: tuple[str, ...] = ()) -> bool:
    """False only when the job's `if:` (or that of a job it needs) is false for ``event``."""
    if job.if_ is not None:
        verdict = evaluate(job.if_.text, event)
        if verdict is False:
            return False
        if verdict is None and "always()" in job.if_.text:
            return True
    by_id = {j.id: j for j in view.facts.jobs}
    for need in job.needs:
        dep = by_id.get(need)
        if dep is not None and need not in seen and not _job_runs(view, dep, event,
                                                                    (*seen, job.id)):
            return False
    return True


def publishing(view: WorkflowView) -> dict[str, list[tuple[Job, Step]]]:
    """event → the steps that push under it."""
    out: dict[str, list[tuple[Job, Step]]] = {}
    for event in view.events:
        for job in view.facts.jobs:
            if not _job_runs(view, job, event):
                continue
            for step in job.steps:
                if _step_pushes(step, event):
                    out.setdefault(event, []).append((job, step))
    return out


def publish(a: WorkflowView, b: WorkflowView) -> list[Difference]:
    pa, pb = publishing(a), publishing(b)
    events = dict.fromkeys([*a.events, *b.events])
    xs = {e: "publishes" if e in pa else "builds only" for e in events if e in a.events}
    ys = {e: "publishes" if e in pb else "builds only" for e in events if e in b.events}
    return [d for d in mapping_diff("publish", xs, ys)
            if not (d.original in (None, "builds only") and d.new in (None, "builds only"))]


def _metadata_tags(step: Step, event: str) -> list[str]:
    tags = step.with_.get("tags")
    out = []
    for line in (tags.text.splitlines() if tags is not None else []):
        line = line.strip()
        if not line:
            continue
        enable = re.search(r",?\s*enable=(\$\{\{.*?\}\}|[^,]*)", line)
        if enable and evaluate(enable.group(1), event) is False:
            continue
        rule = re.sub(r",?\s*enable=(\$\{\{.*?\}\}|[^,]*)", "", line)
        kind = re.search(r"type=(\w+)", rule)
        on = re.search(r"event=(\w+)", rule)
        t = kind.group(1) if kind else ""
        if (t in ("semver", "pep440") and event != "push") or (
                t == "schedule" and event != "schedule"):
            continue
        if on and {"tag": "push", "branch": "push", "pr": "pull_request"}.get(
                on.group(1), on.group(1)) != event:
            continue
        out.append(rule)
    flavor = step.with_.get("flavor")
    latest = re.search(r"latest=(\w+)", flavor.text if flavor is not None else "")
    mode = latest.group(1) if latest else "auto"
    # latest=auto: metadata-action adds `latest` with a semver or pep440 tag (a tag push)
    if mode == "true" or (mode == "auto" and event == "push" and any(
            re.search(r"type=(semver|pep440)", r) for r in out)):
        out.append("latest")
    return out


def _tags(view: WorkflowView) -> dict[str, str]:
    per: dict[str, set[str]] = {}
    pushes = publishing(view)
    for event in view.events:
        found: set[str] = set()
        for job in view.facts.jobs:
            if not _job_runs(view, job, event):
                continue
            for step in job.steps:
                if step.uses.split("@")[0] == "docker/metadata-action":
                    found.update(_metadata_tags(step, event))
        for _job, step in pushes.get(event, []):
            tags = step.with_.get("tags")
            if step.uses.split("@")[0] == "docker/build-push-action" and tags is not None:
                found.update(t.strip() for t in re.split(r"[\n,]", tags.text) if t.strip()
                             and "steps." not in t)
            for cmd in step.run.commands if step.run is not None else []:
                sub = cmd.subcommand()
                refs = [w.value for w in cmd.operands()]
                if (cmd.name, sub) in (("docker", "push"), ("docker", "tag")):
                    found.update(refs[-1:])
                elif (cmd.name, sub) == ("skopeo", "copy"):
                    found.update(r.removeprefix("docker://") for r in refs[-1:])
                elif cmd.name == "cannery" and sub == "build" and "--push" in cmd.argv:
                    found.update(view.published_tags or ["(the catalog's tags)"])
        if event in pushes:
            for tag in sorted(found):
                per.setdefault(tag, set()).add(event)
    return {tag: "on " + ", ".join(sorted(events)) for tag, events in per.items()}


def tags(a: WorkflowView, b: WorkflowView) -> list[Difference]:
    return mapping_diff("tags", _tags(a), _tags(b))


def _registries(view: WorkflowView) -> dict[str, str]:
    out: dict[str, str] = {}
    for job in view.facts.jobs:
        for step in job.steps:
            if step.uses.split("@")[0] == "docker/metadata-action":
                images = step.with_.get("images")
                for ref in re.split(r"[\n,]", images.text if images is not None else ""):
                    ref = ref.strip()
                    if ref and "${{" not in ref:
                        host = ref.split("/", 1)[0]
                        out[host if "." in host or ":" in host else "docker.io"] = "used"
            if step.uses.split("@")[0] == "docker/login-action":
                named = step.with_.get("registry")
                out[named.text if named is not None else "docker.io"] = "used"
            for cmd in step.run.commands if step.run is not None else []:
                if cmd.subcommand() == "login" and cmd.name in ("docker", "podman", "buildah",
                                                               "skopeo", "helm", "oras"):
                    server = _login_server(cmd.argv)
                    out[server.split("/", 1)[0] if server else "docker.io"] = "used"
    for reg in view.published_registries:
        out[reg] = "used"
    return out


# Options of `docker|podman|skopeo|… login` whose value is the next word (not the server).
LOGIN_VALUE_OPTS = frozenset({"-u", "--username", "-p", "--password", "--authfile",
                              "--cert-dir", "--compat-auth-file", "--config"})


def _login_server(argv: list[str]) -> str:
    """The server a login names (a host, or host/namespace for skopeo), "" for none."""
    words = argv[argv.index("login") + 1:] if "login" in argv else []
    i = 0
    while i < len(words):
        if words[i] in LOGIN_VALUE_OPTS:
            i += 2
            continue
        if not words[i].startswith("-"):
            return words[i]
        i += 1
    return ""


def registries(a: WorkflowView, b: WorkflowView) -> list[Difference]:
    return mapping_diff("registries", _registries(a), _registries(b))


def _references(view: WorkflowView) -> dict[str, str]:
    found = re.findall(r"\b(secrets|vars)\.([A-Za-z_][A-Za-z0-9_]*)", view.facts.text)
    return {f"{kind}.{name}": "referenced" for kind, name in sorted(set(found))}


def secrets(a: WorkflowView, b: WorkflowView) -> list[Difference]:
    return mapping_diff("secrets", _references(a), _references(b))


def _runners(view: WorkflowView) -> dict[str, str]:
    out: dict[str, str] = {}
    for job in view.facts.jobs:
        if not job.runs_on:
            continue
        m = re.fullmatch(r"\$\{\{\s*matrix\.([\w-]+)\s*\}\}", job.runs_on.strip())
        labels = ([leg.get(m.group(1), job.runs_on) for leg in job.legs] if m and job.legs
                  else [job.runs_on])
        for label in labels:
            out[label] = "used"
    return out


def runners(a: WorkflowView, b: WorkflowView) -> list[Difference]:
    return mapping_diff("runners", _runners(a), _runners(b))


# The registry: every workflow category, in the order output lists them.
CATEGORIES: tuple[tuple[str, Callable[[WorkflowView, WorkflowView], list[Difference]]], ...] = (
    ("triggers", triggers), ("filters", filters), ("publish", publish), ("tags", tags),
    ("registries", registries), ("secrets", secrets), ("runners", runners),
)


def category_names() -> list[str]:
    return [name for name, _ in CATEGORIES]


def compare_workflows(a: WorkflowView, b: WorkflowView) -> list[Difference]:
    out: list[Difference] = []
    for _name, run in CATEGORIES:
        out.extend(run(a, b))
    return out
