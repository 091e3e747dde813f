"""Test helpers for the rendered workflows: every file of one render, parsed, and what
`cannery ci plan` outputs for an event (the legs the workflow's matrices run)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cannery.catalog.models import Catalog
from cannery.commands.ci import Event, plan_outputs
from cannery.plan import ImageSpec
from cannery.render.actions import load_pins
from cannery.render.workflow import render_workflows


@dataclass
class Rendered:
    """One render: ``files`` (path from the catalog's directory → text), the main
    workflow's ``doc``, and each reusable workflow's one job (``build``, ``merge``, ``pr``)."""

    files: dict[str, str]
    main_path: str

    @property
    def text(self) -> str:
        return self.files[self.main_path]

    @property
    def all_text(self) -> str:
        return "".join(self.files.values())

    @property
    def doc(self) -> dict[str, Any]:
        return yaml.safe_load(self.text)  # type: ignore[no-any-return]

    def reusable(self, kind: str) -> dict[str, Any]:
        path = self.main_path.rsplit(".", 1)[0] + f"-{kind}.yml"
        return yaml.safe_load(self.files[path])  # type: ignore[no-any-return]

    def job(self, kind: str) -> dict[str, Any]:
        """The one job of the reusable workflow ``kind`` (build, merge, pr)."""
        jobs = self.reusable(kind)["jobs"]
        assert len(jobs) == 1
        return next(iter(jobs.values()))  # type: ignore[no-any-return]

    def write(self, root: Path) -> None:
        for rel, text in self.files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text, encoding="utf-8")


def render(cat: Catalog, specs: list[ImageSpec], catalog_file: str | None,
           ci_pins: str | None = "x==1 --hash=sha256:" + "0" * 64 + "\n") -> Rendered:
    files = render_workflows(cat, specs, load_pins(), catalog_file=catalog_file,
                             lock_file="cannery.lock", ci_pins=ci_pins)
    return Rendered(files, cat.ci.workflow)


def outputs(cat: Catalog, specs: list[ImageSpec], event: str, **kw: Any) -> dict[str, Any]:
    """`cannery ci plan`'s outputs for the event, each parsed from its JSON."""
    return {k: json.loads(v) for k, v in plan_outputs(cat, specs, Event(event, **kw)).items()}


def flat(chunked: dict[str, Any]) -> list[dict[str, Any]]:
    """A chunked list's items, in order (and each chunk at most 256)."""
    assert all(len(c) <= 256 for c in chunked["legs"])
    assert chunked["chunks"] == list(range(len(chunked["legs"])))
    items = [leg for chunk in chunked["legs"] for leg in chunk]
    assert chunked["count"] == len(items)
    return items


def build_legs(out: dict[str, Any]) -> list[dict[str, Any]]:
    """Every group's build legs."""
    return [leg for k in sorted(out) if k.startswith("build_") for leg in flat(out[k])]


def merges(out: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for k in sorted(out) if k.startswith("merge_") for m in flat(out[k])]
