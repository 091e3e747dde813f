"""The local demo: build the stand-in image for linux/amd64 and linux/arm64, push it, verify it.
It signs with a key of its own (made once, in ``keys/``): provenance, SBOM (where syft is
installed) and signatures go to the registry as OCI referrers, and verify checks them.

Everything it needs runs on this machine, in ``.cannery/demo/`` (kept between runs): a test CA,
a TLS registry with the stand-in base image, one with htpasswd auth to push to (unless a
REGISTRY/REPO is given), the stand-in CANN installers and a wheel index over HTTPS, and a git
host with the compiled component. The second run finds every input unchanged and moves nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.buildenv import make_world  # noqa: E402
from tests.services.tlsca import LocalCA, make_ca  # noqa: E402

STATE = ROOT / ".cannery" / "demo"
# Fixed ports: the catalog names the servers by URL, and a moved URL would be a new input.
PORTS = {"registry": 15443, "push": 15444, "files": 15445, "git": 15446}


def signing_key(where: Path) -> tuple[Path, Path]:
    """The demo's own Ed25519 key pair (made once, private key readable by this user only)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    key, pub = where / "signing.pem", where / "signing.pub"
    if not key.is_file():
        where.mkdir(parents=True, exist_ok=True)
        private = ed25519.Ed25519PrivateKey.generate()
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(private.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
        pub.write_bytes(private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        print(f"demo: made a signing key {key} (public: {pub})", flush=True)
    return key, pub


def main() -> int:
    target = sys.argv[1] if len(sys.argv) > 1 else None
    STATE.mkdir(parents=True, exist_ok=True)
    ca_dir = STATE / "ca"
    ca = (
        LocalCA(ca_dir / "ca.pem", ca_dir / "server.pem", ca_dir / "server.key")
        if (ca_dir / "ca.pem").is_file()
        else make_ca(ca_dir)
    )
    print(f"demo: servers on 127.0.0.1, state in {STATE}", flush=True)
    world = make_world(STATE, ca, PORTS, keep=True)
    try:
        catalog = world.catalog(STATE / "catalog")
        env = world.env()
        if target:
            # Push where the user said, with their own credentials (Docker config or env).
            text = catalog.read_text()
            text = text.replace(f'repository = "{world.push_registry.host}/e2e/standin"',
                                f'repository = "{target}"')
            catalog.write_text(text)
            env.pop("CANNERY_REGISTRY_USER")
            env.pop("CANNERY_REGISTRY_PASSWORD")
        cannery = [sys.executable, "-m", "cannery"]
        key, pub = signing_key(STATE / "keys")
        # Provenance and signatures always; an SBOM where syft is installed (x86_64 hosts).
        sbom = shutil.which("syft") or (Path(sys.executable).parent / "syft").exists()
        attest = ["--sign-key", str(key), "--sbom" if sbom else "--no-sbom"]
        build = subprocess.run(
            [*cannery, "build", "--catalog", str(catalog), "--push", "--network", "host",
             "--log-dir", str(STATE / "logs"), "--json", *attest],
            env=env, stdout=subprocess.PIPE, text=True, check=False,
        )
        if build.returncode != 0:
            print(build.stdout)
            return build.returncode
        image = json.loads(build.stdout)["images"][0]
        repo = image["repository"]
        tag = image["tags"][0]
        print(f"\nindex   {repo}@{image['index_digest']}")
        for p in image["platforms"]:
            state = f"skipped: {p['skipped']}" if p["skipped"] else f"built in {p['seconds']:.0f}s"
            print(f"  {p['platform']:12} {p['digest']}  ({state})")
        moved = ", ".join(image["tags_moved"]) or "none"
        unchanged = ", ".join(image["tags_unchanged"])
        print(f"tags moved: {moved}" + (f"; already on this index: {unchanged}" if unchanged
                                         else "") + "\n", flush=True)
        verify = subprocess.run(
            [*cannery, "verify", f"{repo}:{tag}", "--catalog", str(catalog), "--key", str(pub),
             *(["--require-attestations"] if sbom else [])], env=env,
            check=False,
        )
        return verify.returncode
    finally:
        world.stop()


if __name__ == "__main__":
    os.environ.setdefault("BUILDAH_ISOLATION", "chroot")
    sys.exit(main())
