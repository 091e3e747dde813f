"""`cannery render docs --from-registry` against a real registry (docker-registry on 127.0.0.1,
plain HTTP: loopback only): the overview gives the digest the tag names and each platform's
compressed size, as the registry holds them, and an image not pushed says so. Without the
flag, nothing of the registry appears."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from cannery.catalog.load import load_catalog
from cannery.lock import Lock, Resolvers, dump_lock, update_lock
from cannery.util.sizes import human_size
from tests.catalogs import tiny
from tests.services.registry import LocalRegistry, push_index


def _catalog(tmp_path: Path, registry: LocalRegistry) -> Path:
    path = tmp_path / "cannery.toml"
    text = tiny("fam", f"{registry.host}/fam/images", f"{registry.host}/base:1", "t1-{chip}")
    # a second image, never pushed
    text += '\n[images.two]\nbase = "b"\ntoolkit = "t"\nplatforms = ["linux/amd64"]\n'
    text += 'tag = "t2-{chip}"\n'
    path.write_text(text)
    cat = load_catalog(path).catalog
    lock = update_lock(cat, Lock(), Resolvers(
        base=lambda image: "sha256:" + "a" * 64, git=lambda url, ref: "b" * 40,
        url=lambda url: ("c" * 64, 1),
        python=lambda req: [f"cannery==0.1.0 --hash=sha256:{'d' * 64}"]))
    (tmp_path / "cannery.lock").write_text(dump_lock(lock))
    return path


def _docs(catalog: Path, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "cannery", "render", "docs", "--catalog", str(catalog), *args],
        capture_output=True, text=True, check=False, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    (overview,) = (catalog.parent / "overview").glob("*/OVERVIEW.md")
    return overview.read_text()


def test_digests_and_sizes_come_from_the_registry(
    tmp_path: Path, registry: LocalRegistry
) -> None:
    catalog = _catalog(tmp_path, registry)
    digest = push_index(registry.url, "fam/images", "t1-910b", "docs")
    plain = _docs(catalog)
    assert digest not in plain and "Compressed size" not in plain
    read = _docs(catalog, "--from-registry")
    assert f"docker pull {registry.host}/fam/images@{digest}   # t1-910b" in read
    assert f"| `t1-910b` | `{digest}` |" in read
    assert "| `t2-910b` | not pushed |" in read
    # each platform's config and layers, as the registry's manifests give them
    sizes = {}
    with httpx.Client() as client:
        index = client.get(f"{registry.url}/v2/fam/images/manifests/{digest}",
                           headers={"Accept": "application/vnd.oci.image.index.v1+json"}).json()
        for child in index["manifests"]:
            m = client.get(f"{registry.url}/v2/fam/images/manifests/{child['digest']}",
                           headers={"Accept": child["mediaType"]}).json()
            total = m["config"]["size"] + sum(layer["size"] for layer in m["layers"])
            sizes[child["platform"]["architecture"]] = total
    row = next(line for line in read.splitlines() if line.startswith("| `t1-910b` | 910b"))
    for arch, total in sizes.items():
        assert f"{arch}: {human_size(total)}" in row
    assert len(sizes) == 2  # both platforms were read
    # the check mode reads the registry again, and agrees
    proc = subprocess.run(
        [sys.executable, "-m", "cannery", "render", "docs", "--catalog", str(catalog),
         "--from-registry", "--check"], capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
