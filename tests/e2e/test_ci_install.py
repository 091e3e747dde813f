"""CI installs cannery the way the rendered workflow says, end to end on this machine.

A package index on 127.0.0.1 (HTTPS, the test CA) serves a wheel of this checkout (written from
src/cannery and pyproject.toml, no build backend) and wheels of the dependencies installed
beside the tests (repacked from their installed files), so nothing is downloaded. `cannery
lock` resolves `[ci] install` with uv against it, `cannery render` writes the workflow and the
hashed requirements, and the workflow's own install step runs, as written, in a fresh venv with
a real pip; the cannery it installs runs. A wheel replaced on the index after locking is refused
and nothing of it is installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from cannery.lock import read_lock
from cannery.util import toml
from tests.conftest import ROOT
from tests.services.pyindex import PackageIndex
from tests.services.registry import LocalRegistry, push_index
from tests.services.standin import make_cannery_wheel, repack_installed, requirement_closure
from tests.services.tlsca import LocalCA

pytestmark = pytest.mark.e2e

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"

CATALOG = """\
[catalog]
name = "ci-install"
source = "https://example.com/ci-install"
registry = "local"
python_index = "{index}"

[registries.local]
repository = "{registry}/ci-install/images"

[bases.plain]
image = "{base_image}"
os = "ubuntu"
os_version = "22.04"
chip = "910b"

[images.plain]
base = "plain"
platforms = ["linux/amd64"]
tag = "plain"

[ci]
runners = {{ "linux/amd64" = "ubuntu-latest" }}
python = "{python}"
"""


@pytest.fixture(scope="module")
def cannery_index(
    tmp_path_factory: pytest.TempPathFactory, test_ca: LocalCA
) -> Iterator[PackageIndex]:
    index = PackageIndex(tmp_path_factory.mktemp("cannery-index"), test_ca)
    make_cannery_wheel(index.files, ROOT)
    project = toml.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    for name in requirement_closure(project["dependencies"]):
        repack_installed(index.files, name)
    index.publish()
    yield index
    index.stop()


def _run_step(command: str, cwd: Path, into: Path, ca: LocalCA) -> subprocess.CompletedProcess[str]:
    """``command`` (the workflow step's run:) in ``cwd`` with the fresh venv at ``into`` first
    on PATH, as actions/setup-python leaves it: this machine's pip configuration and
    find-links are out of play; the test CA is pip's trust (REQUESTS_CA_BUNDLE would override
    --cert, a known pip quirk)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIP_", "UV_")) and k not in ("REQUESTS_CA_BUNDLE",
                                                              "CURL_CA_BUNDLE", "PYTHONPATH")}
    env.update(PATH=f"{into / 'bin'}:{os.environ['PATH']}", PIP_CERT=str(ca.ca_cert),
               PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    return subprocess.run(["bash", "-e", "-c", command], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_ci_installs_the_locked_cannery_exactly_as_the_workflow_does(  # type: ignore[no-untyped-def]
    tmp_path: Path, cli, registry: LocalRegistry, test_ca: LocalCA, cannery_index: PackageIndex
) -> None:
    repo = f"ci-install/base-{tmp_path.name.lower()}"
    push_index(registry.url, repo, "22.04")
    catalog = tmp_path / "cannery.toml"
    catalog.write_text(CATALOG.format(index=cannery_index.url, registry=registry.host,
                                      base_image=f"{registry.host}/{repo}:22.04",
                                      python=PYTHON))

    # before the lock: render refuses to write an install without hashes
    res = cli("render", "--catalog", str(catalog))
    assert res.code == 2 and "[ci] install" in res.err, res.err

    res = cli("lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert))
    assert res.code == 0, res.err
    pins = read_lock(tmp_path / "cannery.lock").ci["amd64"].requirements
    names = {p.split("==")[0] for p in pins}
    assert {"cannery", "pydantic", "typer", "httpx", "uv"} <= names, pins
    assert all("--hash=sha256:" in p for p in pins)

    assert cli("render", "--catalog", str(catalog)).code == 0
    assert cli("render", "--check", "--catalog", str(catalog)).code == 0
    doc = yaml.safe_load((tmp_path / ".github" / "workflows" / "cannery-images.yml").read_text())
    steps = [s for job in doc["jobs"].values() for s in job.get("steps", [])  # (call jobs: none)
             if s["name"].startswith("Install cannery")]
    assert {s["run"] for s in steps} == {
        "python -m pip install --require-hashes --no-deps --only-binary :all: "
        "-r .github/workflows/cannery-requirements.txt"}
    command = steps[0]["run"]

    good = tmp_path / "venv-good"
    venv.create(good, with_pip=True)
    done = _run_step(command, tmp_path, good, test_ca)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    version = subprocess.run([str(good / "bin" / "cannery"), "--version"], capture_output=True,
                             text=True, timeout=120, env={"PATH": os.environ["PATH"]})
    assert version.returncode == 0 and "0.1.0" in version.stdout, version.stderr
    installed = subprocess.run(
        [str(good / "bin" / "python"), "-c",
         "import cannery, pathlib; print(pathlib.Path(cannery.__file__).parent)"],
        capture_output=True, text=True, timeout=120, env={"PATH": os.environ["PATH"]},
    ).stdout.strip()
    assert installed.startswith(str(good))  # the venv's copy, not this checkout
    assert (Path(installed) / "render" / "workflow" / "groups.py").read_bytes() == (
        ROOT / "src" / "cannery" / "render" / "workflow" / "groups.py").read_bytes()

    # The index now serves other bytes under the same name and version: refused, not installed.
    wheel = next(cannery_index.files.glob("cannery-*.whl"))
    original = wheel.read_bytes()
    try:
        wheel.write_bytes(original + b"\0")
        cannery_index.publish()
        bad = tmp_path / "venv-bad"
        venv.create(bad, with_pip=True)
        refused = _run_step(command, tmp_path, bad, test_ca)
        assert refused.returncode != 0
        assert "THESE PACKAGES DO NOT MATCH THE HASHES" in refused.stderr, refused.stderr[-2000:]
        assert not list((bad / "lib").glob("python*/site-packages/cannery"))
    finally:
        wheel.write_bytes(original)
        cannery_index.publish()
