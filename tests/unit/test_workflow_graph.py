"""The rendered workflows' job graph, interpreted as GitHub runs it (tests/services/gha.py),
for each event x affected set, at 1,024 images and on a catalog of every shape (``image:``
bases three waves deep, a build secret, two registry groups, a pull-request label).

The check job's plan step is the real one: its script runs with ``bash`` in the env the
interpreter gives it, its ``cannery`` is cannery's own ``ci plan`` (in-process, the catalog and
plan loaded once; the changed paths given as ``--changed`` would give them). Every other step
is recorded, and the artifacts stand in as GitHub keeps them (a name once per run): a build
leg's descriptor upload, the merge's check that every platform's descriptor is there, the
parent's index digest a child's leg downloads (a missing artifact fails the step, as
download-artifact does). Asserted for each run: each affected image built exactly once per
platform and merged exactly once (a pull request: built once per platform, nothing pushed, no
merge), never an unaffected one, a child's legs after its parent's merge, no secret on any leg
of a pull request, a build secret only on its image's legs, a registry's credentials only on
the legs of images that publish there; GitHub's limits (no matrix over 256 legs, every file
under 500 KB, nesting, unique reusable workflows) hold, or the interpreter raises.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from cannery.catalog.load import load_catalog
from cannery.catalog.models import Catalog
from cannery.commands.ci import Event as PlanEvent
from cannery.commands.ci import plan_outputs
from cannery.commands.render import Context, render_kind
from cannery.errors import FatalError
from cannery.lock import BaseEntry, Lock, dump_lock, pin_image_bases
from cannery.plan import ImageSpec
from cannery.render import dockerfile_name
from tests.catalogs import ci_entries, tiny
from tests.services.gha import MAX_FILE_BYTES, Interpreter, Run, StepCall, StepFailed
from tests.services.gha_events import Event

BASE = "quay.io/ascend/cann:9.1.0-910b-ubuntu22.04-py3.11"
DIGEST = "sha256:" + "1" * 64
CI = ('\n[ci]\nbuild_branches = ["dev/**"]\nrelease_tags = ["v*"]\nreleases = true\n'
      'schedule = "0 3 * * *"\n')
WORKFLOWS = ".github/workflows"


def scale_text(n: int) -> str:
    """One image and n - 1 ``extends`` children, two platforms (bench/scale.py's shape)."""
    text = tiny("scale", "quay.io/ascend/scale", BASE, "9.1.0-{chip}-{recipe}")
    text = text.replace('tag = "9.1.0-{chip}-{recipe}"',
                        'tag = "9.1.0-{chip}-{recipe}"\nrecipe = "r0"')
    children = "".join(f'\n[images.v{i}]\nextends = "one"\nrecipe = "r{i}"\n'
                       for i in range(1, n))
    return text + children + CI


def shape_text(children: int) -> str:
    """``p`` and its ``children`` (``image:p``), ``g`` on ``image:c0``, ``s`` with a build
    secret, ``q`` publishing to a second registry with other credentials; a pr_label, and a
    manual run's input tags."""
    text = tiny("shape", "quay.io/ascend/shape", BASE, "9.1.0-{chip}-p").replace(
        "[images.one]", "[images.p]")
    text = text.replace(
        '[registries.local]\nrepository = "quay.io/ascend/shape"\n',
        '[registries.local]\nrepository = "quay.io/ascend/shape"\nuser_secret = "QUAY_USER"\n'
        'password_secret = "QUAY_PASSWORD"\n\n[registries.other]\n'
        'repository = "registry.example.com/other"\nuser_secret = "OTHER_USER"\n'
        'password_secret = "OTHER_PASSWORD"\n')
    two = 'platforms = ["linux/amd64", "linux/arm64"]'
    for i in range(children):
        text += f'\n[images.c{i}]\nbase = "image:p"\ntoolkit = "t"\n{two}\ntag = "c{i}-{{chip}}"\n'
    text += ('\n[images.g]\nbase = "image:c0"\ntoolkit = "t"\nplatforms = ["linux/amd64"]\n'
             'tag = "g-{chip}"\n'
             f'\n[images.s]\nbase = "b"\ntoolkit = "t"\n{two}\ntag = "s-{{chip}}"\n'
             '\n[[images.s.downloads]]\nname = "data"\nurl_secret = "DATA_URL"\n'
             'path = "/opt/data"\n'
             f'\n[images.q]\nbase = "b"\ntoolkit = "t"\nregistry = "other"\n{two}\n'
             'tag = "q-{chip}"\n')
    return text + CI.replace("[ci]\n", '[ci]\npr_label = "build-images"\ndispatch_tags = true\n')


@dataclass
class Family:
    """A rendered repository, its catalog and plan, and what each image may be given."""

    root: Path
    cat: Catalog
    specs: list[ImageSpec]
    allowed: dict[str, set[str]] = field(default_factory=dict)  # image -> secret names

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.specs]

    def spec(self, name: str) -> ImageSpec:
        return next(s for s in self.specs if s.name == name)

    def secrets(self) -> set[str]:
        return set().union(*self.allowed.values())


