"""The generated workflow's triggers: the pull-request path (no secret, no push, no login),
release tags, manual runs with inputs, max-parallel, the disk clean-up step, the scheduled lock
update, and the `check` job's choice of images (`cannery ci plan`, run on real git
histories)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from cannery.catalog.load import load_catalog
from cannery.commands.ci import Event, publishes
from cannery.errors import CatalogError, InputError
from cannery.lock import Lock
from cannery.plan import plan
from cannery.pydeps import ci_requirements
from tests.catalogs import ci_entries, minimal
from tests.conftest import GOLDEN, ROOT
from tests.unit.test_publish_workflow import _render as multi_registry_workflow
from tests.unit.workflows import Rendered, build_legs, flat, merges, outputs
from tests.unit.workflows import render as render_files

# Every generated workflow checked in: the embedded catalog's golden and each example's.
# (the main workflows: the reusable ones beside each are read through it)
GENERATED = sorted(
    p for p in [GOLDEN / "workflow" / "embedded" / "cannery-images.yml",
                *(ROOT / "examples").glob("*/.github/workflows/*.yml")]
    if not p.stem.endswith(("-build", "-merge", "-pr"))
)

APP = """
[components.app]
path = "src/app"
dest = "/opt/app"
install = "none"

[images.three]
extends = "one"
recipe = "u"
components = ["torch", "app"]
"""


def _catalog(tmp_path: Path, ci: str = "", extra: str = "") -> Path:
    path = tmp_path / "cannery.toml"
    path.write_text(minimal() + extra + ("\n[ci]\n" + ci if ci else ""))
    return path


def _render(path: Path) -> str:
    """The main workflow's text."""
    return _rendered(path).text


def _on_pull_request(jobs: dict[str, Any], jid: str) -> bool:
    """Whether GitHub can run job ``jid`` for a ``pull_request`` event: its ``if`` allows it
    and every job it needs can run too (a skipped need skips it, unless the job's ``if`` has
    !cancelled(), which only jobs that also refuse a pull request have)."""
    job = jobs[jid]
    cond = str(job.get("if", ""))
    if "github.event_name != 'pull_request'" in cond or "github.event_name == 'schedule'" in cond:
        return False
    for word in ("always()", "cancelled()", "failure()"):
        assert word not in cond, (jid, cond)
    if cond and "github.event_name == 'pull_request'" not in cond:
        pytest.fail(f"{jid}: its if does not say whether it runs on a pull request: {cond}")
    needs = job.get("needs", [])
    return all(_on_pull_request(jobs, n) for n in ([needs] if isinstance(needs, str)
                                                   else needs))


