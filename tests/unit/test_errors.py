"""Expected failures exit 2 with one line and write nothing; unexpected ones exit 3 with a
crash log; never a traceback on the terminal."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.catalogs import minimal


def test_out_is_an_existing_file(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "afile"
    target.write_text("keep me")
    res = cli("render", "dockerfile", "--out", str(target))
    assert res.code == 2
    assert res.err.strip().splitlines() == [
        f"cannery: error: {target}: exists and is not a directory"
    ]
    assert target.read_text() == "keep me"


def test_out_inside_a_file(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "afile"
    target.write_text("")
    res = cli("render", "dockerfile", "--out", str(target / "sub"))
    assert res.code == 2 and len(res.err.strip().splitlines()) == 1
    assert str(target) in res.err and "Traceback" not in res.err


def test_unwritable_directory_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    """A real permission error: as root, the command runs as `nobody` (root may write anywhere)."""
    shared = Path(tempfile.mkdtemp(prefix="cannery-ro-"))
    try:
        shared.chmod(0o755)
        out = shared / "out"
        out.mkdir(mode=0o555)
        out.chmod(0o555)
        drop: list[str] = []
        if os.geteuid() == 0:  # util-linux's setpriv: run as nobody, with no groups
            drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
            # nobody must reach the checkout (a clone inside `mktemp -d` is 0700).
            src = Path(__file__).resolve().parents[2]
            closed = [d for d in (src, *src.parents) if not d.stat().st_mode & 0o001]
            if closed:
                pytest.skip(f"{closed[0]} is not searchable by others, so `nobody` cannot "
                            "import cannery from this checkout")
        proc = subprocess.run(
            [
                *drop,
                sys.executable,
                "-m",
                "cannery",
                "render",
                "dockerfile",
                "--lock",
                "/nonexistent",
                "--out",
                str(out),
            ],
            capture_output=True,
            text=True,
            cwd="/",
            timeout=120,
            env={**os.environ, "HOME": str(shared)},
        )
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "Permission denied" in lines[0] and str(out) in lines[0]
        assert list(out.iterdir()) == []
    finally:
        (shared / "out").chmod(0o755)
        import shutil

        shutil.rmtree(shared)


@pytest.mark.parametrize("kind", ["catalog", "lock"])
def test_toml_error_at_the_end_of_the_file_names_its_last_line(
    tmp_path: Path,
    cli,
    kind: str,  # type: ignore[no-untyped-def]
) -> None:
    path = tmp_path / f"{kind}.toml"
    good = minimal() if kind == "catalog" else "version = 1\n"
    text = good + "\n[extra]\nitems = [\n  1,\n"
    path.write_text(text)
    args = (
        ("catalog", "validate", str(path)) if kind == "catalog" else ("plan", "--lock", str(path))
    )
    res = cli(*args)
    assert res.code == 2
    last = len(text.splitlines())
    assert f"{path}:{last}: TOML syntax error: " in res.err and "at the end of the file" in res.err


def test_unexpected_error_exits_3_with_a_crash_log(tmp_path: Path, cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import cannery.commands.plan

    def boom(*args: object, **kwargs: object) -> int:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(cannery.commands.plan, "plan_cmd", boom)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    res = cli("plan")
    assert res.code == 3
    assert "Traceback" not in res.err
    assert "internal error: RuntimeError: kaboom" in res.err
    logs = list((tmp_path / "cannery").glob("cannery-crash-*.log"))
    assert len(logs) == 1 and str(logs[0]) in res.err
    text = logs[0].read_text()
    assert "Traceback" in text and "kaboom" in text and "argv: plan" in text


def test_network_error_is_not_bad_input() -> None:
    from cannery.errors import CommandError, InputError, NetworkError

    assert not issubclass(NetworkError, InputError) and NetworkError.exit_code == 2
    assert CommandError.exit_code == 2
