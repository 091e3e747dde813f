"""Catalog images as bases (`base = "image:NAME"`): what the loader refuses, the facts the
child inherits, how the lock pins the parent, the build order, and the generated workflow's
job graph (`needs`, the affected set, the digest handed from the parent's merge job)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cannery.builder.jobs import plan_build
from cannery.catalog.image_bases import in_build_order
from cannery.catalog.load import load_catalog
from cannery.errors import CatalogError, NotFound
from cannery.lock import (
    Lock,
    Resolvers,
    lock_changes,
    pin_image_bases,
    required_inputs,
    update_lock,
)
from cannery.plan import plan, plan_image
from cannery.render.dockerfile import render_dockerfile
from cannery.render.workflow.groups import groups
from tests.catalogs import line_of, minimal, only_components
from tests.unit.test_workflow_triggers import (
    _actionlint_clean,
    _choose,
    _commit,
    _git,
    _rendered,
)
from tests.unit.workflows import build_legs, flat, merges, outputs

CHILD = """
[images.child]
base = "image:one"
toolkit = "cann852"
platforms = ["linux/amd64"]
tag = "child-{cann}-py{python}"
steps = [{ run = "test -d /usr/local/Ascend" }]
"""
ONE_REF = "registry.example.com/test/images:t-8.5.2-910b-py3.11-r"
DIGEST_A = "sha256:" + "a" * 64
DIGEST_B = "sha256:" + "b" * 64


def _write(tmp_path: Path, extra: str = CHILD, base: str | None = None) -> Path:
    text = only_components(minimal(), "torch") + extra
    if base is not None:
        text = text.replace('[images.one]\nbase = "b910"', f'[images.one]\nbase = "{base}"')
    path = tmp_path / "cannery.toml"
    path.write_text(text)
    return path


def _refused(path: Path) -> list[str]:
    with pytest.raises(CatalogError) as exc:
        load_catalog(path)
    return str(exc.value).splitlines()


def test_the_child_inherits_the_parents_published_reference_and_facts(tmp_path: Path) -> None:
    cat = load_catalog(_write(tmp_path)).catalog
    base = cat.bases["image:one"]
    assert base.image == ONE_REF  # the parent's registry repository and its tag
    assert (base.os, base.os_version, base.chip, base.python) == ("ubuntu", "22.04", "910b", "3.11")
    assert base.toolkit_version == "8.5.2"  # the CANN the parent installed, not its base's
    spec = plan_image(cat, "child", Lock())
    assert spec.built_on == "one" and spec.toolkit is not None and not spec.toolkit.install
    assert spec.tag == "child-8.5.2-py3.11"
    assert "build and push image one first" in render_dockerfile(spec)  # fails closed


@pytest.mark.parametrize(("extra", "base", "want"), [
    (CHILD.replace("image:one", "image:onee"), None,
     "images.child.base: no image 'onee' in the catalog (did you mean 'one'?)"),
    (CHILD, "image:child", "images built FROM each other: one → child → one"),
    (CHILD.replace("image:one", "image:child"), None,
     "images built FROM each other: child → child"),
    (CHILD.replace('platforms = ["linux/amd64"]', 'platforms = ["linux/amd64", "linux/arm64"]')
     .replace("image:one", "image:amd"),
     None, "images.child.base: image amd is not built for linux/arm64 (its platforms: "
     "linux/amd64)"),
    (CHILD.replace("image:one", "image:dated"), None,
     "images.child.base: image dated's tag uses {date}, known only once it is locked"),
])
def test_what_cannot_be_built_from_is_one_line_naming_the_key(
    tmp_path: Path, extra: str, base: str | None, want: str
) -> None:
    more = """
[images.amd]
extends = "one"
recipe = "amd"
platforms = ["linux/amd64"]

