"""An image built from the checkout, end to end: real buildah (arm64 under qemu), the e2e
world's registries, stand-in toolkit and index (see test_build.py for what is a stand-in).

The repository being built holds the catalog and a small Python project; the image copies it
(`path = "."`) and installs it, with runtime settings, a step after the installs and an alias.
verify must pass on both platforms, and the labels must carry the commit git reports.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.buildenv import BuildWorld, cleanup_local_images, make_world, own_images
from tests.e2e.test_build import build, cannery, registry_get
from tests.services.tlsca import LocalCA

pytestmark = pytest.mark.e2e

if shutil.which("buildah") is None:
    if os.environ.get("CI"):
        raise RuntimeError("buildah is not installed: scripts/test.sh installs it")
    pytest.skip("buildah is not installed (run scripts/test.sh)", allow_module_level=True)

TAG = "checkout-8.5.2-910b"
IMAGE = """
[components.here]
path = "."
dest = "/workspace/here"
install = "editable"
pip_args = ["--no-build-isolation"]  # setuptools from the base, as the world's fastops

[images.checkout]
base = "standin"
toolkit = "standin-852"
platforms = ["linux/amd64", "linux/arm64"]
tag = "checkout-{cann}-{chip}"
aliases = ["latest"]
components = ["here"]
revision_from = "here"
smoke_imports = ["here_pkg"]
env.TASK_QUEUE_ENABLE = "1"
env.LD_LIBRARY_PATH = { append = ["/usr/local/lib"] }
workdir = "/workspace"

[[images.checkout.steps]]
symlink = { target = "/workspace/here", link = "/opt/here" }
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, test_ca: LocalCA) -> Iterator[BuildWorld]:
    w = make_world(tmp_path_factory.mktemp("world"), test_ca)
    yield w
    w.stop()
    cleanup_local_images()


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True, capture_output=True, text=True,
    ).stdout.strip()


@pytest.fixture(scope="module")
def repo(world: BuildWorld) -> Path:
    """A repository with the catalog at its root and a Python project beside it."""
    root = world.root / "repo"
    catalog = world.catalog(root, repo="checkout")
    # Only the checkout image: the world's own image is test_build.py's.
    catalog.write_text(own_images(catalog.read_text(), IMAGE))
    (root / "here_pkg").mkdir()
    (root / "here_pkg" / "__init__.py").write_text("VALUE = 1\n")
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "here-pkg"\nversion = "1.0"\n'
        '[tool.setuptools]\npackages = ["here_pkg"]\n'
    )
    (root / ".gitignore").write_text("logs/\ncannery.lock\n.cannery/\n")
    assert cannery(world, "render", "dockerfile", "--catalog", str(catalog)).returncode == 0
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "the checkout")
    return root


def test_checkout_image_builds_for_both_arches_and_verifies(world: BuildWorld, repo: Path) -> None:
    catalog = repo / "catalog.toml"
    commit = _git(repo, "rev-parse", "HEAD")
    rc, summary, err = build(world, catalog, "--context", str(repo))
    assert rc == 0, err[-3000:]
    image = summary["images"][0]
    assert image["tags_moved"] == [TAG, "latest"]
    assert registry_get(world, "checkout", "latest").headers["docker-content-digest"] == (
        image["index_digest"]
    )
    ref = f"{world.push_registry.host}/e2e/checkout:{TAG}"
    proc = cannery(world, "verify", ref, "--catalog", str(catalog), "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    ok = {(c["platform"], c["name"]) for c in report["checks"] if c["ok"]}
    for platform in ("linux/amd64", "linux/arm64"):
        assert (platform, "label io.cannery.component.here") in ok
        assert (platform, "import here_pkg") in ok
        assert (platform, "runtime env") in ok
    # The label holds the commit git reports, and .git stayed out of the image.
    inspect = subprocess.run(
        ["skopeo", "inspect", "--cert-dir", str(world.cert_dir), "--creds",
         f"{world.user}:{world.password}", f"docker://{ref}"],
        capture_output=True, text=True, check=False,
    )
    if inspect.returncode == 0:
        labels = json.loads(inspect.stdout)["Labels"]
        assert labels["io.cannery.component.here"] == commit
        assert labels["org.opencontainers.image.revision"] == commit


def test_a_dirty_checkout_is_said_and_rebuilds(world: BuildWorld, repo: Path) -> None:
    catalog = repo / "catalog.toml"
    (repo / "here_pkg" / "__init__.py").write_text("VALUE = 2\n")
    rc, summary, err = build(world, catalog, "--platform", "linux/amd64", "--digest-dir",
                             str(repo / "digests"), "--context", str(repo))
    assert rc == 0, err[-3000:]
    assert "has uncommitted changes" in err and "+dirty." in err
    platform = summary["images"][0]["platforms"][0]
    assert platform["skipped"] is None  # new inputs: built, not skipped
