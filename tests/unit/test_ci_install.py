"""How CI installs cannery: `cannery lock` resolves `[ci] install` into hashes per runner
architecture (the lock's ``ci`` table), `cannery render` writes them to a requirements file
beside the workflow and every job installs it with ``pip --require-hashes --no-deps``; or an
action pinned by a full commit SHA installs it. Anything else is refused at render time.

The resolver here is a function returning pins (the real one, uv against a local index, is in
tests/e2e/test_ci_install.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from cannery.catalog.load import load_catalog
from cannery.lock import Lock, PythonEntry, Resolvers, dump_lock, read_lock, update_lock
from cannery.pydeps import PythonRequest, ci_requests, ci_requirements
from tests.catalogs import CI_PINS, ci_entries, minimal, write_ci_lock
from tests.conftest import GOLDEN, ROOT

SHA = "0123456789abcdef0123456789abcdef01234567"
# Every generated workflow checked in: the embedded catalog's golden and each example's.
GENERATED = sorted(
    [*(GOLDEN / "workflow" / "embedded").glob("*.yml"),
     *(ROOT / "examples").glob("*/.github/workflows/*.yml")]
)


def _catalog(tmp_path: Path, ci: str = "") -> Path:
    path = tmp_path / "cannery.toml"
    path.write_text(minimal() + ("\n[ci]\n" + ci if ci else ""))
    return path


def _pins(text: str) -> list[str]:
    """The requirements of a requirements file, a line each (continuations joined)."""
    joined = re.sub(r" \\\n\s+", " ", text)
    return [ln for ln in joined.splitlines() if ln and not ln.startswith(("#", "--index-url "))]


def _resolvers(calls: list[PythonRequest], pins: dict[str, list[str]] | None = None) -> Resolvers:
    def python(req: PythonRequest) -> list[str]:
        calls.append(req)
        if req.image != "ci":
            return []
        return (pins or {}).get(req.arch, list(CI_PINS))

    return Resolvers(base=lambda _: "sha256:" + "0" * 64, git=lambda *_: "1" * 40,
                     url=lambda _: ("2" * 64, 1), python=python)


def test_lock_resolves_the_ci_install_per_runner_architecture(tmp_path: Path) -> None:
    cat = load_catalog(_catalog(tmp_path, 'python = "3.11"\ninstall = "cannery==0.1.0"\n')).catalog
    calls: list[PythonRequest] = []
    lock = update_lock(cat, Lock(), _resolvers(calls))
    ci = [c for c in calls if c.image == "ci"]
    # amd64 (check and merge jobs) and each runner's architecture; the catalog's index
    assert [(c.arch, c.python, c.requirements, c.index_url) for c in ci] == [
        ("amd64", "3.11", ("cannery==0.1.0",), cat.catalog.python_index),
        ("arm64", "3.11", ("cannery==0.1.0",), cat.catalog.python_index),
    ]
    assert set(lock.ci) == {"amd64", "arm64"}
    assert lock.ci["amd64"].requirements == list(CI_PINS)
    text = dump_lock(lock)
    assert "[ci.amd64]" in text and "[ci.arm64]" in text
    (tmp_path / "cannery.lock").write_text(text)
    assert read_lock(tmp_path / "cannery.lock") == lock

    # unchanged: kept without asking; --update python asks again; another requirement too
    calls.clear()
    assert update_lock(cat, lock, _resolvers(calls)).ci == lock.ci
    assert not [c for c in calls if c.image == "ci"]
    update_lock(cat, lock, _resolvers(calls), {"python"})
    assert len([c for c in calls if c.image == "ci"]) == 2
    # `cannery lock IMAGE` resolves that image only: the ci table is kept as it is
    calls.clear()
    assert update_lock(cat, lock, _resolvers(calls), {"all"}, images=["one"]).ci == lock.ci
    assert not [c for c in calls if c.image == "ci"]


def test_an_install_that_resolves_to_no_pin_of_itself_is_refused(tmp_path: Path) -> None:
    """A URL requirement comes back from uv without an index pin (parse_compiled drops it):
    the lock refuses it rather than record pins that would not install cannery."""
    from cannery.lock import CiInstallError

    cat = load_catalog(_catalog(
        tmp_path, 'install = "cannery @ https://example.com/cannery-0.1.0-py3-none-any.whl"\n'
    )).catalog
    pins = {"amd64": [CI_PINS[1]], "arm64": [CI_PINS[1]]}
    with pytest.raises(CiInstallError, match=r"\[ci\] install: .*resolved to no pin of cannery"):
        update_lock(cat, Lock(), _resolvers([], pins))


def test_a_lock_without_ci_pins_is_written_as_before() -> None:
    """No ``[ci]`` table in a lock that has no pins (an install_action, or an older lock)."""
    assert "ci" not in dump_lock(Lock())


def test_a_changed_install_or_python_makes_the_pins_stale(tmp_path: Path) -> None:
    path = _catalog(tmp_path)
    cat = load_catalog(path).catalog
    entries = ci_entries(cat)
    assert ci_requirements(cat, entries) is not None
    for ci in ('install = "cannery==0.2.0"\n', 'python = "3.11"\n',
               'runners = { "linux/amd64" = "a", "linux/arm64" = "b", "linux/ppc64le" = "c" }\n'):
        other = load_catalog(_catalog(tmp_path, ci)).catalog
        assert ci_requirements(other, entries) is None, ci


def test_pins_of_one_architecture_only_get_a_marker(tmp_path: Path) -> None:
    cat = load_catalog(_catalog(tmp_path)).catalog
    both = "pydantic==2.11.0 --hash=sha256:" + "d" * 64
    x86 = "extra-x86==1.0 --hash=sha256:" + "e" * 64
    reqs = {r.arch: r for r in ci_requests(cat)}
    entries = {
        "amd64": PythonEntry(inputs=reqs["amd64"].digest(), requirements=[both, x86],
                             resolved_at="2026-01-01T00:00:00+00:00"),
        "arm64": PythonEntry(inputs=reqs["arm64"].digest(), requirements=[both],
                             resolved_at="2026-01-01T00:00:00+00:00"),
    }
    assert ci_requirements(cat, entries) == (
        f"extra-x86==1.0 ; platform_machine == 'x86_64' \\\n    --hash=sha256:{'e' * 64}\n"
        f"pydantic==2.11.0 \\\n    --hash=sha256:{'d' * 64}\n"
    )


def test_render_refuses_an_install_without_hashes(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """No pins in the lock for this catalog: exit 2, one line naming `[ci] install`, and
    nothing written (not even the Dockerfiles)."""
    path = _catalog(tmp_path)
    res = cli("render", "--catalog", str(path))
    assert res.code == 2
    line = res.err.strip()
    assert "\n" not in line and "[ci] install" in line and "cannery==0.1.0" in line, res.err
    assert "Traceback" not in res.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cannery.toml"]
    # pins resolved for another requirement are refused the same way
    write_ci_lock(path)
    path.write_text(path.read_text() + '\n[ci]\ninstall = "cannery==9.9"\n')
    res = cli("render", "workflow", "--catalog", str(path))
    assert res.code == 2 and "[ci] install" in res.err and "cannery==9.9" in res.err


def test_render_writes_the_hashed_requirements_beside_the_workflow(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    path = _catalog(tmp_path)
    write_ci_lock(path)
    assert cli("render", "--catalog", str(path)).code == 0
    cat = load_catalog(path).catalog
    reqs = tmp_path / cat.ci.requirements
    assert reqs.parent == (tmp_path / cat.ci.workflow).parent
    text = reqs.read_text()
    assert _pins(text) == list(CI_PINS)
    assert f"\n--index-url {cat.catalog.python_index}\n" in text  # where the lock found them
    jobs = [job for wf in _workflows(tmp_path / cat.ci.workflow)
            for job in wf["jobs"].values() if "steps" in job]  # (a call job has none)
    installs = [s for job in jobs for s in job["steps"] if "Install cannery" in s["name"]]
    assert len(installs) == len([j for j in jobs
                                 if any("cannery " in str(s.get("run", "")) for s in j["steps"])])
    for step in installs:
        assert step["run"] == ("python -m pip install --require-hashes --no-deps "
                               f"--only-binary :all: -r {cat.ci.requirements}")
    # `render --check` catches a hand edit of the requirements
    assert cli("render", "--check", "--catalog", str(path)).code == 0
    reqs.write_text(text.replace("c" * 64, "f" * 64))
    res = cli("render", "--check", "--catalog", str(path))
    assert res.code == 1 and str(reqs) in res.err


def test_an_action_pinned_by_commit_installs_cannery_instead(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    path = _catalog(tmp_path, f'install_action = "example/cannery-setup@{SHA}"\n')
    assert cli("render", "--catalog", str(path)).code == 0  # no pins needed
    cat = load_catalog(path).catalog
    assert not (tmp_path / cat.ci.requirements).exists()
    assert ci_requests(cat) == []
    docs = _workflows(tmp_path / cat.ci.workflow)
    steps = [s for wf in docs for job in wf["jobs"].values() for s in job.get("steps", [])
             if "Install cannery" in s["name"]]
    assert len(steps) == 4  # check; the build, merge and pull-request legs
    assert all(s["uses"] == f"example/cannery-setup@{SHA}" for s in steps)
    assert "pip install" not in yaml.safe_dump(docs)


@pytest.mark.parametrize("ref", ["v1", "main", SHA[:12], SHA.upper()])
def test_an_action_by_tag_or_branch_is_refused(tmp_path: Path, cli, ref: str) -> None:  # type: ignore[no-untyped-def]
    path = _catalog(tmp_path, f'install_action = "example/cannery-setup@{ref}"\n')
    res = cli("render", "--catalog", str(path))
    assert res.code == 2
    assert "ci.install_action" in res.err and "full 40-hex commit SHA" in res.err, res.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cannery.toml"]


@pytest.mark.parametrize("path", GENERATED, ids=[p.parent.parent.parent.name for p in GENERATED])
def test_every_generated_workflow_installs_only_hashed_or_sha_pinned(path: Path) -> None:
    """No pip install without --require-hashes, no `uses:` not pinned by a full SHA."""
    text = path.read_text()
    installs = re.findall(r"pip3? install[^\n]*", text)
    assert installs, path  # cannery is installed somewhere
    for line in installs:
        assert "--require-hashes" in line and "--no-deps" in line, line
    uses = re.findall(r"uses:\s*(\S+)", text)
    assert uses
    for ref in uses:
        if ref.startswith("./"):  # a call job: a reusable workflow of the same commit
            assert (path.parent / ref.rsplit("/", 1)[1]).is_file(), ref
            continue
        assert re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}", ref), ref
    # the file it installs from is rendered beside it, every line hashed
    reqs = path.parent / "cannery-requirements.txt"
    lines = _pins(reqs.read_text())
    assert lines and all(re.search(r"( --hash=sha256:[0-9a-f]{64})+$", ln) for ln in lines)
    assert any(ln.startswith("cannery==") for ln in lines)


def _workflows(main: Path) -> list[dict[str, Any]]:
    """The main workflow and the reusable ones rendered beside it, parsed."""
    paths = [main, *(main.with_name(f"{main.stem}-{k}.yml") for k in ("build", "merge", "pr"))]
    return [yaml.safe_load(p.read_text()) for p in paths]