[images.dated]
extends = "one"
recipe = "dated"
tag = "d-{date}"
"""
    path = _write(tmp_path, extra + more, base)
    lines = _refused(path)
    hits = [line for line in lines if want in line]
    assert len(hits) == 1, lines  # a cycle is said once, not by each of its images
    # file, line and key: the line of the child's own base key
    child_line = line_of(path.read_text(), "[images.child]") + 1
    assert hits[0].startswith(f"{path}:{child_line}: images.child.base: "), hits[0]


def test_the_lock_pins_the_parents_tag_and_waits_for_a_first_push(tmp_path: Path) -> None:
    cat = load_catalog(_write(tmp_path)).catalog
    inputs = {(i.kind, i.key): i.owner for i in required_inputs(cat, ["child"])}
    assert inputs[("base", ONE_REF)] == "image:one"
    asked: list[str] = []

    def base(ref: str) -> str:
        asked.append(ref)
        if ref == ONE_REF:
            raise NotFound("404")
        return DIGEST_B

    resolvers = Resolvers(base=base, git=lambda u, r: "c" * 40, url=lambda u: ("d" * 64, 1))
    lock = update_lock(cat, Lock(), resolvers, images=["one", "child"])
    assert ONE_REF in asked and ONE_REF not in lock.bases  # not pushed yet: no entry, no error
    assert lock_changes(cat, lock, ["child"])[0]  # still missing for a build of child alone

    def missing_base(ref: str) -> str:
        raise NotFound("404")

    with pytest.raises(NotFound):  # an ordinary base that is missing is an error, as before
        update_lock(cat, Lock(), Resolvers(base=missing_base, git=lambda u, r: "c" * 40,
                                           url=lambda u: ("d" * 64, 1)), images=["one"])
    # Once pushed, the entry carries the parent's base time and OS: the child's clock is the
    # parent's, whether the digest comes from the lock or from the build that pushed it.
    pushed = update_lock(cat, lock, Resolvers(base=lambda r: DIGEST_A, git=lambda u, r: "c" * 40,
                                              url=lambda u: ("d" * 64, 1)),
                         update={"image:one"}, images=["child"])
    parent = pushed.bases[cat.bases["b910"].image]
    assert pushed.bases[ONE_REF].digest == DIGEST_A
    assert pushed.bases[ONE_REF].resolved_at == parent.resolved_at


def test_a_new_parent_digest_moves_the_child_and_only_the_child(tmp_path: Path) -> None:
    cat = load_catalog(_write(tmp_path)).catalog
    lock = update_lock(cat, Lock(), Resolvers(base=lambda r: DIGEST_B, git=lambda u, r: "c" * 40,
                                              url=lambda u: ("d" * 64, 1)))

    def job(lk: Lock, name: str) -> tuple[str, int]:
        spec = plan_image(cat, name, lk)
        j = plan_build(spec, render_dockerfile(spec), lk)
        return j.platforms[0].input_digest, j.epoch

    before = {n: job(lock, n) for n in ("one", "child")}
    moved = pin_image_bases(cat, lock, {"one": DIGEST_A})
    after = {n: job(moved, n) for n in ("one", "child")}
    assert after["one"] == before["one"]
    assert after["child"][0] != before["child"][0]  # the child's inputs moved with its base
    assert after["child"][1] == before["child"][1] == after["one"][1]  # one clock: the parent's
    assert plan_image(cat, "child", moved).base_digest == DIGEST_A


def test_parents_are_built_first_whatever_order_is_asked(tmp_path: Path) -> None:
    extra = CHILD + '\n[images.grandchild]\nbase = "image:child"\nplatforms = ["linux/amd64"]\n' \
        'tag = "gc"\ntoolkit = "cann852"\n'
    cat = load_catalog(_write(tmp_path, extra)).catalog
    assert in_build_order(cat, ["grandchild", "child", "one"]) == ["one", "child", "grandchild"]
    assert in_build_order(cat, ["grandchild", "two"]) == ["grandchild", "two"]  # only those asked
    assert cat.bases["image:child"].image.endswith(":child-8.5.2-py3.11")


def test_the_workflow_builds_the_child_after_the_parents_merge_with_its_digest(
    tmp_path: Path,
) -> None:
    """The child is in a later wave: its build call job runs after the first wave's merges
    (whatever their result); its legs download the index digest the parent's merge uploaded
    when the parent is built in this run (and fail, unbuilt, when that merge did not), else
    build on the lock's digest; a pull request does not build it while the parent is not
    locked."""
    from tests.unit.test_render_workflow import _tool

    path = _write(tmp_path)
    cat = load_catalog(path).catalog
    specs = plan(cat, Lock())
    rendered = _rendered(path)
    jobs = rendered.doc["jobs"]
    assert [(g.wave, g.registries) for g in groups(cat, specs)] == [(0, ("local",)),
                                                                     (1, ("local",))]
    assert jobs["build-0"]["needs"] == "check"
    assert jobs["build-1"]["needs"] == ["check", "merge-0"]
    cond = jobs["build-1"]["if"]
    assert "github.event_name != 'pull_request'" in cond and "!cancelled()" in cond
    assert "needs.check.result == 'success'" in cond
    assert jobs["merge-1"]["needs"] == ["check", "build-1"]
    every = outputs(cat, specs, "workflow_dispatch")
    assert [(leg["image"], leg["parent"], leg["parent_built"])
            for leg in flat(every["build_1"])] == [("child", "one", True)]
    assert {m["image"]: m["base"] for m in merges(every)} == \
        {"one": True, "two": False, "child": False}
    alone = outputs(cat, specs, "workflow_dispatch", images="child")
    assert [leg["parent_built"] for leg in build_legs(alone)] == [False]  # the lock's digest
    pr = outputs(cat, specs, "pull_request", changed=[".github/workflows/cannery-images.yml"])
    assert {leg["image"] for leg in flat(pr["pr"])} == {"one", "two"}  # parent not locked
    build, merge = rendered.job("build"), rendered.job("merge")
    for job in (build, merge):
        fetch = next(s for s in job["steps"] if s["name"].startswith("The index its parent"))
        assert fetch["if"] == "${{ matrix.parent_built }}"
        assert fetch["with"]["name"] == "base-digest-${{ matrix.parent }}"
        steps = [s for s in job["steps"] if "--base-digest" in s.get("run", "")]
        assert steps
        for step in steps:  # in env, never expanded into the script
            assert step["env"]["PARENT"] == "${{ matrix.parent }}"
            assert '--base-digest "${PARENT}=$(cat "${RUNNER_TEMP}/base/digest")"' in step["run"]
            assert "${{" not in step["run"]
    upload = next(s for s in merge["steps"] if s["name"].startswith("Hand on the index"))
    assert upload["if"] == "${{ matrix.base }}"
    assert upload["with"]["name"] == "base-digest-${{ matrix.image }}"
    wf = _actionlint_clean(tmp_path / "repo", rendered)
    zz = subprocess.run([_tool("zizmor"), "--offline", "--no-progress", "--format", "json",
                         "--persona", "auditor", str(wf.parent)],
                        capture_output=True, text=True, timeout=120)
    assert json.loads(zz.stdout or "[]") == [] and zz.returncode == 0, zz.stdout[:2000]


def test_a_change_to_the_parent_marks_the_child_affected(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    _git(root, "config", "user.email", "t@example.com")
    _git(root, "config", "user.name", "t")
    (root / "dockerfiles").mkdir()
    for f in ("one", "two", "child"):
        (root / "dockerfiles" / f"{f}.Dockerfile").write_text(f"# {f}\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "start")
    path = _write(tmp_path)
    before = _commit(root, "dockerfiles/one.Dockerfile")
    assert _choose(root, "push", before, catalog=path)[1] == ["one", "child"]
    before = _commit(root, "dockerfiles/child.Dockerfile")
    assert _choose(root, "push", before, catalog=path)[1] == ["child"]  # not the other way
    before = _commit(root, "dockerfiles/two.Dockerfile")
    assert _choose(root, "push", before, catalog=path)[1] == ["two"]


def _merge_step(tmp_path: Path, cannery: str) -> tuple[int, str]:
    """Run the rendered merge step for the parent (matrix.base true) as GitHub does (bash
    -e), with ``cannery`` (a shell script body) in place of cannery; its exit status and the
    digest file it hands on ("" when none)."""
    tmp_path.mkdir()
    merge = _rendered(_write(tmp_path)).job("merge")
    script = next(s for s in merge["steps"] if "--merge-only" in s.get("run", ""))["run"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "cannery"
    fake.write_text("#!/bin/sh\n" + cannery)
    fake.chmod(0o755)
    (tmp_path / "step.sh").write_text(script)
    proc = subprocess.run(["bash", "-e", str(tmp_path / "step.sh")], capture_output=True,
                          text=True, timeout=60, env={
                              "PATH": f"{bin_dir}:/usr/bin:/bin", "RUNNER_TEMP": str(tmp_path),
                              "IMAGE": "one", "PARENT": "", "BASE": "true"})
    digest = tmp_path / "base-out" / "digest"
    return proc.returncode, digest.read_text() if digest.exists() else ""


def test_the_parents_merge_step_fails_with_cannery_and_hands_on_only_a_digest(
    tmp_path: Path,
) -> None:
    """The merge step of an image others are built FROM: a failed merge fails the step (no
    green job, no child built on the old parent), and so does an answer without a digest."""
    failed = 'echo \'{"images": [{"index_digest": null, "error": "push failed"}]}\'; exit 1\n'
    rc, digest = _merge_step(tmp_path / "a", failed)
    assert rc != 0 and digest == ""
    rc, digest = _merge_step(tmp_path / "b", 'echo \'{"images": [{"index_digest": null}]}\'\n')
    assert rc != 0 and "sha256" not in digest
    good = f'echo \'{{"images": [{{"index_digest": "{DIGEST_A}"}}]}}\'\n'
    rc, digest = _merge_step(tmp_path / "c", good)
    assert rc == 0 and digest == f"{DIGEST_A}\n"


def test_a_stage_cannot_start_from_a_catalog_image(tmp_path: Path) -> None:
    extra = CHILD + """
