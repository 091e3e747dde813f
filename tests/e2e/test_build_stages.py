"""Builder stages and a host-provided toolkit, end to end on both arches (issue 19, item 8):
real buildah (arm64 under qemu), the e2e world's registries, files server and wheel index
(see test_build.py).

- ``built``: Python built from a source tarball in the builder stage ``cannery-python``
  (downloaded over TLS from the world's files server, checked against the sha256 ``cannery
  lock`` recorded), its prefix copied into the final image; plus a catalog builder stage that
  compiles a small tool whose output is copied in and whose compiler step leaves nothing behind.
  The tarball is a stand-in of CPython's shape (``tests/services/pysource.py``: a configure, a
  shared libpython, a python3.X linked to it by rpath), small enough for qemu; the base is the
  world's stand-in base plus a stand-in ``make`` (the cached root filesystems have none).
- ``hosted``: a toolkit the host mounts at run time: no toolkit ENV, no io.cannery.toolkit
  label, ``io.cannery.toolkit-provided=host``, and verify does not look for the toolkit.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cannery.util import toml
from tests.e2e.buildenv import BuildWorld, cleanup_local_images, make_world, own_images
from tests.e2e.test_build import build, cannery, registry_get
from tests.services.pysource import MAKE_SHIM, make_python_tarball
from tests.services.tlsca import LocalCA

pytestmark = pytest.mark.e2e

VERSION = "3.11.99"
BUILT_TAG = "built-py3.11-debian12"
HOSTED_TAG = "hosted-8.5.2-py3.11"
IMAGES = """
[bases.builder]
image = "{builder}"
python = "3.11"
os = "debian"
os_version = "12"
chip = "910b"

[toolkits.host]
version = "8.5.2"
provided = "host"

[images.built]
base = "builder"
platforms = ["linux/amd64", "linux/arm64"]
tag = "built-py{{python}}-{{os}}{{os_version}}"

[images.built.python]
version = "{version}"
install = "source"
url = "{files}/python/Python-{{version}}.tgz"
build_packages = ["gcc", "libc6-dev"]

[[images.built.stages]]
name = "tool"
packages = ["gcc", "libc6-dev"]
steps = [
  {{ run = "mkdir -p /opt/tool/bin /tmp/tool" }},
  {{ run = "printf 'int main(void){{return 0;}}\\\\n' > /tmp/tool/t.c" }},
  {{ run = "cc -o /opt/tool/bin/ok /tmp/tool/t.c && rm -rf /tmp/tool" }},
]
outputs = ["/opt/tool"]

[images.hosted]
base = "standin"
toolkit = "host"
platforms = ["linux/amd64", "linux/arm64"]
tag = "hosted-{{cann}}-py{{python}}"
components = ["hello"]
smoke_imports = ["hello_cannery"]
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, test_ca: LocalCA) -> Iterator[BuildWorld]:
    w = make_world(tmp_path_factory.mktemp("world"), test_ca)
    (w.files_root / "python").mkdir()
    make_python_tarball(w.files_root / "python" / f"Python-{VERSION}.tgz", VERSION)
    yield w
    w.stop()
    cleanup_local_images()