def _family(root: Path, text: str, locked: tuple[str, ...] = ()) -> Family:
    root.mkdir()
    path = root / "cannery.toml"
    path.write_text(text)
    loaded = load_catalog(path)
    cat = loaded.catalog
    lock = Lock(bases={BASE: BaseEntry(digest=DIGEST, resolved_at="2026-12-01T00:00:00Z",
                                       os_id="ubuntu", os_version="22.04")},
                ci=ci_entries(cat))  # type: ignore[arg-type]
    # parents already published and locked: their children have pull-request legs
    lock = pin_image_bases(cat, lock, dict.fromkeys(locked, "sha256:" + "2" * 64))
    (root / "cannery.lock").write_text(dump_lock(lock))
    ctx = Context(loaded, lock, root, path.name)
    for kind in ("dockerfile", "workflow"):
        for p, body in render_kind(kind, ctx, None).items():
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(body)
    fam = Family(root, cat, ctx.specs())
    for spec in fam.specs:
        names = set(spec.secrets)
        for target in spec.registries:
            reg = cat.registries[target.name]
            names |= {reg.password_secret} | ({reg.user_secret} if reg.user_var is None
                                               else set())
        fam.allowed[spec.name] = names
    return fam


@pytest.fixture(scope="module")
def scale(tmp_path_factory: pytest.TempPathFactory) -> Family:
    return _family(tmp_path_factory.mktemp("graph") / "scale", scale_text(1024))


@pytest.fixture(scope="module")
def shape(tmp_path_factory: pytest.TempPathFactory) -> Family:
    # 300 children of p: wave 1 has 600 legs, three chunks
    return _family(tmp_path_factory.mktemp("graph") / "shape", shape_text(300), ("p", "c0"))


class Steps:
    """The steps of one run: the check job's plan for real, the artifacts as GitHub keeps
    them, every other step recorded (by the interpreter's trace)."""

    def __init__(self, fam: Family, changed: list[str] | None) -> None:
        self.fam, self.changed = fam, changed
        self.artifacts: set[str] = set()

    def __call__(self, call: StepCall) -> Mapping[str, str]:
        name = call.name
        if call.id == "plan":
            return self.plan(call)
        if call.uses.startswith("actions/upload-artifact@"):
            # upload-artifact v4+: a name is uploaded once per run (unless overwrite: true)
            if call.with_["name"] in self.artifacts and call.with_.get("overwrite") != "true":
                raise StepFailed(f"{call.leg}: artifact {call.with_['name']} exists")
            self.artifacts.add(call.with_["name"])
        elif call.uses.startswith("actions/download-artifact@") and "name" in call.with_:
            if call.with_["name"] not in self.artifacts:
                raise StepFailed(f"{call.leg}: no artifact {call.with_['name']}")
        elif name.startswith("Every platform leg of this image succeeded"):
            image = call.env["IMAGE"]
            arches = [p.split("/")[1] for p in call.env["PLATFORMS"].split()]
            if any(f"digest-{image}-{a}" not in self.artifacts for a in arches):
                raise StepFailed(f"{image}: a platform's descriptor is missing")
        elif call.uses.startswith("docker/setup-buildx-action@"):
            return {"name": "builder"}
        return {}

    def plan(self, call: StepCall) -> Mapping[str, str]:
        """The plan step's script under bash with its env; its ``cannery`` prints its
        arguments, which go to cannery's own ``ci plan`` (as ``ci_cli.ci_plan`` passes them)."""
        env = {"PATH": os.environ["PATH"], **call.defaults, **call.env}
        script = 'cannery() { printf "%s\\0" "$@"; }\n' + str(call.run).replace(
            '>> "${GITHUB_OUTPUT}"', "")
        done = subprocess.run(["bash", "-e", "-c", script], env=env, capture_output=True,
                              check=True, cwd=self.fam.root)
        args = done.stdout.decode().split("\0")[:-1]
        assert args[:2] == ["ci", "plan"], args
        opts = dict(zip(args[2::2], args[3::2], strict=True))
        assert opts.get("--catalog", "cannery.toml") == "cannery.toml"
        event = PlanEvent(opts["--event"], opts.get("--ref", ""), opts.get("--before", ""),
                          opts.get("--images", ""), opts.get("--tags", ""), self.changed)
        try:
            return plan_outputs(self.fam.cat, self.fam.specs, event)
        except FatalError as exc:  # exit 2: the step fails
            raise StepFailed(str(exc)) from None


