"""Events, and which workflows they trigger (``on:``), as GitHub documents them.

From "Events that trigger workflows" and "Workflow syntax" (``on.<event>.<filter>``, the
filter pattern cheat sheet):

- ``push``: ``branches``/``branches-ignore`` match the branch, ``tags``/``tags-ignore`` the tag;
  with only branch filters a tag push does not trigger, with only tag filters a branch push
  does not; ``paths``/``paths-ignore`` are matched against the changed files of a branch push
  (not evaluated for a tag push);
- ``pull_request``: ``types`` (default opened, synchronize, reopened) against the action,
  branch filters against the base branch, path filters against the changed files;
- ``release``: ``types`` against the action; ``schedule``: a ``cron`` listed in the workflow
  (any, when the event names none); ``workflow_dispatch``: its ``inputs`` with their defaults
  and types (``inputs.x`` typed, ``github.event.inputs.x`` text); ``workflow_call`` is never
  an event of its own.
- patterns: ``*`` any characters but ``/``, ``**`` any characters, ``?`` zero or one of the
  preceding character, ``+`` one or more of it, ``[...]`` a class, a leading ``!`` excludes
  what the patterns before it matched (patterns apply in order, the last match decides).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tests.services.gha_expr import to_string


@dataclass
class Event:
    """One event: its name, the ref and SHA it runs on, its payload (``github.event``), the
    files it changed (for ``paths`` filters), and a dispatch's inputs."""

    name: str
    ref: str = "refs/heads/main"
    payload: dict[str, Any] = field(default_factory=dict)
    changed: list[str] | None = None  # None: unknown, path filters pass (as on a new branch)
    inputs: dict[str, Any] = field(default_factory=dict)
    sha: str = "0" * 40
    fork: bool = False  # a pull request from a fork: no secrets at all

    @classmethod
    def pull_request(cls, base: str = "main", head: str = "topic", labels: tuple[str, ...] = (),
                     changed: list[str] | None = None, action: str = "opened",
                     number: int = 1, fork: bool = False) -> Event:
        payload = {"action": action, "number": number, "pull_request": {
            "number": number, "labels": [{"name": n} for n in labels],
            "base": {"ref": base, "sha": "b" * 40},
            "head": {"ref": head, "sha": "c" * 40, "repo": {"fork": fork}}}}
        return cls("pull_request", f"refs/pull/{number}/merge", payload, changed, fork=fork)

    @classmethod
    def push(cls, ref: str = "refs/heads/main", before: str = "a" * 40,
             changed: list[str] | None = None, after: str = "d" * 40) -> Event:
        payload = {"ref": ref, "before": before, "after": after, "created": before == "0" * 40,
                   "repository": {"fork": False, "private": True}}
        return cls("push", ref, payload, changed, sha=after)

    @classmethod
    def release(cls, tag: str, action: str = "published") -> Event:
        payload = {"action": action, "release": {"tag_name": tag, "prerelease": False}}
        return cls("release", f"refs/tags/{tag}", payload)

    @classmethod
    def schedule(cls, cron: str | None = None) -> Event:
        return cls("schedule", payload={"schedule": cron} if cron else {})

    @classmethod
    def dispatch(cls, inputs: dict[str, Any] | None = None,
                 ref: str = "refs/heads/main") -> Event:
        return cls("workflow_dispatch", ref, {"ref": ref}, inputs=dict(inputs or {}))


def pattern(glob: str) -> re.Pattern[str]:
    """A filter pattern as a regular expression (the cheat sheet's characters)."""
    out, i = [], 0
    while i < len(glob):
        c = glob[i]
        if glob.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c in "?+" and out:
            out.append(c)  # applies to the preceding character, as in a regex
        elif c == "[":
            end = glob.index("]", i)
            out.append(glob[i:end + 1])
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out))


def matches(patterns: list[str], name: str) -> bool:
    """Whether ``name`` is included by an ordered list of patterns, ``!`` ones excluding."""
    hit = False
    for p in patterns:
        neg = p.startswith("!")
        if pattern(p[1:] if neg else p).fullmatch(name):
            hit = not neg
    return hit