def _bah(*args: str) -> str:
    return subprocess.run(["buildah", *args], check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture(scope="module")
def builder_base(world: BuildWorld) -> str:
    """The world's two-arch base with the stand-in make added, pushed as one index."""
    shim = world.root / "make"
    shim.write_bytes(MAKE_SHIM)
    ref = f"{world.registry.host}/standin/builder:debian12"
    manifest = f"localhost/cannery-test-builder-{os.getpid()}"
    subprocess.run(["buildah", "manifest", "rm", manifest], capture_output=True, check=False)
    _bah("manifest", "create", manifest)
    for arch in ("amd64", "arm64"):
        ctr = _bah("from", "--quiet", "--arch", arch, "--cert-dir", str(world.cert_dir),
                   f"docker://{world.base}")
        try:
            _bah("copy", "--chmod", "0755", ctr, str(shim), "/usr/local/bin/make")
            image = _bah("commit", "--quiet", "--format", "docker", ctr)
        finally:
            subprocess.run(["buildah", "rm", ctr], capture_output=True, check=False)
        _bah("manifest", "add", manifest, image)
    _bah("manifest", "push", "--quiet", "--all", "--cert-dir", str(world.cert_dir), manifest,
         f"docker://{ref}")
    subprocess.run(["buildah", "manifest", "rm", manifest], capture_output=True, check=False)
    return ref


@pytest.fixture(scope="module")
def catalog(world: BuildWorld, builder_base: str) -> Path:
    path = world.catalog(world.root / "stages", repo="stages")
    text = path.read_text()
    path.write_text(own_images(text, IMAGES.format(builder=builder_base, version=VERSION,
                                                   files=world.files.url)))
    return path


@pytest.fixture(scope="module")
def built(world: BuildWorld, catalog: Path) -> dict:  # type: ignore[type-arg]
    rc, summary, err = build(world, catalog)
    assert rc == 0, err[-3000:]
    return {i["image"]: i for i in summary["images"]}


def _config(world: BuildWorld, ref: str, arch: str) -> dict:  # type: ignore[type-arg]
    out = subprocess.run(
        ["skopeo", "inspect", "--config", "--override-arch", arch, "--cert-dir",
         str(world.cert_dir), "--creds", f"{world.user}:{world.password}", f"docker://{ref}"],
        check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out)["config"]  # type: ignore[no-any-return]


def _run_in(world: BuildWorld, ref: str, arch: str, script: str) -> str:
    local = f"localhost/cannery-stages-check:{arch}"
    subprocess.run(
        ["skopeo", "copy", "--quiet", "--override-arch", arch, "--src-cert-dir",
         str(world.cert_dir), "--src-creds", f"{world.user}:{world.password}",
         f"docker://{ref}", f"containers-storage:{local}"],
        check=True, capture_output=True, text=True,
    )
    ctr = _bah("from", "--quiet", "--arch", arch, local)
    try:
        return subprocess.run(["buildah", "run", ctr, "--", "bash", "-c", script], check=True,
                              capture_output=True, text=True).stdout
    finally:
        subprocess.run(["buildah", "rm", ctr], capture_output=True, check=False)


def _verify(world: BuildWorld, catalog: Path, ref: str) -> set[tuple[str, str]]:
    proc = cannery(world, "verify", ref, "--catalog", str(catalog), "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert all(c["ok"] for c in report["checks"]), report["checks"]
    return {(c["platform"], c["name"]) for c in report["checks"]}


def test_python_built_in_a_stage_runs_on_both_arches_and_verifies(
    world: BuildWorld, catalog: Path, built: dict  # type: ignore[type-arg]
) -> None:
    assert built["built"]["tags_moved"] == [BUILT_TAG]
    lock = toml.loads((catalog.parent / "cannery.lock").read_text())
    url = f"{world.files.url}/python/Python-{VERSION}.tgz"
    assert url in lock["urls"]  # recorded by the lock like an installer
    ref = f"{world.push_registry.host}/e2e/stages:{BUILT_TAG}"
    checks = _verify(world, catalog, ref)
    for platform in ("linux/amd64", "linux/arm64"):
        assert (platform, "python version") in checks
        assert (platform, "label io.cannery.toolkit") in checks  # checked absent
    for arch in ("amd64", "arm64"):
        out = _run_in(world, ref, arch,
                      "python3 --version; command -v python3; "
                      "cat /opt/cannery/python-runtime-packages; /opt/tool/bin/ok && echo tool-ok; "
                      "command -v cc gcc make || true; ls /tmp")
        lines = out.splitlines()
        assert lines[:2] == [f"Python {VERSION}", f"/usr/local/python{VERSION}/bin/python3"], out
        assert "libc6" in lines and "tool-ok" in lines, out
        # The stand-in base has its own compiler (a fact of the base), but the build-only make
        # came only with this test's base; the stages' scratch files are not in the image.
        assert lines[-1:] != ["t.c"] and "python.run" not in out, out
        env = dict(e.split("=", 1) for e in _config(world, ref, arch)["Env"])
        assert env["PATH"].startswith(f"/usr/local/python{VERSION}/bin:"), env
        assert not any(k.startswith("ASCEND") or k == "SOC_VERSION" for k in env), env


def test_host_toolkit_image_claims_no_toolkit_and_verifies_on_both_arches(
    world: BuildWorld, catalog: Path, built: dict  # type: ignore[type-arg]
) -> None:
    assert built["hosted"]["tags_moved"] == [HOSTED_TAG]
    ref = f"{world.push_registry.host}/e2e/stages:{HOSTED_TAG}"
    checks = _verify(world, catalog, ref)
    for platform in ("linux/amd64", "linux/arm64"):
        assert (platform, "import hello_cannery") in checks
        assert (platform, "label io.cannery.toolkit-provided") in checks
        assert (platform, "runtime env") not in checks  # no toolkit scripts to compare
    for arch in ("amd64", "arm64"):
        config = _config(world, ref, arch)
        labels = config.get("Labels") or {}
        assert labels.get("io.cannery.toolkit-provided") == "host", labels
        assert "io.cannery.toolkit" not in labels and "io.cannery.soc" not in labels, labels
        env = dict(e.split("=", 1) for e in config["Env"])
        assert not [k for k in env if k.startswith("ASCEND")], env


def test_tampered_python_tarball_fails_at_sha256sum_and_no_tag_moves(
    world: BuildWorld, catalog: Path, built: dict  # type: ignore[type-arg]
) -> None:
    tarball = world.files_root / "python" / f"Python-{VERSION}.tgz"
    good = tarball.read_bytes()
    tampered = world.root / "tampered"
    tampered.mkdir()
    (tampered / "catalog.toml").write_text(
        catalog.read_text().replace("/e2e/stages", "/e2e/stages-tampered").replace(
            'platforms = ["linux/amd64", "linux/arm64"]\ntag = "built',
            'platforms = ["linux/amd64"]\ntag = "built'))
    (tampered / "cannery.lock").write_text((catalog.parent / "cannery.lock").read_text())
    make_python_tarball(tarball, "3.11.98")  # a working tarball, not the locked bytes
    bad = tarball.read_bytes()
    try:
        rc, summary, err = build(world, tampered / "catalog.toml", "--frozen", "built")
    finally:
        tarball.write_bytes(good)
    assert rc == 1, err[-2000:]
    image = summary["images"][0]
    assert image["tags_moved"] == [] and image["index_digest"] is None
    log = Path(image["platforms"][0]["log"]).read_text()
    # the check names the URL and both digests
    url = f"{world.files.url}/python/Python-{VERSION}.tgz"
    assert (f"cannery: {url}: sha256 {hashlib.sha256(bad).hexdigest()}, but cannery.lock has "
            f"{hashlib.sha256(good).hexdigest()}") in log, log[-2000:]
    assert registry_get(world, "stages-tampered", BUILT_TAG).status_code == 404
