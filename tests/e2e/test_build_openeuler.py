"""An openEuler-shaped catalog image, end to end on both arches: real buildah (arm64 under
qemu), the e2e world's registries, stand-in toolkit and wheel index (see test_build.py), and the
dnf step cannery renders for ``os = "openeuler"``, really run.

Stand-ins, because no openEuler mirror or image is reachable here: the base is Debian 12 with
Debian's dnf 4 and rpm 4.18, its os-release saying openEuler 24.03 and its rpm database
recording ca-certificates and curl as installed (``scripts/test-bases.sh``,
``tests/services/rpmrepo.py``); its one repository is a local one of small noarch RPMs built
and signed with a test GPG key at test time, served over HTTPS with the test CA, with
``gpgcheck=1`` as openEuler's own repository file has it. The `[build_mirrors]` tests serve the
same repository and wheel index again on other ports as the "mirrors", and a tampered copy of
the index as a mirror that lies.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.e2e.buildenv import BuildWorld, cleanup_local_images, make_world, own_images
from tests.e2e.imagediff import ACCEPT, describe_across
from tests.e2e.test_build import CANNERY, _ssl, build, cannery
from tests.services.bases import BASE_LAYERS, push_base
from tests.services.rpmrepo import KEY_PATH, UNSIGNED, RpmRepo, base_rpmdb, make_rpm_repo
from tests.services.tlsca import HTTPSFileServer, LocalCA

pytestmark = pytest.mark.e2e

for tool in ("buildah", "rpmbuild", "createrepo_c"):
    if shutil.which(tool) is None:
        if os.environ.get("CI"):
            raise RuntimeError(f"{tool} is not installed: scripts/setup-system.sh installs it")
        pytest.skip(f"{tool} is not installed (run scripts/setup-system.sh)",
                    allow_module_level=True)

TAG = "oe-8.5.2-910b-openeuler24.03"
IMAGE = """
[bases.oe]
image = "{base}"
python = "3.11"
os = "openeuler"
os_version = "24.03"
chip = "910b"
toolkit_version = "8.5.1"

[images.oe]
base = "oe"
toolkit = "standin-852"
platforms = ["linux/amd64", "linux/arm64"]
tag = "oe-{{cann}}-{{chip}}-{{os}}{{os_version}}"
packages = {packages}
components = ["hello"]
smoke_imports = ["cann_standin", "hello_cannery"]
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, test_ca: LocalCA) -> Iterator[BuildWorld]:
    w = make_world(tmp_path_factory.mktemp("world"), test_ca)
    yield w
    w.stop()
    cleanup_local_images()


@pytest.fixture(scope="module")
def rpm_repo(world: BuildWorld) -> Iterator[tuple[RpmRepo, HTTPSFileServer]]:
    """The signed RPM repository, served over HTTPS: the base's one repository."""
    repo = make_rpm_repo(world.root / "rpms")
    server = HTTPSFileServer(repo.root, world.ca)
    yield repo, server
    server.stop()


@pytest.fixture(scope="module")
def oe_base(world: BuildWorld, rpm_repo: tuple[RpmRepo, HTTPSFileServer]) -> Iterator[str]:
    """The openEuler stand-in base, its repository file pointing at the signed RPMs."""
    repo, server = rpm_repo
    work = world.root / "oe-base"
    work.mkdir()
    (work / "standin.repo").write_text(repo.repo_file(server.url + "/"))
    rpmdb = base_rpmdb(work / "rpmroot")
    ref = push_base(
        world.registry.host, world.ca, work, family="openeuler",
        extra=[(rpmdb, "/var/lib/rpm"), (work / "standin.repo", "/etc/yum.repos.d/standin.repo"),
               (repo.public_key, KEY_PATH)],
    )  # fmt: skip
    yield ref


def _catalog(world: BuildWorld, base: str, where: str, packages: list[str]) -> Path:
    catalog = world.catalog(world.root / where, repo=where)
    text = catalog.read_text()
    catalog.write_text(own_images(text, IMAGE.format(base=base, packages=json.dumps(packages))))
    return catalog