def _listed(spec: dict[str, Any], key: str) -> list[str] | None:
    value = spec.get(key)
    if value is None:
        return None
    return [str(v) for v in (value if isinstance(value, list) else [value])]


def _ref_passes(spec: dict[str, Any], kind: str, name: str) -> bool:
    inc, ign = _listed(spec, f"{kind}"), _listed(spec, f"{kind}-ignore")
    if inc is not None:
        return matches(inc, name)
    if ign is not None:
        return not matches(ign, name)
    return True


def _paths_pass(spec: dict[str, Any], changed: list[str] | None) -> bool:
    inc, ign = _listed(spec, "paths"), _listed(spec, "paths-ignore")
    if changed is None or (inc is None and ign is None):
        return True
    if inc is not None:
        return any(matches(inc, f) for f in changed)
    return not all(matches(ign or [], f) for f in changed)


def _on(doc: dict[Any, Any]) -> dict[str, Any]:
    # PyYAML reads the key `on` as the boolean True (YAML 1.1)
    on = doc.get("on", doc.get(True))
    if isinstance(on, str):
        return {on: {}}
    if isinstance(on, list):
        return {str(k): {} for k in on}
    return {str(k): (v or {}) for k, v in (on or {}).items()}


def triggers(doc: dict[str, Any], event: Event) -> bool:
    """Whether a workflow document runs for this event."""
    on = _on(doc)
    if event.name not in on:
        return False
    spec = on[event.name]
    if event.name == "push":
        is_tag = event.ref.startswith("refs/tags/")
        name = event.ref.split("/", 2)[2]
        has_b = any(k in spec for k in ("branches", "branches-ignore"))
        has_t = any(k in spec for k in ("tags", "tags-ignore"))
        if has_b != has_t and (is_tag == has_b):
            return False  # only the other kind of ref is filtered: this kind never triggers
        if not _ref_passes(spec, "tags" if is_tag else "branches", name):
            return False
        return is_tag or _paths_pass(spec, event.changed)
    if event.name in ("pull_request", "pull_request_target"):
        types: list[str] | None = _listed(spec, "types") or ["opened", "synchronize",
                                                             "reopened"]
        base = event.payload["pull_request"]["base"]["ref"]
        return (event.payload.get("action") in (types or []) and _ref_passes(spec, "branches", base)
                and _paths_pass(spec, event.changed))
    if event.name == "release":
        types = _listed(spec, "types")
        return types is None or event.payload.get("action") in types
    if event.name == "schedule":
        crons = [str(c.get("cron")) for c in (spec if isinstance(spec, list) else [])]
        wanted = event.payload.get("schedule")
        return wanted is None or wanted in crons
    return event.name != "workflow_call"


def dispatch_inputs(doc: dict[str, Any], event: Event) -> tuple[dict[str, Any], dict[str, str]]:
    """A dispatch's ``inputs`` context (typed, defaults filled) and ``github.event.inputs``
    (text). An input the workflow does not declare is an error, as GitHub's API answers."""
    declared = (_on(doc).get("workflow_dispatch") or {}).get("inputs") or {}
    unknown = set(event.inputs) - set(declared)
    if unknown:
        raise ValueError(f"workflow_dispatch: undeclared inputs {sorted(unknown)}")
    typed: dict[str, Any] = {}
    for name, spec in declared.items():
        spec = spec or {}
        kind = spec.get("type", "string")
        value = event.inputs.get(name, spec.get("default", False if kind == "boolean" else ""))
        if spec.get("required") and name not in event.inputs and "default" not in spec:
            raise ValueError(f"workflow_dispatch: input {name!r} is required")
        if kind == "boolean":
            value = value if isinstance(value, bool) else str(value).lower() == "true"
        elif kind == "number":
            value = float(value)
        elif kind == "choice" and value not in (spec.get("options") or []):
            raise ValueError(f"workflow_dispatch: {name}={value!r} is not one of the options")
        else:
            value = to_string(value)
        typed[name] = value
    return typed, {k: to_string(v) for k, v in typed.items()}


def on_call(doc: dict[str, Any]) -> dict[str, Any] | None:
    """A reusable workflow's ``on.workflow_call`` table, or None when it is not one."""
    on = _on(doc)
    return (on.get("workflow_call") or {}) if "workflow_call" in on else None
