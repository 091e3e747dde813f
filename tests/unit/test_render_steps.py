"""Rendered RUN steps executed in bash, with stand-ins for apt, dpkg and pip on PATH.

The stand-ins are fakes because a real apt or pip install needs a root file system and the
internet; each one only logs its argv. System paths in the step are rewritten under tmp_path,
so nothing outside the test's directory is touched.
"""

from __future__ import annotations

import dataclasses
import os
import stat
import subprocess
from pathlib import Path

import dockerfile

from cannery.catalog.load import load_catalog
from cannery.plan import ImageSpec, plan
from cannery.render.dockerfile import render_dockerfile
from tests.conftest import GOLDEN

CATALOG = load_catalog()


def _spec(name: str = "qwen3-5-a2") -> ImageSpec:
    from cannery.lock import read_lock

    return plan(CATALOG.catalog, read_lock(GOLDEN / "cannery.lock"), [name])[0]


def _runs(spec: ImageSpec) -> list[str]:
    return [c.value[0] for c in dockerfile.parse_string(render_dockerfile(spec)) if c.cmd == "RUN"]


def _tool(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/bash\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _bash(
    script: str, tmp: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp / "bin"
    return subprocess.run(
        ["/bin/bash", "-o", "pipefail", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", **(env or {})},
    )


def _apt_world(tmp: Path, installed: set[str]) -> tuple[Path, Path]:
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    log = tmp / "log"
    names = " ".join(sorted(installed))
    _tool(
        bin_dir,
        "dpkg-query",
        f'p="${{@: -1}}"; for i in {names}; do [ "$i" = "$p" ] && '
        'printf "install ok installed" && exit 0; done; exit 1',
    )
    _tool(bin_dir, "apt-get", f'echo "apt-get $*" >> {log}')
    root = tmp / "root"
    for d in ("var/lib/apt/lists", "var/cache/apt", "var/log/apt"):
        (root / d).mkdir(parents=True)
    (root / "var/lib/apt/lists/partial").write_text("x")
    (root / "var/cache/apt/pkgcache.bin").write_text("x")
    (root / "var/log/apt/history.log").write_text("x")
    (root / "var/log/dpkg.log").write_text("x")
    return log, root


def _apt_step(spec: ImageSpec, root: Path) -> str:
    step = next(r for r in _runs(spec) if "dpkg-query" in r)
    return step.replace(" /var/", f" {root}/var/")


def test_apt_installs_only_missing_packages_and_leaves_no_lists_or_logs(tmp_path: Path) -> None:
    spec = _spec()
    log, root = _apt_world(tmp_path, {"gcc", "git", "curl", "ca-certificates"})
    proc = _bash(_apt_step(spec, root), tmp_path)
    assert proc.returncode == 0, proc.stderr
    calls = log.read_text().splitlines()
    assert calls[0] == "apt-get update"
    installed = calls[1].split("--no-install-recommends ")[1].split()
    assert installed == ["g++", "cmake", "libnuma-dev", "jq", "build-essential"]
    assert not any((root / "var/lib/apt/lists").iterdir())
    assert not (root / "var/cache/apt/pkgcache.bin").exists()
    assert not any((root / "var/log/apt").iterdir()) and not (root / "var/log/dpkg.log").exists()


def test_apt_does_nothing_when_the_base_has_everything(tmp_path: Path) -> None:
    spec = dataclasses.replace(_spec(), packages=())
    needed = {"ca-certificates", "curl", "git"}
    log, root = _apt_world(tmp_path, needed)
    proc = _bash(_apt_step(spec, root), tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not log.exists()  # no update, no install
    assert not (root / "var/log/dpkg.log").exists()  # but the cleanup still ran


def test_curl_and_git_only_when_needed() -> None:
    spec = dataclasses.replace(_spec("vllm-0-23-a2"), packages=())
    assert not spec.toolkit.install  # this base ships its toolkit: nothing to download
    step = next(r for r in _runs(spec) if "dpkg-query" in r)
    assert "for p in ca-certificates git;" in step
    no_git = dataclasses.replace(spec, components=tuple(c for c in spec.components if not c.git))
    step = next(r for r in _runs(no_git) if "dpkg-query" in r)
    assert "for p in ca-certificates;" in step
    step = next(r for r in _runs(dataclasses.replace(_spec(), packages=())) if "dpkg-query" in r)
    assert "for p in ca-certificates curl git;" in step


def _git_repo(tmp: Path) -> tuple[str, str]:
    repo = tmp / "upstream"
    repo.mkdir()
    env = {
        **os.environ,
        "GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z",
    }
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-C", str(repo)]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "setup.py").write_text("")
    subprocess.run([*git, "add", "."], check=True, env=env)
    subprocess.run([*git, "commit", "-qm", "x"], check=True, env=env)
    commit = subprocess.run(
        [*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()
    return f"file://{repo}", commit


def _git_step(tmp: Path, install: str) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    url, commit = _git_repo(tmp)
    spec = _spec()
    comp = next(c for c in spec.components if c.name == "megatron-bridge")
    assert comp.git
    comp = dataclasses.replace(
        comp, install=install, git=dataclasses.replace(comp.git, url=url, commit=commit)
    )
    spec = dataclasses.replace(spec, components=(comp,))
    step = next(r for r in _runs(spec) if "git init" in r)
    src = tmp / "src"
    step = step.replace("/opt/src", str(src)).replace("/opt/cannery", str(tmp / "cannery"))
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    log = tmp / "pip.log"
    # pip stand-in: records its argv and whether the source tree was there when it ran
    _tool(bin_dir, "python3", f'echo "$* $(ls -A {src}/megatron-bridge | tr "\\n" " ")" >> {log}')
    return _bash(step, tmp), src / "megatron-bridge", log


def test_git_source_installed_with_pip_is_removed_afterwards(tmp_path: Path) -> None:
    proc, dest, log = _git_step(tmp_path, "pip")
    assert proc.returncode == 0, proc.stderr
    assert "install --no-cache-dir" in log.read_text() and "setup.py" in log.read_text()
    assert not dest.exists()


def test_editable_git_source_keeps_its_tree_but_not_git(tmp_path: Path) -> None:
    proc, dest, log = _git_step(tmp_path, "editable")
    assert proc.returncode == 0, proc.stderr
    assert f"-e {dest}" in log.read_text()
    assert (dest / "setup.py").exists() and not (dest / ".git").exists()


def _unlocked_spec() -> ImageSpec:
    from cannery.lock import Lock

    return plan(CATALOG.catalog, Lock(), ["qwen3-5-a2"])[0]


def test_unlocked_base_stops_the_build_right_after_from(tmp_path: Path) -> None:
    cmds = list(dockerfile.parse_string(render_dockerfile(_unlocked_spec())))
    image_from = max(i for i, c in enumerate(cmds) if c.cmd == "FROM")
    refuse = cmds[image_from + 1]
    assert refuse.cmd == "RUN"
    proc = _bash(refuse.value[0], tmp_path)
    assert proc.returncode == 1
    assert "UNLOCKED base image swr.cn-south-1" in proc.stderr and "no digest" in proc.stderr


def test_unlocked_git_ref_stops_before_fetching(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    log = tmp_path / "git.log"
    _tool(tmp_path / "bin", "git", f'echo "git $*" >> {log}')
    steps = [r for r in _runs(_unlocked_spec()) if "git init" in r and "core_r0.16.0" in r]
    assert steps
    for step in steps:
        proc = _bash(step.replace("/opt/src", str(tmp_path / "src")), tmp_path)
        assert proc.returncode == 1 and "has no commit" in proc.stderr
    assert not log.exists()


def test_unlocked_download_stops_before_fetching(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    log = tmp_path / "curl.log"
    _tool(tmp_path / "bin", "curl", f'echo "curl $*" >> {log}')
    step = next(r for r in _runs(_unlocked_spec()) if "toolkit_url=" in r)
    for arch in ("amd64", "arm64"):
        proc = _bash(step, tmp_path, {"TARGETARCH": arch})
        assert proc.returncode == 1
        assert "UNLOCKED toolkit download has no sha256" in proc.stderr
    assert not log.exists()


def test_locked_render_names_every_unlocked_input(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    res = cli("render", "dockerfile", "--locked", "--out", str(out))
    assert res.code == 2
    spec = _unlocked_spec()
    for item in spec.unlocked():
        assert f"qwen3-5-a2: {item}" in res.err
    assert "vllm-0-23-a2: base image" in res.err
    assert not out.exists()  # nothing half-written
    res = cli(
        "render",
        "dockerfile",
        "--locked",
        "--lock",
        str(GOLDEN / "cannery.lock"),
        "--out",
        str(out),
    )
    # The golden lock pins every base, commit and installer but no Python dependencies (the
    # real index is not reachable here): --locked still refuses, naming only those.
    # tests/e2e/test_lock.py renders a fully locked test catalog with --locked.
    assert res.code == 2 and not out.exists()
    items = [ln for ln in res.err.splitlines() if ln.startswith("cannery:   ")]
    assert items and all(": UNPINNED " in ln for ln in items)
    assert "qwen3-5-a2: UNPINNED component train-extras: mathruler" in res.err
