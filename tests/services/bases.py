"""Two-arch stand-in base images, pushed to a test registry as one index.

The slow part (a Debian root filesystem per arch, made by ``scripts/test-bases.sh`` with
mmdebstrap) is cached between runs; each test session then only adds the session's test CA to
the system trust bundle (so ``curl``, ``git`` and Debian's ``pip`` inside builds trust the
test servers, as a company image trusts its internal CA), sets the config, and pushes.
"""

from __future__ import annotations

import os
import subprocess
import tarfile
from collections.abc import Sequence
from pathlib import Path

from tests.services.tlsca import LocalCA

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("CANNERY_TEST_CACHE", "/var/cache/cannery-tests"))
BUNDLE = "etc/ssl/certs/ca-certificates.crt"


def rootfs(arch: str, family: str = "debian") -> Path:
    """The cached root filesystem: Debian 12, or (``openeuler``) the openEuler stand-in."""
    path = CACHE / (f"rootfs-{arch}.tar" if family == "debian" else f"rootfs-{family}-{arch}.tar")
    if not path.is_file():
        subprocess.run(["bash", str(ROOT / "scripts" / "test-bases.sh"), str(CACHE)], check=True)
    return path


def _bah(*args: str) -> str:
    return subprocess.run(
        ["buildah", *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def cert_dir_for(ca: LocalCA, root: Path) -> Path:
    """A directory in the form ``--cert-dir`` takes (``ca.crt``) for buildah and skopeo."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "ca.crt").write_bytes(ca.ca_cert.read_bytes())
    return root


def push_base(
    registry_host: str, ca: LocalCA, work: Path, repo: str = "standin/cann",
    family: str = "debian", extra: Sequence[tuple[Path, str]] = (),
) -> str:
    """Push a two-arch base (linux/amd64, linux/arm64) as ``HOST/REPO:8.5.1-910b-<os>-py3.11``,
    with each ``(host path, image path)`` of ``extra`` added over the root filesystem."""
    work.mkdir(parents=True, exist_ok=True)
    os_tag = {"debian": "debian12", "openeuler": "openeuler24.03"}[family]
    ref = f"{registry_host}/{repo}:8.5.1-910b-{os_tag}-py3.11"
    certs = cert_dir_for(ca, work / "certs")
    manifest = f"localhost/cannery-test-base-{os.getpid()}"
    subprocess.run(["buildah", "manifest", "rm", manifest], capture_output=True, check=False)
    _bah("manifest", "create", manifest)
    for arch in ("amd64", "arm64"):
        tar = rootfs(arch, family)
        with tarfile.open(tar) as tf:
            member = tf.extractfile(f"./{BUNDLE}")
            assert member is not None
            bundle = member.read()
        (work / f"bundle-{arch}.crt").write_bytes(bundle + b"\n" + ca.ca_cert.read_bytes())
        ctr = _bah("from", "--arch", arch, "scratch")
        try:
            _bah("add", ctr, str(tar), "/")
            _bah("add", ctr, str(work / f"bundle-{arch}.crt"), f"/{BUNDLE}")
            for src, dest in extra:
                _bah("add", ctr, str(src), dest)
            _bah(
                "config",
                "--arch", arch,
                "--os", "linux",
                "--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "--env", "LANG=C.UTF-8",
                "--cmd", "/bin/bash",
                ctr,
            )  # fmt: skip
            image = _bah("commit", "--quiet", "--format", "docker", ctr)
        finally:
            subprocess.run(["buildah", "rm", ctr], capture_output=True, check=False)
        _bah("manifest", "add", manifest, image)
    _bah("manifest", "push", "--quiet", "--all", "--cert-dir", str(certs), manifest,
         f"docker://{ref}")
    subprocess.run(["buildah", "manifest", "rm", manifest], capture_output=True, check=False)
    return ref
