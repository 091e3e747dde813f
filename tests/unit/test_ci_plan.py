"""`cannery ci plan` and the workflow shape at any family size: the rendered workflow files do
not grow with the number of images (GitHub refuses a file over 500 KB and a matrix over 256
jobs), and the command hands the legs on in chunks of at most 256, per group of images that
need the same secrets and build in the same wave.

The affected sets on real git histories are in test_workflow_triggers.py (and the image-base
ones in test_image_bases.py); the GitHub job graph over these outputs is gha's interpreter's
(tests/services/gha.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from cannery.catalog.load import load_catalog
from cannery.commands.ci import Event, affected, plan_outputs
from cannery.errors import InputError
from cannery.lock import BaseEntry, Lock
from cannery.plan import plan
from cannery.render.workflow.groups import CHUNK, chunks, groups
from tests.catalogs import ci_entries, minimal, only_components, tiny
from tests.unit.workflows import build_legs, flat, merges, outputs, render

BASE = "quay.io/ascend/cann:9.1.0-910b-ubuntu22.04-py3.11"
# GitHub's limits: a workflow file, a matrix, one job output.
FILE_LIMIT, MATRIX_LIMIT, OUTPUT_LIMIT = 500_000, 256, 1_000_000


def _family(tmp_path: Path, n: int) -> tuple[Any, list[Any]]:
    """One image on a base that ships its CANN and n - 1 `extends` children (bench/scale.py's
    family), with a lock of the base: catalog and plan."""
    text = tiny("scale", "quay.io/ascend/scale", BASE, "9.1.0-{chip}-{recipe}")
    text = text.replace('tag = "9.1.0-{chip}-{recipe}"',
                        'tag = "9.1.0-{chip}-{recipe}"\nrecipe = "r0"')
    text += "".join(f'\n[images.v{i}]\nextends = "one"\nrecipe = "r{i}"\n' for i in range(1, n))
    path = tmp_path / f"n{n}" / "cannery.toml"
    path.parent.mkdir()
    path.write_text(text)
    cat = load_catalog(path).catalog
    lock = Lock(bases={BASE: BaseEntry(digest="sha256:" + "1" * 64,
                                       resolved_at="2026-12-01T00:00:00Z",
                                       os_id="ubuntu", os_version="22.04")},
                ci=ci_entries(cat))  # type: ignore[arg-type]
    return cat, plan(cat, lock)


def _matrices(node: object) -> list[object]:
    """Every static matrix list (a strategy.matrix value or its include) in a workflow."""
    found: list[object] = []
    if isinstance(node, dict):
        matrix = node.get("strategy", {}).get("matrix") if isinstance(
            node.get("strategy"), dict) else None
        if isinstance(matrix, dict):
            found += [v for v in matrix.values() if isinstance(v, list)]
        for value in node.values():
            found += _matrices(value)
    elif isinstance(node, list):
        for value in node:
            found += _matrices(value)
    return found


def test_a_1024_image_family_renders_the_same_workflows_as_an_8_image_one(
    tmp_path: Path,
) -> None:
    """The workflow files are the same bytes for 8 and 1,024 images (so they never grow with
    the family), each under GitHub's 500 KB, with no static matrix over 256; the 1,024
    images' 2,048 legs come from `cannery ci plan`, in chunks of at most 256, each output
    under GitHub's 1 MB."""
    small = render(*_family(tmp_path, 8), "cannery.toml")
    cat, specs = _family(tmp_path, 1024)
    big = render(cat, specs, "cannery.toml")
    assert big.files == small.files
    for rel, text in big.files.items():
        assert len(text.encode()) < FILE_LIMIT, rel
        for matrix in _matrices(yaml.safe_load(text)):
            assert len(matrix) <= MATRIX_LIMIT, rel  # type: ignore[arg-type]
    start = time.perf_counter()
    raw = plan_outputs(cat, specs, Event("workflow_dispatch"))
    took = time.perf_counter() - start
    assert took < 30, took  # (a loaded 2-core machine: about 0.1 s here)
    for name, value in raw.items():
        assert len(f"{name}={value}".encode()) < OUTPUT_LIMIT, name
        assert "\n" not in value, name
    out = {k: json.loads(v) for k, v in raw.items()}
    assert len(out["images"]) == 1024
    legs = build_legs(out)
    assert len(legs) == 2048 and len(out["build_0"]["legs"]) == 2048 // CHUNK
    assert len(merges(out)) == 1024 and len(out["merge_0"]["legs"]) == 1024 // CHUNK
    assert {(leg["image"], leg["platform"]) for leg in legs} == {
        (s.name, p) for s in specs for p in s.platforms}
    # one group: one build and one merge call job, whatever the size
    assert [j for j in big.doc["jobs"] if j != "check"] == ["pr", "build-0", "merge-0"]
    pr = outputs(cat, specs, "pull_request", changed=["dockerfiles/v7.Dockerfile"])
    assert [(leg["image"], leg["platform"]) for leg in flat(pr["pr"])] == [
        ("v7", "linux/amd64"), ("v7", "linux/arm64")]
    assert build_legs(pr) == [] and merges(pr) == []


