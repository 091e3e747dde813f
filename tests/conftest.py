from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

from tests.services.registry import LocalRegistry
from tests.services.tlsca import HTTPSFileServer, LocalCA, make_ca

# CI explores the same examples every run (a property failure there is reproducible, never a
# coin toss); a developer's run explores new ones.
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    """Run the cannery CLI in-process; returns exit code, stdout, stderr."""
    from cannery.cli import main

    def run(*args: str) -> Result:
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def run_subprocess(*args: str, cwd: Path | None = None) -> Result:
    proc = subprocess.run(
        [sys.executable, "-m", "cannery", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    reg = LocalRegistry(tmp_path_factory.mktemp("registry"))
    yield reg
    reg.stop()


@pytest.fixture(scope="session")
def test_ca(tmp_path_factory: pytest.TempPathFactory) -> LocalCA:
    return make_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="session")
def tls_registry(
    tmp_path_factory: pytest.TempPathFactory, test_ca: LocalCA
) -> Iterator[LocalRegistry]:
    reg = LocalRegistry(
        tmp_path_factory.mktemp("tlsregistry"), tls=(test_ca.server_cert, test_ca.server_key)
    )
    yield reg
    reg.stop()


@pytest.fixture(scope="session")
def https_files(
    tmp_path_factory: pytest.TempPathFactory, test_ca: LocalCA
) -> Iterator[tuple[HTTPSFileServer, Path]]:
    root = tmp_path_factory.mktemp("www")
    server = HTTPSFileServer(root, test_ca)
    yield server, root
    server.stop()
