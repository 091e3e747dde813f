"""A download whose URL carries its credential (a presigned object-store URL), given as a build
secret, end to end (real buildah, amd64 only; the e2e world's HTTPS files server and TLS
registry, see test_build.py).

The URL lives only in the environment variable the catalog names (`url_secret`): `cannery
lock` reads it to pin the sha256, the build hands it to the one RUN that fetches the file as
a build secret (`--secret id=NAME,src=FILE`, a 0600 file; never an argv, never the
Dockerfile). The file lands and is checked; the token is nowhere in the catalog, the lock, the
rendered Dockerfile, the build's output, the image's config and history, or its layers.
Without the variable, the build stops before anything is built, naming it.
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.buildenv import BuildWorld, cleanup_local_images, make_world, own_images
from tests.e2e.test_build import build, cannery, registry_get
from tests.e2e.test_build_downloads import _archive
from tests.services.tlsca import LocalCA

pytestmark = pytest.mark.e2e

TOKEN = "tok3n-that-must-not-leak"
IMAGES = """
[images.secretive]
base = "standin"
platforms = ["linux/amd64"]
tag = "secretive"
steps = [{ run = "grep -q 'hello from the bucket' /opt/data/hello.txt" }]

[[images.secretive.downloads]]
name = "data"
url_secret = "DATA_URL"
path = "/opt/data"
unpack = true
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, test_ca: LocalCA) -> Iterator[BuildWorld]:
    w = make_world(tmp_path_factory.mktemp("world"), test_ca)
    (w.files_root / "bucket").mkdir()
    (w.files_root / "bucket" / "data.tar.gz").write_bytes(_archive("hello from the bucket\n"))
    yield w
    w.stop()
    cleanup_local_images()


def _url(world: BuildWorld) -> str:
    return (f"{world.files.url}/bucket/data.tar.gz?X-Amz-Credential=AKIA%2F1&"
            f"X-Amz-Signature={TOKEN}")


def _blobs(world: BuildWorld, tag: str) -> list[bytes]:
    """The config and every layer (decompressed) of ``tag``'s amd64 image."""
    auth, ca = (world.user, world.password), str(world.ca.ca_cert)
    index = registry_get(world, "secretive", tag).json()
    manifest = registry_get(world, "secretive", index["manifests"][0]["digest"]).json()
    out = []
    for desc in [manifest["config"], *manifest["layers"]]:
        resp = httpx.get(
            f"https://{world.push_registry.host}/v2/e2e/secretive/blobs/{desc['digest']}",
            auth=auth, verify=ca, follow_redirects=True)
        data = resp.content
        out.append(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    return out


def test_a_secret_url_is_locked_fetched_for_one_run_and_kept_out_of_everything(
    world: BuildWorld,
) -> None:
    catalog = world.catalog(world.root / "secretive", repo="secretive")
    catalog.write_text(own_images(catalog.read_text(), IMAGES))
    env = world.env(DATA_URL=_url(world))
    world.files.requests.clear()
    rc, summary, err = build(world, catalog, env=env)
    assert rc == 0, err[-4000:]
    assert any(TOKEN in p for p in world.files.requests)  # the build fetched the secret URL
    lock = (catalog.parent / "cannery.lock").read_text()
    served = (world.files_root / "bucket" / "data.tar.gz").read_bytes()
    assert '[urls."secret:DATA_URL"]' in lock
    assert hashlib.sha256(served).hexdigest() in lock
    out = world.root / "rendered"
    proc = cannery(world, "render", "dockerfile", "--catalog", str(catalog), "-o", str(out),
                   env=env)
    assert proc.returncode == 0, proc.stderr
    rendered = "".join(p.read_text() for p in out.glob("*.Dockerfile"))
    texts = {"lock": lock, "catalog": catalog.read_text(), "build output": err,
             "summary": str(summary), "dockerfile": rendered + proc.stdout + proc.stderr}
    assert "--mount=type=secret,id=DATA_URL,required=true" in texts["dockerfile"]
    for blob in _blobs(world, "secretive"):
        assert TOKEN.encode() not in blob and b"X-Amz-Signature" not in blob
    for what, text in texts.items():
        assert TOKEN not in text, what
    logs = "".join(p.read_text(errors="replace") for p in (catalog.parent / "logs").rglob("*")
                   if p.is_file())
    assert TOKEN not in logs


def test_without_the_variable_the_build_stops_naming_it(world: BuildWorld) -> None:
    catalog = world.catalog(world.root / "secretive2", repo="secretive")
    catalog.write_text(own_images(catalog.read_text(), IMAGES))
    (catalog.parent / "cannery.lock").write_text(
        (world.root / "secretive" / "cannery.lock").read_text())
    env = world.env()
    env.pop("DATA_URL", None)
    rc, _, err = build(world, catalog, "--locked", env=env)
    assert rc == 2
    assert err.strip().splitlines()[-1] == (
        "cannery: error: secretive: build secret DATA_URL is not set: export DATA_URL as the "
        "download's URL")


def test_bytes_that_changed_behind_the_secret_url_fail_without_showing_it(
    world: BuildWorld,
) -> None:
    catalog = world.root / "secretive" / "catalog.toml"
    (world.files_root / "bucket" / "data.tar.gz").write_bytes(_archive("tampered\n"))
    rc, _, err = build(world, catalog, "--force", env=world.env(DATA_URL=_url(world)))
    assert rc == 1, err[-3000:]
    assert "cannery: the URL in build secret DATA_URL: sha256 " in err
    assert TOKEN not in err