def interpret(fam: Family, event: Event) -> list[Run]:
    return Interpreter(fam.root, Steps(fam, event.changed), secrets=sorted(fam.secrets())).run(
        event)


def _descendants(fam: Family, name: str) -> list[str]:
    out = [name]
    for spec in fam.specs:  # catalog order: a parent comes before its children
        if spec.built_on in out:
            out.append(spec.name)
    return [n for n in fam.names if n in out]


def _pr_able(fam: Family, name: str) -> bool:
    """A pull request builds an image unless it needs a build secret or is built FROM a
    catalog image that is not locked (docs/guides/ci.md)."""
    spec = fam.spec(name)
    return not spec.secrets and (spec.built_on is None or spec.base_digest is not None)


def fam_parent(fam: Family, name: str) -> str | None:
    return fam.spec(name).built_on


def check(fam: Family, runs: list[Run], expected: list[str], mode: str) -> None:
    """``mode``: "publish" (built per platform, merged), "pr" (built per platform, nothing
    pushed, no merge, no secret), "nothing"."""
    for rel in (fam.root / WORKFLOWS).glob("*.yml"):
        assert rel.stat().st_size < MAX_FILE_BYTES, rel
    legs = [g for run in runs for g in run.legs]
    assert all(j.result in ("success", "skipped") for run in runs for j in run.jobs.values()), [
        (k, j.result) for run in runs for k, j in run.jobs.items()]
    assert not [g for g in legs if g.result == "cancelled"]

    def inner(suffix: str) -> list[Any]:
        return [g for g in legs if g.workflow.endswith(suffix) and not g.uses]

    build, merge, pr = inner("-build.yml"), inner("-merge.yml"), inner("-pr.yml")
    platforms = {n: fam.spec(n).platforms for n in expected}
    want = Counter((n, p) for n in expected for p in platforms[n])
    if mode != "publish":
        assert not build and not merge
        if mode == "pr":
            assert Counter((g.matrix["image"], g.matrix["platform"]) for g in pr) == Counter(
                {k: v for k, v in want.items() if _pr_able(fam, k[0])})
            assert all(g.secrets <= {"GITHUB_TOKEN"} for g in legs), [
                (g.leg, g.secrets) for g in legs if g.secrets]
        else:
            assert not pr
        return
    assert not pr
    assert Counter((g.matrix["image"], g.matrix["platform"]) for g in build) == want
    assert Counter(g.matrix["image"] for g in merge) == Counter(expected)
    # a concurrency group holds one running and one pending job: two legs of a run sharing
    # one would cancel each other's pending leg
    groups = Counter(g.concurrency["group"] for g in build + merge)
    assert all(n == 1 for n in groups.values()), groups.most_common(3)
    merged_at = {g.matrix["image"]: legs.index(g) for g in merge}
    for g in build:
        image = g.matrix["image"]
        assert legs.index(g) < merged_at[image]
        parent = fam.spec(image).built_on
        if parent in merged_at:  # its parent is built in this run: after the parent's merge
            assert merged_at[parent] < legs.index(g), (image, parent)
        assert g.secrets <= fam.allowed[image], (g.leg, g.secrets)
        assert set(fam.spec(image).secrets) <= g.secrets, g.leg  # it gets what it needs
    for g in merge:
        assert g.secrets <= fam.allowed[g.matrix["image"]] - set(
            fam.spec(g.matrix["image"]).secrets), (g.leg, g.secrets)


