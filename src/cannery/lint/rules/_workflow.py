"""Workflow knowledge shared by rules: build steps, their options, tags and Dockerfiles."""

from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.lint.facts.workflow import Job, Step, Value, WorkflowFacts


class Build:
    __slots__ = (
        "cache_from",
        "cache_to",
        "file",
        "job",
        "outputs",
        "platforms",
        "step",
        "tags",
    )

    def __init__(self, job: Job, step: Step, file: Value | None, platforms: Value | None,
                 tags: Value | None, outputs: Value | None, cache_from: Value | None,
                 cache_to: Value | None) -> None:
        self.job = job
        self.step = step
        self.file = file
        self.platforms = platforms
        self.tags = tags
        self.outputs = outputs
        self.cache_from = cache_from
        self.cache_to = cache_to


def builds(wf: WorkflowFacts) -> list[Build]:
    out = []
    for job in wf.jobs:
        for step in job.steps:
            if step.uses.split("@")[0] in ("docker/build-push-action",):
                w = step.with_
                out.append(Build(job, step, w.get("file"), w.get("platforms"), w.get("tags"),
                                 w.get("outputs"), w.get("cache-from"), w.get("cache-to")))
    return out


def dockerfiles(wf: WorkflowFacts) -> Iterator[tuple[Build, Value, str]]:
    """Each build step that names a Dockerfile: (build, its `file:` value, the path with
    `${{ env.X }}` filled in). Paths that still hold an expression are skipped."""
    for b in builds(wf):
        if b.file is None:
            continue
        name = expand_env(b.file.text, wf, b.job, b.step)
        if "${{" not in name:
            yield b, b.file, name


def split_list(text: str) -> list[str]:
    return [t.strip() for t in re.split(r"[,\n]", text) if t.strip()]


def expand_env(text: str, wf: WorkflowFacts, job: Job | None = None, step: Step | None = None
               ) -> str:
    env = {k: v.text for k, v in wf.env.items()}
    if step is not None:
        env.update({k: v.text for k, v in step.env.items()})

    def sub(m: re.Match[str]) -> str:
        return env.get(m.group(1), m.group(0))

    for _ in range(3):
        text = re.sub(r"\$\{\{\s*env\.([A-Za-z_]\w*)\s*\}\}", sub, text)
    return text