def _run_in(image: str, arch: str, *cmd: str) -> str:
    ctr = subprocess.run(
        ["buildah", "from", "--arch", arch, "--quiet", image],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    try:
        return subprocess.run(
            ["buildah", "run", ctr, "--", *cmd], check=True, capture_output=True, text=True
        ).stdout
    finally:
        subprocess.run(["buildah", "rm", ctr], capture_output=True, check=False)


def test_openeuler_image_installs_signed_rpms_with_dnf_on_both_arches_and_verifies(
    world: BuildWorld, oe_base: str
) -> None:
    catalog = _catalog(world, oe_base, "openeuler", ["standin-hello"])
    subprocess.run(
        [*CANNERY, "render", "dockerfile", "--catalog", str(catalog)],
        capture_output=True, text=True, check=True, env=world.env(),
    )  # fmt: skip
    dockerfile = (catalog.parent / "dockerfiles" / "oe.Dockerfile").read_text()
    assert "dnf install" in dockerfile and "apt-get" not in dockerfile and "dpkg" not in dockerfile

    rc, summary, err = build(world, catalog)
    assert rc == 0, err[-3000:]
    image = summary["images"][0]
    assert image["tags_moved"] == [TAG]
    ref = f"{world.push_registry.host}/e2e/openeuler:{TAG}"
    proc = cannery(world, "verify", ref, "--catalog", str(catalog), "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    ok = {(c["platform"], c["name"]) for c in report["checks"] if c["ok"]}
    for platform in ("linux/amd64", "linux/arm64"):
        assert (platform, "import hello_cannery") in ok
        assert (platform, "runtime env") in ok

    # What dnf did, per arch: the signed package and its dependency installed from the repo,
    # the base's own packages not reinstalled, dnf's caches and logs not in the image.
    for arch in ("amd64", "arm64"):
        local = f"localhost/cannery-oe-check:{arch}"
        subprocess.run(
            ["skopeo", "copy", "--quiet", "--override-arch", arch,
             "--src-cert-dir", str(world.cert_dir), "--src-creds",
             f"{world.user}:{world.password}", f"docker://{ref}", f"containers-storage:{local}"],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        out = _run_in(local, arch, "bash", "-c",
                      "standin-hello; rpm -q --qf '%{NAME} %{INSTALLTIME}\\n' standin-hello "
                      "standin-data ca-certificates curl; ls -A /var/cache/dnf; "
                      "ls /var/log/dnf.log 2>&1 || true")
        lines = out.splitlines()
        assert lines[0] == "hello from a signed rpm", out
        times = dict(line.split() for line in lines[1:5])
        assert set(times) == {"standin-hello", "standin-data", "ca-certificates", "curl"}, out
        # The base's records predate the build's install: rpm -q found them, dnf skipped them.
        assert times["ca-certificates"] < times["standin-hello"], out
        assert times["curl"] < times["standin-hello"], out
        assert "No such file" in lines[-1], out
        assert lines[5:-1] == [], out  # /var/cache/dnf emptied in the same step


def test_a_package_nobody_signed_is_refused(world: BuildWorld, oe_base: str) -> None:
    """gpgcheck stays as the base sets it: the unsigned package in the same repository fails
    the build (one arch is enough to show it)."""
    catalog = _catalog(world, oe_base, "unsigned", [UNSIGNED])
    catalog.write_text(catalog.read_text().replace(
        'platforms = ["linux/amd64", "linux/arm64"]', 'platforms = ["linux/amd64"]'))
    rc, _summary, err = build(world, catalog)
    assert rc != 0
    log = "\n".join(p.read_text(errors="replace") for p in (catalog.parent / "logs").rglob("*")
                    if p.is_file())
    # dnf's own refusal, not some earlier failure
    assert f"Package {UNSIGNED}-1.0-1.noarch.rpm is not signed" in err + log, (err + log)[-3000:]



MIRRORS = """
[build_mirrors]
packages = {{ "{rpm}/" = "{rpm_mirror}/" }}
python = {{ "{files}/wheels/" = "{py_mirror}/wheels/" }}

# CI's cannery through an action pinned by commit: `cannery lock` has no [ci] install to
# resolve from this test's wheelhouse (tests/e2e/test_ci_install.py locks one).
[ci]
install_action = "example/cannery-setup@0123456789abcdef0123456789abcdef01234567"
"""


def _layers(world: BuildWorld, ref: str, arch: str, out: Path) -> list[bytes]:
    """The uncompressed layer tars of ``ref``'s ``arch`` image, and its config last."""
    subprocess.run(
        ["skopeo", "copy", "--quiet", "--override-arch", arch, "--src-cert-dir",
         str(world.cert_dir), "--src-creds", f"{world.user}:{world.password}",
         f"docker://{ref}", f"oci:{out}"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    index = json.loads((out / "index.json").read_text())
    blob = out / "blobs" / "sha256"
    manifest = json.loads((blob / index["manifests"][0]["digest"][7:]).read_text())
    layers = [gzip.decompress((blob / d["digest"][7:]).read_bytes())
              if d["mediaType"].endswith("gzip") else (blob / d["digest"][7:]).read_bytes()
              for d in manifest["layers"]]
    return [*layers, (blob / manifest["config"]["digest"][7:]).read_bytes()]


@dataclass
class Mirrored:
    catalog: Path
    summary: dict  # type: ignore[type-arg]
    original_rpm: list[str]  # requests each server saw during the build
    original_files: list[str]
    rpm_mirror: HTTPSFileServer
    py_mirror: HTTPSFileServer


@pytest.fixture(scope="module")
def mirrored(
    world: BuildWorld, oe_base: str, rpm_repo: tuple[RpmRepo, HTTPSFileServer]
) -> Iterator[Mirrored]:
    """The openEuler image (one arch: the step is the same text on both) built against an RPM
    mirror and a Python index mirror, each serving what the original serves; locked first,
    from the originals."""
    repo, original = rpm_repo
    rpm_mirror = HTTPSFileServer(repo.root, world.ca)
    py_mirror = HTTPSFileServer(world.files_root, world.ca)
    catalog = _catalog(world, oe_base, "mirrored", ["standin-hello"])
    text = catalog.read_text().replace(
        'platforms = ["linux/amd64", "linux/arm64"]', 'platforms = ["linux/amd64"]')
    catalog.write_text(text + MIRRORS.format(
        rpm=original.url, rpm_mirror=rpm_mirror.url, files=world.files.url,
        py_mirror=py_mirror.url))
    lock = cannery(world, "lock", "--catalog", str(catalog))
    assert lock.returncode == 0, lock.stderr[-3000:]
    original.requests.clear()
    world.files.requests.clear()
    rc, summary, err = build(world, catalog, "--locked")
    assert rc == 0, err[-3000:]
    yield Mirrored(catalog, summary, list(original.requests), list(world.files.requests),
                   rpm_mirror, py_mirror)
    rpm_mirror.stop()
    py_mirror.stop()


def test_build_mirrors_are_used_and_nothing_of_them_is_in_any_layer(
    world: BuildWorld, mirrored: Mirrored
) -> None:
    """dnf and pip fetch from the mirrors only (the originals see no request during the
    build), signature and hash checks still pass, and no layer holds the mirror: the
    base's .repo file is the base's, no copy is left, no pip config, nothing in ENV/labels."""
    rpm_mirror, py_mirror = mirrored.rpm_mirror, mirrored.py_mirror
    assert mirrored.original_rpm == []
    assert any(p.endswith("repomd.xml") for p in rpm_mirror.requests), rpm_mirror.requests
    assert any(p.endswith(".rpm") and "standin-hello" in p for p in rpm_mirror.requests)
    assert not [p for p in mirrored.original_files if p.startswith("/wheels/")]
    assert any(p.startswith("/wheels/") and p.endswith(".whl") for p in py_mirror.requests)

    ref = f"{world.push_registry.host}/e2e/mirrored:{TAG}"
    *layers, config = _layers(world, ref, "amd64", world.root / "mirrored-oci")
    traces = [f"127.0.0.1:{rpm_mirror.port}".encode(),
              f"127.0.0.1:{py_mirror.port}".encode(), b"cannery-mirror"]
    for n, layer in enumerate(layers):
        for trace in traces:
            assert trace not in layer, f"layer {n} holds {trace!r}"
    names: list[str] = []
    for layer in layers[BASE_LAYERS:]:  # the build's layers, after the stand-in base's
        with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
            names += [m.name.rstrip("/") for m in tar.getmembers()]
    assert "usr/bin/standin-hello" in names  # installed from the mirror
    kept = [n for n in names if n.startswith(("etc/yum.repos.d", "etc/pip", "tmp/"))
            or n.endswith("pip.conf")]
    assert kept == [], kept
    image_config = json.loads(config)["config"]
    settings = json.dumps([image_config.get("Env"), image_config.get("Labels")]).encode()
    assert not [t for t in traces if t in settings]
    assert f"127.0.0.1:{rpm_mirror.port}".encode() in config  # the RUN text, in history


def test_dnf_layer_is_reproducible_from_the_same_lock(
    world: BuildWorld, oe_base: str, mirrored: Mirrored
) -> None:
    """A second build of the mirrored image from scratch with its lock, a second or more
    later, has byte-identical layers and the same config but for history times: dnf's history
    (time, command line) is kept out of the image, rpm takes the install times from
    SOURCE_DATE_EPOCH, caches, logs and rpm's WAL index are removed."""
    first = mirrored.catalog
    second = _catalog(world, oe_base, "mirrored-again", ["standin-hello"])
    second.write_text(first.read_text().replace('e2e/mirrored"', 'e2e/mirrored-again"'))
    assert "e2e/mirrored-again" in second.read_text()
    shutil.copyfile(first.parent / "cannery.lock", second.parent / "cannery.lock")
    time.sleep(1.1)  # another second on the clock: a wall-clock time would differ
    rc, two, err = build(world, second, "--force", "--frozen")
    assert rc == 0, err[-3000:]
    a = mirrored.summary["images"][0]["platforms"][0]["digest"]
    b = two["images"][0]["platforms"][0]["digest"]
    with httpx.Client(auth=(world.user, world.password), verify=_ssl(world)) as client:
        base = f"https://{world.push_registry.host}/v2/e2e"
        why = "" if a == b else describe_across(
            client, f"{base}/mirrored", a, f"{base}/mirrored-again", b)
        ma, mb = (client.get(f"{base}/{repo}/manifests/{d}", headers={"Accept": ACCEPT}).json()
                  for repo, d in (("mirrored", a), ("mirrored-again", b)))
        ca, cb = (client.get(f"{base}/{repo}/blobs/{m['config']['digest']}").json()
                  for repo, m in (("mirrored", ma), ("mirrored-again", mb)))
    # The claim is the layers' bytes (README: reproducible layers). The config must match too,
    # except the times of history entries: in two clean-clone CI runs (not in local runs)
    # buildah 1.28 stamped five metadata-only history entries with the build's wall clock.
    assert [x["digest"] for x in ma["layers"]] == [x["digest"] for x in mb["layers"]], why
    for c in (ca, cb):
        for h in c.get("history", []):
            h.pop("created", None)
    assert ca == cb, why


def test_a_python_mirror_that_serves_other_files_fails_the_build(
    world: BuildWorld, oe_base: str, mirrored: Mirrored
) -> None:
    """The lock's hashes decide what is installed, not the mirror: a mirror that serves a
    changed hello_cannery wheel (its index page's #sha256 changed to match, as a tampering
    mirror would) fails the locked install step."""
    bad = world.root / "bad-mirror"
    shutil.copytree(world.files_root / "wheels", bad / "wheels")
    wheel = next((bad / "wheels" / "files").glob("hello_cannery-*.whl"))
    data = wheel.read_bytes() + b"\0"
    wheel.write_bytes(data)
    page = bad / "wheels" / "simple" / "hello-cannery" / "index.html"
    page.write_text(re.sub(r"#sha256=[0-9a-f]{64}", "#sha256=" + hashlib.sha256(data).hexdigest(),
                           page.read_text()))
    server = HTTPSFileServer(bad, world.ca)
    try:
        catalog = _catalog(world, oe_base, "tampered", ["standin-hello"])
        catalog.write_text(mirrored.catalog.read_text()
                           .replace('e2e/mirrored"', 'e2e/tampered"')
                           .replace(f"{mirrored.py_mirror.url}/wheels/", f"{server.url}/wheels/"))
        shutil.copyfile(mirrored.catalog.parent / "cannery.lock", catalog.parent / "cannery.lock")
        rc, _summary, err = build(world, catalog, "--force", "--frozen")
        assert rc != 0
        assert any(p.endswith(wheel.name) for p in server.requests)  # it was asked, and refused
        log = "\n".join(p.read_text(errors="replace")
                        for p in (catalog.parent / "logs").rglob("*") if p.is_file())
        assert "DO NOT MATCH THE HASHES" in err + log, (err + log)[-3000:]
    finally:
        server.stop()