def _pr_path(text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    doc = yaml.safe_load(text)
    jobs = doc["jobs"]
    return doc, {jid: job for jid, job in jobs.items() if _on_pull_request(jobs, jid)}


@pytest.mark.parametrize("path", GENERATED, ids=[p.parent.parent.parent.name for p in GENERATED])
def test_pull_request_path_names_no_secret_pushes_nothing(path: Path) -> None:
    """Reads the generated files: every job a pull request can run (from a fork too) names no
    secret, no token, no environment, logs in nowhere and pushes nothing (the pr call job and
    the reusable workflow it calls); every job that does is off that path."""
    doc, pr = _pr_path(path.read_text(encoding="utf-8"))
    assert "pull_request_target" not in doc["on"]
    if "pull_request" not in doc["on"]:  # `pull_requests = false` (llamafactory-npu)
        assert "pr" not in doc["jobs"]
        return
    assert set(pr) == {"check", "pr"}
    called = yaml.safe_load(path.with_name(path.stem + "-pr.yml").read_text(encoding="utf-8"))
    assert "secrets" not in called["on"]["workflow_call"]
    for jid, job in [*pr.items(), *called["jobs"].items()]:
        text = yaml.safe_dump(job)
        assert "secrets" not in text, jid
        assert "github.token" not in text and "GH_TOKEN" not in text, jid
        assert "--push" not in text and "login" not in text.lower(), jid
        assert "environment" not in job, jid
        assert job["permissions"] == {"contents": "read"}, jid
        for step in job.get("steps", []):
            if "actions/checkout@" in str(step.get("uses", "")):
                assert step["with"]["persist-credentials"] is False
    (job,) = called["jobs"].values()
    build = next(s["run"] for s in job["steps"] if "cannery build" in s.get("run", ""))
    assert '--output "oci:${RUNNER_TEMP}/oci"' in build and "--locked" in build
    assert "--backend buildah" in build
    verify = next(s for s in job["steps"] if "cannery verify" in s.get("run", ""))
    assert verify["run"].startswith('cannery verify "oci:${RUNNER_TEMP}/oci"')
    assert '--platform "${PLATFORM}"' in verify["run"]
    assert job["steps"].index(verify) == len(job["steps"]) - 1  # after the build
    for jid in doc["jobs"]:
        if jid not in pr:
            assert jid.startswith(("build-", "merge-", "lock-update")), jid


def test_multi_registry_secrets_stay_off_the_pull_request_path(tmp_path: Path) -> None:
    _, pr = _pr_path(multi_registry_workflow(tmp_path))
    assert set(pr) == {"check", "pr"}
    assert "secrets." not in yaml.safe_dump(pr)


def test_release_tags_dispatch_inputs_max_parallel_and_disk(tmp_path: Path) -> None:
    rendered = _rendered(_catalog(
        tmp_path, 'release_tags = ["v*", "release/*"]\nmax_parallel = 1\nfree_disk = true\n'
        'branches = ["main", "releases/*"]\n'))
    doc = rendered.doc
    on = doc["on"]
    assert on["push"]["tags"] == ["v*", "release/*"]
    assert on["push"]["branches"] == on["pull_request"]["branches"] == ["main", "releases/*"]
    inputs = on["workflow_dispatch"]["inputs"]
    assert inputs["images"]["type"] == "string" and inputs["force"]["type"] == "boolean"
    for kind in ("build", "pr"):
        job = rendered.job(kind)
        # one image's legs one after another: a group per image, not per platform; a
        # matrix max-parallel would bound a whole chunk of many images instead
        assert "max-parallel" not in job["strategy"]
        assert job["concurrency"] == {
            "group": f"cannery-{kind}-${{{{ matrix.image }}}}-${{{{ github.ref }}}}",
            "cancel-in-progress": False}
        first = job["steps"][0]
        assert first["name"].startswith("Free runner disk space")
        assert "sudo rm -rf /usr/share/dotnet" in first["run"]
    assert doc["jobs"]["build-0"]["with"]["force"] == "${{ inputs.force == true }}"
    leg = next(s for s in rendered.job("build")["steps"] if "cannery build" in s.get("run", ""))
    assert leg["env"]["FORCE"] == "${{ inputs.force }}"
    assert 'if [ "${FORCE}" = true ]; then set -- --force; fi' in leg["run"]
    assert leg["run"].rstrip().endswith('"$@"')
    merge = next(s for s in rendered.job("merge")["steps"] if "--merge-only" in s.get("run", ""))
    assert "--force" not in merge["run"]  # the merge keeps its lock-epoch guard


def test_max_parallel_below_an_images_platforms_is_refused_unless_one(tmp_path: Path) -> None:
    """max_parallel bounds one image's legs. 2 of 2 platforms is no bound (groups per
    platform, as without it); 1 of 2 is a group per image; 2 of 3 cannot be said: exit 2."""
    free = _rendered(_catalog(tmp_path, "max_parallel = 2\n"))
    assert "matrix.arch" in free.job("build")["concurrency"]["group"]
    runners = ('runners = { "linux/amd64" = "ubuntu-latest", "linux/arm64" = '
               '"ubuntu-24.04-arm", "linux/ppc64le" = "ppc64le-runner" }\n')
    three = _catalog(tmp_path, "max_parallel = 2\n" + runners).read_text().replace(
        'platforms = ["linux/amd64", "linux/arm64"]',
        'platforms = ["linux/amd64", "linux/arm64", "linux/ppc64le"]')
    assert "linux/ppc64le" in three
    path = tmp_path / "three.toml"
    path.write_text(three)
    with pytest.raises(InputError, match=r"\[ci\] max_parallel: 2 legs at once of image "
                       r"\S+'s 3 platforms cannot be said"):
        _rendered(path)


def test_defaults_no_release_tags_no_disk_step_no_lock_job_without_schedule(
    tmp_path: Path,
) -> None:
    rendered = _rendered(_catalog(tmp_path))
    doc = rendered.doc
    assert "tags" not in doc["on"]["push"]
    assert "schedule" not in doc["on"] and "lock-update" not in doc["jobs"]
    jobs = [*doc["jobs"].items(), *((k, rendered.job(k)) for k in ("build", "merge", "pr"))]
    for jid, job in jobs:
        assert "max-parallel" not in job.get("strategy", {}), jid
        assert not any("Free runner disk" in s.get("name", "") for s in job.get("steps", [])), jid


def test_pull_requests_can_be_turned_off(tmp_path: Path) -> None:
    doc = yaml.safe_load(_render(_catalog(tmp_path, "pull_requests = false\n")))
    assert "pull_request" not in doc["on"]
    assert "pr" not in doc["jobs"]


def test_scheduled_lock_update_opens_a_pull_request(tmp_path: Path) -> None:
    rendered = _rendered(_catalog(tmp_path, 'schedule = "0 3 * * *"\n'))
    doc = rendered.doc
    job = doc["jobs"]["lock-update"]
    runs = [s.get("run", "") for s in job["steps"]]
    assert "cannery lock --update all --catalog cannery.toml" in runs
    assert "cannery render --catalog cannery.toml" in runs
    assert runs.index("cannery lock --update all --catalog cannery.toml") < \
        runs.index("cannery render --catalog cannery.toml")
    pr_job = doc["jobs"]["lock-update-pr"]
    assert pr_job["needs"] == "lock-update"
    pr = pr_job["steps"][-1]
    assert pr["env"]["GH_TOKEN"] == "${{ github.token }}"  # never on a command line
    assert "gh auth setup-git" in pr["run"] and "gh pr create" in pr["run"]
    assert 'git push --force origin "HEAD:refs/heads/${BRANCH}"' in pr["run"]
    assert "${{" not in pr["run"]
    # cannery (git, uv building tracked branches' new commits) runs third-party code: its job
    # has a read-only token and names none; the job with the write token runs no cannery,
    # no Python and nothing but git and gh on the patch it is handed
    assert job["permissions"] == {"contents": "read"}
    assert "github.token" not in yaml.safe_dump(job) and "secrets." not in yaml.safe_dump(job)
    assert pr_job["permissions"] == {"contents": "write", "pull-requests": "write"}
    # the patch check (tests/unit/test_lock_update_patch.py runs it): bash, git and mktemp
    check = {"set", "mapfile", "exit", "patch=\"${RUNNER_TEMP}/lock-update/change.patch\"",
             "scratch=\"$(mktemp", "trap", "refused=0", "while", "ok=''", "for", "done",
             "printf", "refused=1", "if", "fi", "git",
             'mode="${meta#:*'}  # a parameter expansion, no program
    for step in pr_job["steps"]:
        for line in step.get("run", "").splitlines():
            first = line.split()[:1]
            if step["name"].startswith("Apply the patch"):
                assert not first or first[0] in check or first[0].startswith(
                    ("'", 'GIT_INDEX_FILE="${scratch}/index"')), line
                continue
            assert first in ([], ["git"], ["gh"], ["if"], ["fi"], ["open=\"$(gh"],
                             ["--body"]), line
        used = str(step.get("uses", ""))
        assert not used or used.startswith(("actions/checkout@", "actions/download-artifact@"))
    # the nightly builds stay --locked: nothing in the workflows builds without it
    builds = 0
    for jid, other in [*doc["jobs"].items(), *((k, rendered.job(k)) for k in ("build", "merge",
                                                                              "pr"))]:
        for s in other.get("steps", []):
            if "cannery build" in s.get("run", ""):
                assert "--locked" in s["run"], jid
                builds += 1
    assert builds == 3
    off = yaml.safe_load(
        _render(_catalog(tmp_path, 'schedule = "0 3 * * *"\nlock_update = false\n')))
    assert not {"lock-update", "lock-update-pr"} & set(off["jobs"]) and off["on"]["schedule"]
    # a push or pull request that changes only the list of the paths a lock update may change
    # (its boundary) starts the workflow, whose check job runs `render --check` on it
    listed = ".github/workflows/cannery-images-lock-update-paths.txt"
    for event in ("push", "pull_request"):
        assert listed in doc["on"][event]["paths"], event
        assert listed not in off["on"][event]["paths"], event


@pytest.mark.parametrize("bad", ['"!v*"', '"v* x"', '""', '"a:b"'])
def test_bad_release_tag_pattern_is_one_line_exit_2(tmp_path: Path, cli, bad: str) -> None:  # type: ignore[no-untyped-def]
    path = _catalog(tmp_path, f"release_tags = [{bad}]\n")
    res = cli("catalog", "validate", "--catalog", str(path))
    assert res.code == 2, res.out + res.err
    assert "release_tags" in res.err and "Traceback" not in res.err


# ------------------------------------------------------------ the check job's image choice




def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git history holding the rendered files of a three-image catalog: `three` copies the
    checkout directory src/app."""
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    _git(root, "config", "user.email", "t@example.com")
    _git(root, "config", "user.name", "t")
    _catalog(root, extra=APP)
    (root / "src" / "app").mkdir(parents=True)
    (root / "src" / "app" / "main.py").write_text("print(1)\n")
    (root / "README.md").write_text("x\n")
    for f in ("one", "two", "three"):
        (root / "dockerfiles").mkdir(exist_ok=True)
        (root / "dockerfiles" / f"{f}.Dockerfile").write_text(f"# {f}\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "start")
    return root


def _choose(repo: Path, event: str, before: str = "", wanted: str = "",
            ref: str = "refs/heads/main", catalog: Path | None = None,
            ) -> tuple[int, list[str], str]:
    """Run `cannery ci plan` in ``repo`` as the check job does (the catalog: ``catalog``, else
    the repository's cannery.toml); its exit status, the images, what it said."""
    res = subprocess.run(
        [sys.executable, "-m", "cannery", "ci", "plan", "--catalog",
         str(catalog or repo / "cannery.toml"), "--event", event, "--ref", ref,
         "--before", before, "--images", wanted],
        cwd=repo, capture_output=True, text=True, timeout=120)
    line = next((x for x in res.stdout.splitlines() if x.startswith("images=")), "")
    images = json.loads(line.removeprefix("images=")) if line else []
    return res.returncode, images, res.stdout + res.stderr


def _one_commit_repo(root: Path) -> Path:
    """A git repository at ``root`` with one commit on main."""
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    _git(root, "config", "user.email", "t@example.com")
    _git(root, "config", "user.name", "t")
    (root / "x").write_text("x\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "x")
    return root


def _commit(repo: Path, path: str, text: str = "changed\n") -> str:
    before = _git(repo, "rev-parse", "HEAD")
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", f"change {path}")
    return before


def test_a_push_builds_only_the_images_it_touches(repo: Path) -> None:
    before = _commit(repo, "src/app/main.py")
    assert _choose(repo, "push", before)[1] == ["three"]  # the component's dir: one image
    before = _commit(repo, "dockerfiles/two.Dockerfile")
    assert _choose(repo, "push", before)[1] == ["two"]
    before = _commit(repo, "README.md")
    assert _choose(repo, "push", before)[1] == []
    before = _commit(repo, "src/application.py")  # a sibling name is not inside src/app
    assert _choose(repo, "push", before)[1] == []
    before = _commit(repo, ".github/workflows/cannery-images.yml")
    assert _choose(repo, "push", before)[1] == ["one", "two", "three"]


def test_a_pull_request_diffs_its_merge_commit_against_the_base(repo: Path) -> None:
    base = _git(repo, "rev-parse", "HEAD")
    _git(repo, "switch", "-q", "-c", "feature")
    _commit(repo, "src/app/main.py")
    _git(repo, "switch", "-q", "main")
    _commit(repo, "dockerfiles/one.Dockerfile")  # main moved on meanwhile: not the PR's change
    _git(repo, "merge", "-q", "--no-ff", "-m", "merge", "feature")  # what GitHub checks out
    assert base
    assert _choose(repo, "pull_request")[1] == ["three"]


def test_tags_schedule_and_unknown_history_build_everything(repo: Path) -> None:
    everything = ["one", "two", "three"]
    assert _choose(repo, "push", _git(repo, "rev-parse", "HEAD"), ref="refs/tags/v1.0")[1] == \
        everything
    assert _choose(repo, "schedule")[1] == everything
    assert _choose(repo, "push", "0" * 40)[1] == everything  # a new branch: no before


def test_a_manual_run_builds_what_it_names_and_refuses_unknown_names(repo: Path) -> None:
    assert _choose(repo, "workflow_dispatch")[1] == ["one", "two", "three"]
    assert _choose(repo, "workflow_dispatch", wanted=" three  one ")[1] == ["one", "three"]
    code, images, said = _choose(repo, "workflow_dispatch", wanted="one nope")
    assert code == 2 and images == [] and "input images: no image nope" in said
    assert len(said.strip().splitlines()) == 1 and "Traceback" not in said
    code, images, said = _choose(repo, "workflow_dispatch", wanted="*")  # never globbed
    assert code == 2 and "no image *" in said


def _actionlint_clean(root: Path, rendered: Rendered) -> Path:
    """Write every rendered workflow file into a fresh repository at ``root``; actionlint
    (which checks each call job against the reusable workflow it calls) finds nothing. The
    main workflow's path."""
    from tests.unit.test_render_workflow import _tool

    rendered.write(root)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    al = subprocess.run([_tool("actionlint"), "-no-color"], cwd=root, capture_output=True,
                        text=True, timeout=120)
    assert al.returncode == 0, al.stdout + al.stderr
    return root / rendered.main_path


def test_every_trigger_and_setting_at_once_is_lint_clean(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """Workflows with every setting on (release tags, a schedule with the lock update,
    max-parallel, the disk clean-up, an image from the checkout): actionlint, zizmor (offline,
    auditor persona) and cannery lint find nothing."""
    from tests.unit.test_render_workflow import _tool

    rendered = _rendered(_catalog(
        tmp_path, 'release_tags = ["v*"]\nschedule = "0 3 * * *"\nmax_parallel = 1\n'
        'free_disk = true\nbranches = ["main", "releases/*"]\npr_label = "ci: images"\n'
        'build_branches = ["dev/**", "feature-?"]\ndispatch_tags = true\n', extra=APP))
    wf = _actionlint_clean(tmp_path, rendered)
    zz = subprocess.run([_tool("zizmor"), "--offline", "--no-progress", "--format", "json",
                         "--persona", "auditor", str(wf.parent)],
                        capture_output=True, text=True, timeout=120)
    assert json.loads(zz.stdout or "[]") == [] and zz.returncode == 0, zz.stdout[:2000]
    res = cli("lint", "--format", "json", str(wf.parent))
    assert res.code == 0 and json.loads(res.out)["findings"] == [], res.out[:2000]
    doc = rendered.doc
    assert set(doc["on"]) == {"workflow_dispatch", "push", "pull_request", "schedule"}
    assert "src/app/**" in doc["on"]["pull_request"]["paths"]
    assert "lock-update" in doc["jobs"]


def test_a_release_tag_must_name_the_catalog_version(tmp_path: Path) -> None:
    """With `release_tags` and `catalog.version`: a tag for another version publishes nothing
    (the check job fails before any build); the version, with or without a `v`, builds all."""
    root = _one_commit_repo(tmp_path / "r")
    cat = tmp_path / "cannery.toml"
    cat.write_text(minimal().replace('[catalog]\nname = "test"',
                                     '[catalog]\nname = "test"\nversion = "1.2"')
                   + '\n[ci]\nrelease_tags = ["v*", "1.*"]\n')
    head = _git(root, "rev-parse", "HEAD")
    for tag in ("v1.2", "1.2"):
        code, images, said = _choose(root, "push", head, ref=f"refs/tags/{tag}", catalog=cat)
        assert (code, images) == (0, ["one", "two"]), said
    code, images, said = _choose(root, "push", head, ref="refs/tags/v1.3", catalog=cat)
    assert code == 2 and images == []
    assert "release tag v1.3 is not the catalog's version 1.2 (or v1.2)" in said
    # a branch push is not a release: no guard
    assert _choose(root, "push", "0" * 40, catalog=cat)[0] == 0
    # no catalog version: no guard (the tags the catalog names are published)
    plain = tmp_path / "plain.toml"
    plain.write_text(minimal() + '\n[ci]\nrelease_tags = ["v*"]\n')
    assert _choose(root, "push", head, ref="refs/tags/v9", catalog=plain)[:2] == \
        (0, ["one", "two"])


def test_a_changed_file_with_an_unusual_name_is_still_inside_its_directory(repo: Path) -> None:
    """git diff quotes a name with non-ASCII bytes, a quote, a backslash or a tab ("src/app/
    donn\\303\\251es.txt") unless told not to: the quoted name is under no directory, and the
    image that copies src/app was not rebuilt."""
    for name in ("src/app/données.txt", 'src/app/a"b.txt', "src/app/tab\there.txt"):
        before = _commit(repo, name)
        assert _choose(repo, "push", before)[1] == ["three"], name


@pytest.mark.parametrize("tags", ['release_tags = ["v*"]\n', ""])
def test_no_branches_means_no_branch_push_builds(tmp_path: Path, tags: str) -> None:
    """`branches = []`: no push of a branch builds (an empty `branches:` filter is not valid
    GitHub Actions, so the key is left out); release tags still push, pull requests go to any
    branch, and actionlint accepts the workflow."""
    rendered = _rendered(_catalog(tmp_path, f"branches = []\n{tags}", extra=APP))
    doc = rendered.doc
    if tags:
        assert doc["on"]["push"] == {"tags": ["v*"]}
    else:
        assert "push" not in doc["on"]
    assert "branches" not in doc["on"]["pull_request"]
    assert "src/app/**" in doc["on"]["pull_request"]["paths"]
    _actionlint_clean(tmp_path, rendered)


def test_branch_pushes_off_publishes_on_tags_and_manual_runs_only(tmp_path: Path) -> None:
    """`branch_pushes = false`: `branches` filter pull requests only (their build stays, with
    no secret); a `v*` tag and a manual run publish; no branch push does."""
    rendered = _rendered(_catalog(
        tmp_path, 'branches = ["main", "releases/*"]\nbranch_pushes = false\n'
        'release_tags = ["v*"]\n', extra=APP))
    doc = rendered.doc
    assert set(doc["on"]) == {"workflow_dispatch", "push", "pull_request"}
    assert doc["on"]["push"] == {"tags": ["v*"]}
    assert doc["on"]["pull_request"]["branches"] == ["main", "releases/*"]
    assert "pr" in doc["jobs"] and "build-0" in doc["jobs"]
    _actionlint_clean(tmp_path, rendered)


def test_dispatch_only(tmp_path: Path) -> None:
    """No branch pushes, no release tags, no schedule: only a manual run publishes; the pull
    request build stays."""
    doc = yaml.safe_load(_render(_catalog(tmp_path, "branch_pushes = false\n")))
    assert set(doc["on"]) == {"workflow_dispatch", "pull_request"}
    assert doc["on"]["pull_request"]["branches"] == ["main"]


def test_registry_user_from_a_variable(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """`user_var`: the user name comes from `vars.X` (not secret), the password still from a
    secret; naming both user_var and user_secret is one line, exit 2."""
    base = minimal().replace(
        '[registries.local]\n',
        '[registries.local]\nuser_var = "QUAY_USERNAME"\npassword_secret = "QUAY_PASSWORD"\n')
    path = tmp_path / "cannery.toml"
    path.write_text(base)
    rendered = _rendered(path)
    env = next(s for s in rendered.job("build")["steps"]
               if s["name"].startswith("Build"))["env"]
    assert env["CANNERY_REGISTRY_USER"] == "${{ vars.QUAY_USERNAME }}"
    assert env["CANNERY_REGISTRY_PASSWORD"] == "${{ secrets.QUAY_PASSWORD }}"
    # the call jobs pass the password, and no user secret (there is none)
    for jid in ("build-0", "merge-0"):
        assert rendered.doc["jobs"][jid]["secrets"] == {
            "QUAY_PASSWORD": "${{ secrets.QUAY_PASSWORD }}"}, jid
    _actionlint_clean(tmp_path, rendered)
    path.write_text(base.replace('user_var = "QUAY_USERNAME"\n',
                                 'user_var = "QUAY_USERNAME"\nuser_secret = "U"\n'))
    res = cli("render", "--catalog", str(path))
    assert res.code == 2 and "registries.local" in res.err and "user_var" in res.err, res.err
    assert len(res.err.strip().splitlines()) == 1


def test_a_runner_given_as_labels_is_a_list_github_matches_whole(tmp_path: Path) -> None:
    """`[ci.runners]` takes a list of labels (a self-hosted runner must carry them all): the
    legs `cannery ci plan` writes give `runs-on` the list, and actionlint accepts it."""
    path = _catalog(
        tmp_path, '[ci.runners]\n"linux/amd64" = "ubuntu-latest"\n'
        '"linux/arm64" = ["self-hosted", "linux", "arm64"]\n')
    cat = load_catalog(path).catalog
    out = outputs(cat, plan(cat, Lock()), "workflow_dispatch")
    legs = build_legs(out)
    assert legs
    by_arch = {leg["arch"]: leg["runner"] for leg in legs}
    assert by_arch["arm64"] == ["self-hosted", "linux", "arm64"]
    assert by_arch["amd64"] == "ubuntu-latest"
    assert _rendered(path).job("build")["runs-on"] == "${{ matrix.runner }}"
    _actionlint_clean(tmp_path / "repo", _rendered(path))


@pytest.mark.parametrize("runners", ['"linux/arm64" = []', '"linux/arm64" = ["self hosted"]'])
def test_an_empty_or_bad_runner_label_list_is_refused(tmp_path: Path, runners: str) -> None:
    from cannery.errors import CatalogError

    with pytest.raises(CatalogError, match="runners"):
        load_catalog(_catalog(tmp_path, f"[ci.runners]\n{runners}\n"))


def test_a_published_release_builds_and_publishes_every_image(tmp_path: Path) -> None:
    """`releases = true`: the workflow runs on a published release, the check job selects every
    image, and with catalog.version the release's tag must be that version; actionlint and
    zizmor stay clean."""
    from tests.unit.test_render_workflow import _tool

    cat = tmp_path / "cannery.toml"
    cat.write_text(minimal().replace('[catalog]\nname = "test"',
                                     '[catalog]\nname = "test"\nversion = "1.2"')
                   + "\n[ci]\nreleases = true\n")
    rendered = _rendered(cat)
    assert rendered.doc["on"]["release"] == {"types": ["published"]}
    wf = _actionlint_clean(tmp_path / "repo", rendered)
    zz = subprocess.run([_tool("zizmor"), "--offline", "--no-progress", "--format", "json",
                         "--persona", "auditor", str(wf.parent)],
                        capture_output=True, text=True, timeout=120)
    assert json.loads(zz.stdout or "[]") == [] and zz.returncode == 0, zz.stdout[:2000]
    root = _one_commit_repo(tmp_path / "r")
    head = _git(root, "rev-parse", "HEAD")
    code, images, said = _choose(root, "release", head, ref="refs/tags/v1.2", catalog=cat)
    assert (code, images) == (0, ["one", "two"]), said
    code, images, said = _choose(root, "release", head, ref="refs/tags/v1.3", catalog=cat)
    assert code == 2 and images == [] and "is not the catalog's version 1.2" in said
    # without it, no release trigger
    (tmp_path / "no").mkdir()
    assert "release" not in yaml.safe_load(_render(_catalog(tmp_path / "no", "")))["on"]


def test_a_label_gates_pull_request_builds(tmp_path: Path) -> None:
    """`pr_label`: a pull request builds only while it carries the label, and adding it is an
    event (`labeled`) that starts the build; the path stays secret-free."""
    rendered = _rendered(_catalog(tmp_path, 'pr_label = "ci: images"\n'))
    doc = rendered.doc
    assert doc["on"]["pull_request"]["types"] == ["opened", "synchronize", "reopened",
                                                  "labeled"]
    cond = doc["jobs"]["pr"]["if"]
    assert ("github.event_name == 'pull_request' && "
            "contains(github.event.pull_request.labels.*.name, 'ci: images')") in cond
    # another label added to a labelled pull request starts (and cancels) nothing
    assert ("(github.event.action != 'labeled' || github.event.label.name == 'ci: images')"
            in cond)
    _, pr = _pr_path(rendered.text)
    assert set(pr) == {"check", "pr"}
    _actionlint_clean(tmp_path, rendered)


@pytest.mark.parametrize("label", ["it's", "${{ secrets.X }}", "a\nb", ""])
def test_a_label_that_could_leave_its_quotes_is_refused(tmp_path: Path, label: str) -> None:
    with pytest.raises(CatalogError, match=r"ci\.pr_label"):
        load_catalog(_catalog(tmp_path, f"pr_label = {json.dumps(label)}\n"))




def test_build_branches_build_like_a_pull_request_and_never_publish(tmp_path: Path) -> None:
    """`build_branches`: their pushes trigger the workflow; the check job says they do not
    publish (GitHub's * ** ? + matched as GitHub matches them), so the build-and-push call
    jobs skip and the pull-request legs (no secret, no push) build; every other event
    publishes as before."""
    path = _catalog(tmp_path, 'branches = ["main", "releases/*"]\n'
                              'build_branches = ["dev/**", "feature-?", "main"]\n')
    cat = load_catalog(path).catalog
    specs = plan(cat, Lock())
    doc = _rendered(path).doc
    assert doc["on"]["push"]["branches"] == ["main", "releases/*", "dev/**", "feature-?"]
    for event, ref, want in [
        ("push", "refs/heads/dev/a/b", False),
        ("push", "refs/heads/feature-", False),
        ("push", "refs/heads/feature", False),  # GitHub's ?: the '-' before it is optional
        ("push", "refs/heads/main", False),  # named in both: build_branches win
        ("push", "refs/heads/releases/1.0", True),
        ("push", "refs/heads/feature-1", True),  # ? is not a character of its own
        ("push", "refs/heads/devx", True),
        ("push", "refs/tags/v1", True),
        ("pull_request", "refs/pull/1/merge", False),
        ("schedule", "refs/heads/main", True),
        ("workflow_dispatch", "refs/heads/dev/x", True),
    ]:
        assert publishes(cat, Event(event, ref=ref)) is want, (event, ref)
        if event in ("push", "workflow_dispatch") and ref.startswith("refs/heads/"):
            out = outputs(cat, specs, "workflow_dispatch" if event != "push" else "push",
                          ref=ref, changed=["dockerfiles/one.Dockerfile"])
            assert out["publish"] is want
            # a build branch: the pull-request legs, no build and no merge
            assert (flat(out["pr"]) != []) is (not want), ref
            assert (build_legs(out) != [] and merges(out) != []) is want, ref
    jobs = doc["jobs"]
    assert "needs.check.outputs.publish == 'true'" in jobs["build-0"]["if"]
    # whole: && binds tighter than || in an expression, so the legs' guard must wrap both
    assert jobs["pr"]["if"] == (
        "${{ ((github.event_name == 'pull_request') || (github.event_name == 'push' && "
        "needs.check.outputs.publish == 'false')) && "
        "fromJSON(needs.check.outputs.pr).count > 0 }}")
    assert jobs["check"]["outputs"]["publish"] == "${{ steps.plan.outputs.publish }}"
    # without build_branches nothing of this is rendered
    (tmp_path / "plain").mkdir()
    plain = yaml.safe_load(_render(_catalog(tmp_path / "plain")))
    assert "publish" not in plain["jobs"]["check"]["outputs"]
    assert "publish" not in plain["jobs"]["build-0"]["if"]


def _run_step(script: str, env: dict[str, str], tmp: Path) -> tuple[int, str, list[str]]:
    """Run a step's script with bash and a stand-in `cannery` on PATH (the real one would
    build); returns the exit status, what it printed, and the stand-in's argv, if called."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    called = tmp / "argv"
    called.unlink(missing_ok=True)
    stub = bin_dir / "cannery"
    stub.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {called}\n')
    stub.chmod(0o755)
    out = tmp / "output"
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=tmp,
                          env={"PATH": f"{bin_dir}:{os.environ['PATH']}", "RUNNER_TEMP": str(tmp),
                               "GITHUB_OUTPUT": str(out), **env})
    argv = called.read_text().splitlines() if called.exists() else []
    return proc.returncode, proc.stdout + proc.stderr, argv


HOSTILE = ['$(touch pwned)', '"; touch pwned; echo "', "`touch pwned`", "a;touch pwned",
           "*", "../x", "-x", "ok $(touch pwned)"]


def test_dispatch_tags_become_extra_tags_and_nothing_else(tmp_path: Path) -> None:
    """`dispatch_tags`: a manual run's input `tags` reaches the merge step through env; each
    word is checked as an image tag before it becomes `--extra-tag WORD`. Input that tries to
    reach a shell ends in the tag-validation error: no file is made, cannery is never run;
    `cannery ci plan` refuses it first (exit 2), and two selected images of one repository."""
    path = _catalog(tmp_path, "dispatch_tags = true\n")
    rendered = _rendered(path)
    doc = rendered.doc
    assert doc["on"]["workflow_dispatch"]["inputs"]["tags"]["type"] == "string"
    assert doc["jobs"]["merge-0"]["with"]["tags"] == "${{ inputs.tags || '' }}"
    merge = next(s for s in rendered.job("merge")["steps"] if "--merge-only" in s.get("run", ""))
    assert merge["env"]["EXTRA_TAGS"] == "${{ inputs.tags }}"
    assert "inputs.tags" not in merge["run"]  # never expanded into the script
    env = {"IMAGE": "one", "PARENT": "", "BASE": "false"}
    code, said, argv = _run_step(merge["run"], {**env, "EXTRA_TAGS": "nightly v1.2  rc_1"},
                                 tmp_path)
    assert code == 0, said
    assert argv[argv.index("--merge-only"):][-7:] == [
        "--extra-tag", "nightly", "--extra-tag", "v1.2", "--extra-tag", "rc_1", "--json"]
    code, said, argv = _run_step(merge["run"], {**env, "EXTRA_TAGS": ""}, tmp_path)
    assert code == 0 and "--extra-tag" not in argv
    cat = load_catalog(path).catalog
    specs = plan(cat, Lock())
    for hostile in HOSTILE:
        code, said, argv = _run_step(merge["run"], {**env, "EXTRA_TAGS": hostile}, tmp_path)
        assert code == 1, (hostile, said)
        assert "::error::input tags: a word is not an image tag" in said
        assert hostile not in said  # not echoed back into the log either
        assert argv == [] and not (tmp_path / "pwned").exists(), hostile
        with pytest.raises(InputError, match="input tags: a word is not an image tag") as e:
            outputs(cat, specs, "workflow_dispatch", images="one", tags=hostile)
        assert hostile not in str(e.value)
    # a tag names one index: two selected images of one repository stop the run
    with pytest.raises(InputError, match="one and two both publish to"):
        outputs(cat, specs, "workflow_dispatch", tags="nightly")
    assert outputs(cat, specs, "workflow_dispatch", images="two", tags="nightly")["images"] == \
        ["two"]
    assert outputs(cat, specs, "workflow_dispatch", tags=" ")["images"] == ["one", "two"]
    _actionlint_clean(tmp_path / "lint", rendered)


def test_without_dispatch_tags_there_is_no_such_input(tmp_path: Path) -> None:
    rendered = _rendered(_catalog(tmp_path))
    assert "tags" not in rendered.doc["on"]["workflow_dispatch"]["inputs"]
    assert "tags" not in rendered.doc["jobs"]["merge-0"]["with"]
    merge = next(s for s in rendered.job("merge")["steps"] if "--merge-only" in s.get("run", ""))
    assert "EXTRA_TAGS" not in merge["env"] and "extra" not in merge["run"]


def _rendered(path: Path) -> Rendered:
    """Every workflow file of one render (the main one and the reusable ones beside it)."""
    cat = load_catalog(path).catalog
    return render_files(cat, plan(cat, Lock()), path.name,
                        ci_pins=ci_requirements(cat, ci_entries(cat)))