# The changed paths of each affected set: one image's rendered Dockerfile, a parent's (its
# children have its inputs), a workflow file (every image's input), or TAGS.md (in the paths
# filter, so the workflow runs, but no image's input).
SETS = ("none", "one", "parent", "all")
ONE = {"scale": "v7", "shape": "s"}
PARENT = {"scale": "one", "shape": "p"}


def _affected(fam: Family, which: str, kind: str) -> tuple[list[str], list[str]]:
    """The images a set affects (in catalog order) and the paths that change them."""
    if which == "none":
        return [], ["TAGS.md"]
    if which == "all":
        return fam.names, [f"{WORKFLOWS}/cannery-images.yml"]
    name = (ONE if which == "one" else PARENT)[kind]
    path = f"{fam.cat.ci.dockerfiles}/{dockerfile_name(name)}"
    return _descendants(fam, name), [path]


@pytest.fixture(params=["scale", "shape"])
def fam(request: pytest.FixtureRequest) -> Iterator[tuple[str, Family]]:
    yield request.param, request.getfixturevalue(request.param)


@pytest.mark.parametrize("which", SETS)
def test_a_pull_request_builds_what_it_touches_once_per_platform_and_pushes_nothing(
        fam: tuple[str, Family], which: str) -> None:
    kind, family = fam
    expected, changed = _affected(family, which, kind)
    labelled = Event.pull_request(changed=changed, labels=("build-images",))
    check(family, interpret(family, labelled), expected, "pr")
    plain = interpret(family, Event.pull_request(changed=changed))
    # the shape catalog builds pull requests only while they carry its pr_label
    check(family, plain, expected, "nothing" if kind == "shape" else "pr")
    # a fork's pull request: the same legs (it needs no secret)
    fork = interpret(family, Event.pull_request(changed=changed, fork=True,
                                                labels=("build-images",)))
    check(family, fork, expected, "pr")


@pytest.mark.parametrize("which", SETS)
def test_a_branch_push_publishes_what_it_touches_and_a_build_branch_publishes_nothing(
        fam: tuple[str, Family], which: str) -> None:
    kind, family = fam
    expected, changed = _affected(family, which, kind)
    check(family, interpret(family, Event.push(changed=changed)), expected, "publish")
    check(family, interpret(family, Event.push("refs/heads/dev/x", changed=changed)),
          expected, "pr")


@pytest.mark.parametrize("event", [Event.push("refs/tags/v1"), Event.release("v1"),
                                   Event.schedule("0 3 * * *"), Event.dispatch()],
                         ids=["tag", "release", "schedule", "dispatch"])
def test_a_release_the_schedule_and_a_manual_run_publish_every_image(
        fam: tuple[str, Family], event: Event) -> None:
    _, family = fam
    check(family, interpret(family, event), family.names, "publish")


@pytest.mark.parametrize("which", ["one", "parent"])
def test_a_manual_run_publishes_the_images_it_names(fam: tuple[str, Family], which: str) -> None:
    kind, family = fam
    expected, _ = _affected(family, which, kind)
    runs = interpret(family, Event.dispatch({"images": " ".join(expected)}))
    check(family, runs, expected, "publish")
    # a parent named alone: its children are not built (they stay on the lock's digest)
    only = (ONE if which == "one" else PARENT)[kind]
    check(family, interpret(family, Event.dispatch({"images": only})), [only], "publish")


