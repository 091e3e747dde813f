"""Pinned downloads, steps before the toolkit and an extra tag, end to end (real buildah,
amd64 only; the e2e world's HTTPS files server, TLS registry and stand-in CANN installer, see
test_build.py).

The image fetches a tool before the toolkit (placed executable on PATH) and an archive after
the installs (unpacked); a `run` step placed before the toolkit uses the tool and sees no
toolkit yet, one placed before the components sees the toolkit and not yet the archive, and
one after the installs reads the unpacked file. Then the archive's bytes
change on the server after locking: the next build fails at the check, naming the URL and
both digests, and no tag moves.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.buildenv import BuildWorld, cleanup_local_images, make_world, own_images
from tests.e2e.test_build import build, cannery, registry_get
from tests.services.tlsca import LocalCA

pytestmark = pytest.mark.e2e

TAG = "fetched"
IMAGES = """
[images.fetched]
base = "standin"
toolkit = "standin-852"
platforms = ["linux/amd64"]
tag = "fetched"
steps = [
  {{ run = "standin-tool > /opt/tool-ran && test ! -e {toolkit}", at = "before-toolkit" }},
  {{ run = "test -d {toolkit} && test ! -e /opt/data", at = "before-components" }},
  {{ run = "grep -q 'hello from the archive' /opt/data/hello.txt && test -d {toolkit}" }},
]

[[images.fetched.downloads]]
name = "tool"
url = "{files}/dl/standin-tool-{{uname_arch}}"
path = "/usr/local/bin/standin-tool"
executable = true
at = "before-toolkit"

[[images.fetched.downloads]]
name = "data"
url = "{files}/dl/data.tar.gz"
path = "/opt/data"
unpack = true
"""


def _archive(text: str) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        data = text.encode()
        info = tarfile.TarInfo("hello.txt")
        info.size, info.mtime = len(data), 0
        tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, test_ca: LocalCA) -> Iterator[BuildWorld]:
    w = make_world(tmp_path_factory.mktemp("world"), test_ca)
    dl = w.files_root / "dl"
    dl.mkdir()
    for uname in ("x86_64", "aarch64"):
        (dl / f"standin-tool-{uname}").write_text(f"#!/bin/sh\necho standin tool {uname}\n")
    (dl / "data.tar.gz").write_bytes(_archive("hello from the archive\n"))
    yield w
    w.stop()
    cleanup_local_images()


@pytest.fixture(scope="module")
def catalog(world: BuildWorld) -> Path:
    path = world.catalog(world.root / "fetched", repo="fetched")
    images = IMAGES.format(files=world.files.url, toolkit="/usr/local/Ascend/cann-8.5.2")
    path.write_text(own_images(path.read_text(), images))
    return path


def test_downloads_land_where_the_steps_placed_around_the_toolkit_find_them(
    world: BuildWorld, catalog: Path
) -> None:
    rc, _, err = build(world, catalog)
    assert rc == 0, err[-3000:]
    lock = (catalog.parent / "cannery.lock").read_text()
    served = (world.files_root / "dl" / "data.tar.gz").read_bytes()
    assert hashlib.sha256(served).hexdigest() in lock  # locked on first use
    assert f"{world.files.url}/dl/standin-tool-x86_64" in lock
    proc = cannery(world, "verify", f"{world.push_registry.host}/e2e/fetched:{TAG}",
                   "--catalog", str(catalog), "--no-runtime")
    assert proc.returncode == 0, proc.stdout[-2000:]


def test_an_extra_tag_names_the_same_index_and_moves_nothing_else(
    world: BuildWorld, catalog: Path
) -> None:
    """`--extra-tag` (a manual run's input `tags`): nothing rebuilt, the tag added to the
    index its tag names."""
    rc, _, err = build(world, catalog)  # (a no-op after the first test; this file alone: built)
    assert rc == 0, err[-3000:]
    rc, summary, err = build(world, catalog, "--extra-tag", "nightly-1")
    assert rc == 0, err[-3000:]
    (image,) = summary["images"]
    assert image["tags_moved"] == ["nightly-1"], image
    first = registry_get(world, "fetched", TAG)
    extra = registry_get(world, "fetched", "nightly-1")
    assert extra.status_code == 200
    assert extra.headers["docker-content-digest"] == first.headers["docker-content-digest"]


def test_a_download_changed_after_locking_fails_naming_url_and_digests(
    world: BuildWorld, catalog: Path
) -> None:
    archive = world.files_root / "dl" / "data.tar.gz"
    good = archive.read_bytes()
    bad = _archive("not what was locked\n")
    archive.write_bytes(bad)
    tampered = catalog.with_name("tampered.toml")
    tampered.write_text(catalog.read_text().replace('tag = "fetched"', 'tag = "tampered"'))
    (catalog.parent / "tampered.lock").write_bytes((catalog.parent / "cannery.lock").read_bytes())
    try:
        rc, summary, err = build(world, tampered, "--lock", str(catalog.parent / "tampered.lock"),
                                 "--frozen", "--force")
    finally:
        archive.write_bytes(good)
    assert rc == 1, err[-3000:]
    (platform,) = summary["images"][0]["platforms"]
    log = Path(platform["log"]).read_text()
    want = (f"cannery: {world.files.url}/dl/data.tar.gz: sha256 "
            f"{hashlib.sha256(bad).hexdigest()}, but cannery.lock has "
            f"{hashlib.sha256(good).hexdigest()}")
    assert want in log
    assert summary["images"][0]["tags_moved"] == []
    assert registry_get(world, "fetched", "tampered").status_code == 404