@pytest.mark.parametrize(("n", "parts"), [(0, []), (1, [1]), (256, [256]), (257, [256, 1]),
                                          (600, [256, 256, 88])])
def test_chunks_hold_at_most_256_in_order(n: int, parts: list[int]) -> None:
    items = [{"i": i} for i in range(n)]
    got = chunks(items)
    assert got["count"] == n and got["chunks"] == list(range(len(parts)))
    assert [len(c) for c in got["legs"]] == parts  # type: ignore[union-attr]
    assert flat(got) == items


GRANDCHILD = """
[images.child]
base = "image:one"
toolkit = "cann852"
platforms = ["linux/amd64"]
tag = "child-{cann}-py{python}"

[images.grandchild]
base = "image:child"
toolkit = "cann852"
platforms = ["linux/amd64"]
tag = "grandchild-{cann}-py{python}"
"""


def test_waves_and_ancestors(tmp_path: Path) -> None:
    """A chain one <- child <- grandchild: three waves, each build call after the previous
    wave's merges; a change to one's Dockerfile builds the whole chain, in catalog order."""
    path = tmp_path / "cannery.toml"
    path.write_text(only_components(minimal(), "torch") + GRANDCHILD)
    cat = load_catalog(path).catalog
    specs = plan(cat, Lock())
    assert [g.wave for g in groups(cat, specs)] == [0, 1, 2]
    doc = render(cat, specs, "cannery.toml").doc
    assert doc["jobs"]["build-1"]["needs"] == ["check", "merge-0"]
    assert doc["jobs"]["build-2"]["needs"] == ["check", "merge-1"]
    event = Event("push", ref="refs/heads/main", changed=["dockerfiles/one.Dockerfile"])
    assert affected(cat, specs, event) == ["one", "child", "grandchild"]
    event = Event("push", ref="refs/heads/main", changed=["dockerfiles/child.Dockerfile"])
    assert affected(cat, specs, event) == ["child", "grandchild"]
    out = outputs(cat, specs, "push", ref="refs/heads/main",
                  changed=["dockerfiles/child.Dockerfile"])
    legs = {leg["image"]: leg for leg in build_legs(out)}
    assert (legs["child"]["parent"], legs["child"]["parent_built"]) == ("one", False)
    assert (legs["grandchild"]["parent"], legs["grandchild"]["parent_built"]) == \
        ("child", True)
    assert {m["image"]: m["base"] for m in merges(out)} == {"child": True, "grandchild": False}


def test_mirrors_make_a_group_of_their_own(tmp_path: Path) -> None:
    """An image published to several registries is not grouped with one published to one:
    its merge call job passes every registry's secrets, the other's only its own."""
    from tests.unit.test_publish_workflow import _catalog  # mirrors; SWR's own secrets

    path = _catalog(tmp_path)
    path.write_text(path.read_text()
                    + '\n[images.solo]\nextends = "one"\nrecipe = "solo"\nmirrors = []\n')
    cat = load_catalog(path).catalog
    specs = plan(cat, Lock())
    shape = groups(cat, specs)
    assert len(shape) == 2 and {len(g.registries) for g in shape} == {1, 3}
    jobs = render(cat, specs, "cannery.toml").doc["jobs"]
    passed = {len(g.registries): set(jobs[f"merge-{i}"]["secrets"])
              for i, g in enumerate(shape)}
    assert passed[1] == {"REGISTRY_USER", "REGISTRY_PASSWORD"}
    assert passed[1] < passed[3] and {"SWR_USER", "SWR_PASSWORD"} <= passed[3]


@pytest.mark.parametrize("event", ["schedule", "release", "push"])
def test_every_image_when_the_event_names_no_change(tmp_path: Path, event: str) -> None:
    path = tmp_path / "cannery.toml"
    path.write_text(minimal())
    cat = load_catalog(path).catalog
    specs = plan(cat, Lock())
    ref = "refs/tags/v1" if event != "schedule" else "refs/heads/main"
    assert affected(cat, specs, Event(event, ref=ref)) == ["one", "two"]


def test_the_command_prints_github_output_lines(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "cannery.toml"
    path.write_text(minimal())
    res = cli("ci", "plan", "--catalog", str(path), "--event", "workflow_dispatch",
              "--images", "two")
    assert res.code == 0, res.err
    lines = dict(line.split("=", 1) for line in res.out.splitlines())
    assert list(lines) == ["images", "publish", "pr", "build_0", "merge_0"]
    assert json.loads(lines["images"]) == ["two"]
    assert [m["image"] for m in merges({"merge_0": json.loads(lines["merge_0"])})] == ["two"]
    res = cli("ci", "plan", "--catalog", str(path), "--event", "workflow_dispatch",
              "--images", "three")
    assert res.code == 2 and "no image three" in res.err and "Traceback" not in res.err
    with pytest.raises(InputError):
        plan_outputs(load_catalog(path).catalog, plan(load_catalog(path).catalog, Lock()),
                     Event("workflow_dispatch", images="$(x)"))