def test_a_release_never_loads_a_matrix_over_256_legs_and_splits_the_legs(
        scale: Family, tmp_path_factory: pytest.TempPathFactory) -> None:
    (run,) = interpret(scale, Event.release("v1"))
    calls = [g for g in run.legs if g.uses]
    # 2,048 build legs in 8 chunks of 256, 1,024 merges in 4: no call job or called job
    # has over 256 legs
    assert Counter(g.job for g in calls) == {"build-0": 8, "merge-0": 4}
    assert Counter(g.job for g in run.legs if not g.uses) == {
        "check": 1, "build-0/build": 2048, "merge-0/merge": 1024}
    # No job names an image (they are data), not even the lock-update jobs: they read the
    # paths a lock update may change (every rendered Dockerfile) from a list rendered beside
    # the workflow, so every workflow file is the same bytes at 8 images as at 1,024 (the
    # main one was 14.3 KB at 8 and 99.5 KB at 1,024 when it inlined that list; 14.7 KB now)
    small = _family(tmp_path_factory.mktemp("graph") / "small", scale_text(8))
    ymls = sorted((scale.root / WORKFLOWS).glob("*.yml"))
    assert len(ymls) == 4  # the main workflow and the build, merge and pr ones it calls
    for rel in ymls:
        assert rel.stat().st_size < MAX_FILE_BYTES, rel
        jobs = yaml.safe_load(rel.read_text())["jobs"]
        assert not [j for j, job in jobs.items() if "v1000" in json.dumps(job)], rel.name
        assert rel.read_bytes() == (small.root / WORKFLOWS / rel.name).read_bytes(), rel
    listed = (scale.root / WORKFLOWS / "cannery-images-lock-update-paths.txt").read_text()
    assert len(listed.splitlines()) == 1024 + 4 and "dockerfiles/v1000.Dockerfile\n" in listed


def test_a_failed_parent_leg_builds_no_child_and_merges_neither(shape: Family) -> None:
    """The parent's arm64 leg fails: its merge fails at the every-platform check, nothing
    hands on its digest, so each child's leg fails at the download, and no child merges."""
    steps = Steps(shape, [f"{WORKFLOWS}/cannery-images.yml"])

    def failing(call: StepCall) -> Mapping[str, str]:
        if (call.name.startswith("Build and push by digest") and call.env.get("IMAGE") == "p"
                and call.env.get("PLATFORM") == "linux/arm64"):
            raise StepFailed("p arm64")
        return steps(call)

    (run,) = Interpreter(shape.root, failing, secrets=sorted(shape.secrets())).run(
        Event.push(changed=[f"{WORKFLOWS}/cannery-images.yml"]))
    failed = {g.matrix.get("image") for g in run.legs if g.result == "failure" and not g.uses}
    assert failed == {"p", *(f"c{i}" for i in range(300)), "g"}
    assert "base-digest-p" not in steps.artifacts
    children = [g for g in run.legs if g.job.endswith("/build") and g.matrix["image"] != "p"
                and fam_parent(shape, g.matrix["image"])]
    assert children and not [g for g in children if any(
        s.name.startswith("Build and push by digest") for s in g.steps)]
    assert {a for a in steps.artifacts if a.startswith("digest-c")} == set()
    merged = {g.matrix["image"] for g in run.legs if g.job.endswith("/merge")
              and g.result == "success"}
    assert merged == {"s", "q"}  # the other images of wave 0 are not held back


def test_a_manual_runs_tags_reach_the_merges_of_the_images_it_names(shape: Family) -> None:
    runs = interpret(shape, Event.dispatch({"images": "q", "tags": "extra1 extra2"}))
    check(shape, runs, ["q"], "publish")
    merges = [g for g in runs[0].legs if g.job.endswith("/merge")]
    assert [s.env.get("EXTRA_TAGS") for m in merges for s in m.steps
            if s.name.startswith("Merge into one index")] == ["extra1 extra2"]
    # two selected images of one repository: a tag would name two indexes; check fails
    (run,) = interpret(shape, Event.dispatch({"images": "c0 c1", "tags": "x"}))
    assert run.jobs["check"].result == "failure"
    assert [g.job for g in run.ran()] == ["check"]
