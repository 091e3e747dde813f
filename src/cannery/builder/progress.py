"""What a build shows while it runs: a live table per platform on a terminal (step n of m,
elapsed), plain lines elsewhere (CI, pipes), grouped with ``::group::`` in GitHub Actions."""

from __future__ import annotations

import os
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Protocol

from rich.console import Console
from rich.live import Live
from rich.table import Table

from cannery.builder.jobs import PlatformJob

# buildah: "[2/4] STEP 3/7: RUN …"; BuildKit: "#7 [image 3/7] RUN …"
_STEP = re.compile(r"(?:^\[\d+/\d+\] )?STEP (\d+)/(\d+): (.*)$|\[[\w-]+ +(\d+)/(\d+)\] (.*)$")


def parse_step(line: str) -> tuple[int, int, str] | None:
    m = _STEP.search(line)
    if not m:
        return None
    if m.group(1):
        return int(m.group(1)), int(m.group(2)), m.group(3)
    return int(m.group(4)), int(m.group(5)), m.group(6)


class Reporter(Protocol):
    def start(self, image: str, job: PlatformJob) -> None: ...
    def line(self, image: str, job: PlatformJob, text: str) -> None: ...
    def note(self, image: str, job: PlatformJob, text: str) -> None: ...
    def skipped(self, image: str, job: PlatformJob, why: str) -> None: ...
    def finished(self, image: str, job: PlatformJob, digest: str) -> None: ...
    def failed(self, image: str, job: PlatformJob, why: str, tail: list[str]) -> None: ...
    def published(self, image: str, index: str, tags: list[str]) -> None: ...
    def close(self) -> None: ...


class PlainReporter:
    """One line per step and per outcome, for logs that are read later."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.actions = os.environ.get("GITHUB_ACTIONS") == "true"
        self._step: dict[tuple[str, str], str] = {}
        self._t0: dict[tuple[str, str], float] = {}

    def _say(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False)

    def start(self, image: str, job: PlatformJob) -> None:
        self._t0[(image, job.platform)] = time.monotonic()
        if self.actions:
            self._say(f"::group::{image} {job.platform}")
        self._say(f"[{image} {job.platform}] building")

    def line(self, image: str, job: PlatformJob, text: str) -> None:
        step = parse_step(text)
        if step:
            self._say(f"[{image} {job.platform}] step {step[0]}/{step[1]}: {step[2][:100]}")

    def note(self, image: str, job: PlatformJob, text: str) -> None:
        self._say(f"[{image} {job.platform}] {text}")

    def skipped(self, image: str, job: PlatformJob, why: str) -> None:
        self._say(f"[{image} {job.platform}] skipped: {why}")

    def finished(self, image: str, job: PlatformJob, digest: str) -> None:
        took = time.monotonic() - self._t0.get((image, job.platform), time.monotonic())
        self._say(f"[{image} {job.platform}] done: {digest} ({took:.1f}s)")
        if self.actions:
            self._say("::endgroup::")

    def failed(self, image: str, job: PlatformJob, why: str, tail: list[str]) -> None:
        if self.actions:
            self._say("::endgroup::")
        self._say(f"[{image} {job.platform}] FAILED: {why}")
        for line in tail[-15:]:
            self._say(f"  | {line}")

    def published(self, image: str, index: str, tags: list[str]) -> None:
        moved = ", ".join(tags) if tags else "none (already there)"
        self._say(f"[{image}] index {index}; tags moved: {moved}")

    def close(self) -> None:
        pass


@dataclass
class _Row:
    status: str = "waiting"
    step: str = ""
    started: float | None = None
    ended: float | None = None


@dataclass
class RichReporter:
    """A live table: one row per image and platform."""

    console: Console
    rows: dict[tuple[str, str], _Row] = field(default_factory=dict)
    live: Live | None = None
    tails: list[tuple[str, list[str]]] = field(default_factory=list)
    published_lines: list[str] = field(default_factory=list)

    def _table(self) -> Table:
        table = Table(box=None, show_header=True, header_style="bold")
        for col in ("image", "platform", "status", "step", "elapsed"):
            table.add_column(col)
        now = time.monotonic()
        for (image, platform), row in self.rows.items():
            end = row.ended or now
            elapsed = f"{end - row.started:.0f}s" if row.started else ""
            table.add_row(image, platform, row.status, row.step[:70], elapsed)
        return table

    def _refresh(self) -> None:
        if self.live is None:
            # get_renderable: redrawn on every refresh, so "elapsed" keeps counting between steps
            self.live = Live(
                console=self.console, get_renderable=self._table, refresh_per_second=4
            )
            self.live.start()
        else:
            self.live.refresh()

    def _row(self, image: str, job: PlatformJob) -> _Row:
        return self.rows.setdefault((image, job.platform), _Row())

    def start(self, image: str, job: PlatformJob) -> None:
        row = self._row(image, job)
        row.status, row.started = "building", time.monotonic()
        self._refresh()

    def line(self, image: str, job: PlatformJob, text: str) -> None:
        step = parse_step(text)
        if step:
            self._row(image, job).step = f"{step[0]}/{step[1]} {step[2]}"
            self._refresh()

    def note(self, image: str, job: PlatformJob, text: str) -> None:
        self._row(image, job).status = text
        self._refresh()

    def skipped(self, image: str, job: PlatformJob, why: str) -> None:
        self._row(image, job).status = "skipped (unchanged)"
        self._refresh()

    def finished(self, image: str, job: PlatformJob, digest: str) -> None:
        row = self._row(image, job)
        row.status, row.step, row.ended = "done", digest[:19], time.monotonic()
        self._refresh()

    def failed(self, image: str, job: PlatformJob, why: str, tail: list[str]) -> None:
        row = self._row(image, job)
        row.status, row.ended = "FAILED", time.monotonic()
        self.tails.append((f"{image} {job.platform}: {why}", tail))
        self._refresh()

    def published(self, image: str, index: str, tags: list[str]) -> None:
        moved = ", ".join(tags) if tags else "none (already there)"
        self.published_lines.append(f"{image}: index {index}; tags moved: {moved}")

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
        for head, tail in self.tails:
            self.console.print(f"FAILED {head}", markup=False, style="bold red")
            for line in tail[-15:]:
                self.console.print(f"  | {line}", markup=False, highlight=False)
        for line in self.published_lines:
            self.console.print(line, markup=False)


def reporter_for(console: Console) -> Reporter:
    interactive = console.is_terminal and not os.environ.get("CI") and sys.stdin is not None
    return RichReporter(console) if interactive else PlainReporter(console)
