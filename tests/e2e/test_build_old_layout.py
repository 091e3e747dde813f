"""The CANN 8.0–8.3 `ascend-toolkit` layout, end to end on both arches (real buildah, arm64
under qemu; the e2e world of test_build.py). The stand-in installer's second mode lays out that
tree (`tests/services/standin.py`, `make_old_toolkit_run`: the toolkit under
/usr/local/Ascend/ascend-toolkit/8.3.RC2, `latest` pointing at it, set_env.sh and NNAL's as CANN
8.3 writes them); the catalog names `layout = "ascend-toolkit"` and the built-in "cann-8.3" env
table. The install step's env check (every variable the scripts set, against the image ENV)
passes in the build, and `verify` runs the same comparison in a container of each platform.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.buildenv import BuildWorld, cleanup_local_images, make_world, own_images
from tests.e2e.test_build import build, cannery
from tests.services.standin import OLD_ENV_SCRIPTS, make_old_toolkit_run
from tests.services.tlsca import LocalCA

pytestmark = pytest.mark.e2e

VERSION = "8.3.RC2"
SCRIPTS = ", ".join(f'"{s}"' for s in OLD_ENV_SCRIPTS)
IMAGES = f"""
[toolkits.old]
version = "{VERSION}"
layout = "ascend-toolkit"
env = "cann-8.3"
env_scripts = [{SCRIPTS}]
install_args = ["--quiet", "--install", "--install-for-all"]

[[toolkits.old.packages]]
name = "toolkit"
url = "{{files}}/old/Ascend-cann-toolkit_{{{{version}}}}_linux-{{{{uname_arch}}}}.run"

[images.old]
base = "standin"
toolkit = "old"
platforms = ["linux/amd64", "linux/arm64"]
tag = "old-{{{{cann}}}}-{{{{chip}}}}"
smoke_imports = ["cann_standin"]
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, test_ca: LocalCA) -> Iterator[BuildWorld]:
    w = make_world(tmp_path_factory.mktemp("world"), test_ca)
    for arch, uname in (("amd64", "x86_64"), ("arm64", "aarch64")):
        make_old_toolkit_run(
            w.files_root / "old" / f"Ascend-cann-toolkit_{VERSION}_linux-{uname}.run",
            VERSION, arch)
    yield w
    w.stop()
    cleanup_local_images()


@pytest.fixture(scope="module")
def catalog(world: BuildWorld) -> Path:
    path = world.catalog(world.root / "old", repo="old")
    images = IMAGES.format(files=world.files.url)
    path.write_text(own_images(path.read_text(), images))
    return path


def test_the_ascend_toolkit_layout_builds_and_verifies_on_both_arches(
    world: BuildWorld, catalog: Path
) -> None:
    rc, _, err = build(world, catalog)
    assert rc == 0, err[-3000:]
    ref = f"{world.push_registry.host}/e2e/old:old-8.3.rc2-910b"
    proc = cannery(world, "verify", ref, "--catalog", str(catalog), "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    passed = {(c["platform"], c["name"]) for c in json.loads(proc.stdout)["checks"] if c["ok"]}
    for platform in ("linux/amd64", "linux/arm64"):
        # the sourced scripts and the image ENV agree in a running container
        assert (platform, "runtime env") in passed
        assert (platform, "env ASCEND_TOOLKIT_HOME") in passed
        assert (platform, "env ATB_WORKSPACE_MEM_ALLOC_GLOBAL") in passed  # 8.3's own NNAL value
        assert (platform, "import cann_standin") in passed
        assert (platform, "label io.cannery.driver.min") in passed  # 25.3.rc1 for CANN 8.3
