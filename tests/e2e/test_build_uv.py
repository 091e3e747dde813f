"""installer = "uv", end to end: real buildah, the e2e world's registries, stand-in toolkit and
index (see test_build.py for what is a stand-in), and a uv wheel the tests build from the uv
installed beside them (tests/services/standin.py), served from the world's index.

The image lists uv in pip_tools, so the lock pins it with its hash and the locked step installs
it with pip; uv then installs the git component (which compiles, built without isolation from
the locked setuptools). linux/amd64 only: what is checked here does not depend on the arch.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.buildenv import BuildWorld, cleanup_local_images, make_world
from tests.e2e.test_build import build, cannery
from tests.services.standin import add_uv_wheels, uv_version
from tests.services.tlsca import LocalCA

pytestmark = pytest.mark.e2e

if shutil.which("buildah") is None:
    if os.environ.get("CI"):
        raise RuntimeError("buildah is not installed: scripts/test.sh installs it")
    pytest.skip("buildah is not installed (run scripts/test.sh)", allow_module_level=True)

UV_VERSION = uv_version()
IMAGE = f"""
[images.uv]
base = "standin"
toolkit = "standin-852"
soc = "ascend910b1"
platforms = ["linux/amd64"]
tag = "uv-{{cann}}-{{chip}}"
pip_tools = ["uv=={UV_VERSION}"]
installer = "uv"
components = ["hello", "fastops"]
smoke_imports = ["hello_cannery", "fastops"]
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, test_ca: LocalCA) -> Iterator[BuildWorld]:
    w = make_world(tmp_path_factory.mktemp("world"), test_ca)
    add_uv_wheels(w.files_root / "wheels")
    yield w
    w.stop()
    cleanup_local_images()


def _installer_of(local: str, dist: str) -> str:
    """The INSTALLER a distribution's metadata records in the built image (pip writes "pip",
    uv "uv"), read by running the image's own Python."""
    ctr = subprocess.run(["buildah", "from", "--pull-never", local], capture_output=True,
                         text=True, check=True).stdout.strip()
    try:
        out = subprocess.run(
            ["buildah", "run", ctr, "--", "python3", "-c",
             f"import importlib.metadata as m; print(m.distribution({dist!r})"
             ".read_text('INSTALLER').strip())"],
            capture_output=True, text=True, check=True,
        )
        return out.stdout.strip()
    finally:
        subprocess.run(["buildah", "rm", ctr], capture_output=True, check=False)


def test_uv_installs_the_git_component_from_the_locked_uv(world: BuildWorld) -> None:
    catalog = world.catalog(world.root / "uv", repo="uv")
    catalog.write_text(catalog.read_text() + IMAGE)
    rc, summary, err = build(world, catalog, "uv")
    assert rc == 0, err[-3000:]
    # uv is pinned with its hash in the lock, for the image's one platform
    lock = (catalog.parent / "cannery.lock").read_text()
    assert f'"uv=={UV_VERSION} --hash=sha256:' in lock, lock[-2000:]
    log = Path(summary["images"][0]["platforms"][0]["log"]).read_text()
    # pip installs the locked set (uv in it); uv installs the component, and says so
    assert "Successfully installed" in log and f"uv-{UV_VERSION}" in log
    assert "uv pip install --system --no-cache --compile-bytecode --system-certs" in log
    assert "+ fastops==" in log, log[-3000:]
    local = next(
        line.split()[-1] for line in log.splitlines() if line.startswith("Successfully tagged")
    )
    assert _installer_of(local, "fastops") == "uv"
    assert _installer_of(local, "hello-cannery") == "pip"  # the locked step's
    ref = f"{world.push_registry.host}/e2e/uv:{summary['images'][0]['tags'][0]}"
    proc = cannery(world, "verify", ref, "--catalog", str(catalog), "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    names = {c["name"] for c in json.loads(proc.stdout)["checks"] if c["ok"]}
    assert {"import fastops", "import hello_cannery"} <= names, names
