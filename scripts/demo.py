"""The local demo: build the stand-in image for linux/amd64 and linux/arm64, publish it to
every registry, verify it, and show its size layer by layer.

``demo.sh [REGISTRY/REPO [MIRROR/REPO[#docker]…]]``: the first is where it is built into, the
others are mirrors (``#docker``: a registry that needs Docker media types, such as SWR).

It signs with a key of its own (made once, in ``keys/``): provenance, SBOM (where syft is
installed) and signatures go to the registry as OCI referrers, and verify checks them.

Everything it needs runs on this machine, in ``.cannery/demo/`` (kept between runs): a test CA,
a TLS registry with the stand-in base image, one with htpasswd auth to push to (unless a
REGISTRY/REPO is given), the stand-in CANN installers and a wheel index over HTTPS, and a git
host with the compiled component. With no arguments it also starts two mirrors: a second TLS
registry, and a registry behind the SWR stand-in (it refuses OCI media types, so the catalog
gives it ``media_types = "docker"``). The second run finds every input unchanged and writes
nothing anywhere.
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
from tests.services.faultproxy import SWRStandIn  # noqa: E402
from tests.services.registry import LocalRegistry  # noqa: E402
from tests.services.tlsca import LocalCA, make_ca  # noqa: E402

STATE = ROOT / ".cannery" / "demo"
# Fixed ports: the catalog names the servers by URL, and a moved URL would be a new input.
# CANNERY_DEMO_PORT moves all of them (another demo on this machine holds the default ones).
BASE = int(os.environ.get("CANNERY_DEMO_PORT", "15443"))
PORTS = {"registry": BASE, "push": BASE + 1, "files": BASE + 2, "git": BASE + 3}
# The TLS mirror; the registry behind the SWR stand-in; the stand-in.
MIRROR_PORTS = (BASE + 4, BASE + 5, BASE + 6)


def _mirrors(catalog: Path, mirrors: list[tuple[str, str]]) -> None:
    """Add the mirrors to the demo catalog: a registries table each, and catalog.mirrors."""
    text = catalog.read_text()
    names = [f"mirror{n + 1}" for n in range(len(mirrors))]
    tables = "".join(
        f'[registries.{name}]\nrepository = "{repo}"\nmedia_types = "{types}"\n\n'
        for name, (repo, types) in zip(names, mirrors, strict=True)
    )
    listed = json.dumps(names)
    text = text.replace('registry = "local"\n', f'registry = "local"\nmirrors = {listed}\n', 1)
    text = text.replace("[bases.", tables + "[bases.", 1)
    catalog.write_text(text)


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
    given = [
        (arg.partition("#")[0], "docker" if arg.endswith("#docker") else "oci")
        for arg in sys.argv[2:]
    ]
    STATE.mkdir(parents=True, exist_ok=True)
    ca_dir = STATE / "ca"
    ca = (
        LocalCA(ca_dir / "ca.pem", ca_dir / "server.pem", ca_dir / "server.key")
        if (ca_dir / "ca.pem").is_file()
        else make_ca(ca_dir)
    )
    print(f"demo: servers on 127.0.0.1, state in {STATE}", flush=True)
    world = make_world(STATE, ca, PORTS, keep=True)
    started: list[LocalRegistry | SWRStandIn] = []
    try:
        catalog = world.catalog(STATE / "catalog")
        env = world.env()
        mirrors = given
        if target is None:
            # Two local mirrors: a TLS registry, and one behind the SWR stand-in.
            for name, port in (("mirror1", MIRROR_PORTS[0]), ("mirror2", MIRROR_PORTS[1])):
                (STATE / name).mkdir(exist_ok=True)
                tls = (ca.server_cert, ca.server_key) if name == "mirror1" else None
                started.append(LocalRegistry(STATE / name, tls=tls, port=port))
            started.append(SWRStandIn(MIRROR_PORTS[1], port=MIRROR_PORTS[2]))
            mirrors = [(f"{started[0].host}/demo/standin", "oci"),
                       (f"{started[2].host}/demo/standin", "docker")]
        # One registry's credentials in its own variables: cannery sends them to it alone.
        env["CANNERY_REGISTRY_LOCAL_USER"] = env.pop("CANNERY_REGISTRY_USER")
        env["CANNERY_REGISTRY_LOCAL_PASSWORD"] = env.pop("CANNERY_REGISTRY_PASSWORD")
        if mirrors:
            _mirrors(catalog, mirrors)
        if target:
            # Push where the user said, with their own credentials (Docker config or env).
            text = catalog.read_text()
            text = text.replace(f'repository = "{world.push_registry.host}/e2e/standin"',
                                f'repository = "{target}"')
            catalog.write_text(text)
            env.pop("CANNERY_REGISTRY_LOCAL_USER")
            env.pop("CANNERY_REGISTRY_LOCAL_PASSWORD")
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
        for reg in image["registries"]:
            moved = ", ".join(reg["tags_moved"]) or "none"
            unchanged = ", ".join(reg["tags_unchanged"])
            print(f"{reg['name']:8} {reg['media_types']:6} {reg['repository']}@"
                  f"{reg['index_digest']}\n{'':16}tags moved: {moved}"
                  + (f"; already on this index: {unchanged}" if unchanged else ""))
            if reg["copied"]:
                c = reg["copied"]
                print(f"{'':16}blobs {c['blobs_copied']} copied, {c['blobs_mounted']} mounted, "
                      f"{c['blobs_present']} already there; manifests {c['manifests_written']} "
                      "written")
        print(flush=True)
        verify = subprocess.run(
            [*cannery, "verify", f"{repo}:{tag}", "--catalog", str(catalog), "--key", str(pub),
             *(["--require-attestations"] if sbom else []), "--all-registries"], env=env,
            check=False,
        )
        print(flush=True)
        # How big, and why: each layer with the catalog step that made it, and the budget.
        size = subprocess.run([*cannery, "size", f"{repo}:{tag}", "--catalog", str(catalog)],
                              env=env, check=False)
        return verify.returncode or size.returncode
    finally:
        for server in reversed(started):
            server.stop()
        world.stop()


if __name__ == "__main__":
    os.environ.setdefault("BUILDAH_ISOLATION", "chroot")
    sys.exit(main())