[[images.child.stages]]
name = "tools"
base = "image:one"
outputs = ["/opt/tools"]
"""
    lines = _refused(_write(tmp_path, extra))
    assert any("images.child.stages[0].base: 'image:one': a builder stage starts from a bases "
               "entry" in line for line in lines), lines


def test_a_parent_on_its_own_earlier_release_locks_without_recursing(tmp_path: Path) -> None:
    """An image FROM its own published tag (its previous release) with a child: the lock's
    entry for that tag is both the parent's base and the child's; no endless chain."""
    path = _write(tmp_path)
    text = path.read_text().replace('image = "registry.example.com/cann:8.5.1-910b-ubuntu22.04'
                                    '-py3.11"', f'image = "{ONE_REF}"')
    path.write_text(text)
    cat = load_catalog(path).catalog
    lock = update_lock(cat, Lock(), Resolvers(base=lambda r: DIGEST_A, git=lambda u, r: "c" * 40,
                                              url=lambda u: ("d" * 64, 1)))
    assert lock.bases[ONE_REF].digest == DIGEST_A


def test_the_child_of_a_microdnf_parent_installs_with_microdnf(tmp_path: Path) -> None:
    path = _write(tmp_path)
    path.write_text(path.read_text().replace(
        'os = "ubuntu"\nos_version = "22.04"\n',
        'os = "rhel"\nos_version = "9"\npackage_manager = "microdnf"\n'))
    cat = load_catalog(path).catalog
    assert plan_image(cat, "child", Lock()).package_manager == "microdnf"
