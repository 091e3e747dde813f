"""Attestation checks: what is attached to each platform manifest (and the index) as OCI 1.1
referrers, read through the referrers API or the tag-schema fallback.

- provenance: every one attached must be about this manifest (artifact ``subject`` and the
  statement's subject), name this image and platform, and list exactly the pinned inputs the
  catalog and lock give this platform (``resolvedDependencies``); with ``--key``, be signed by it;
- SBOM: about this manifest, signed (with ``--key``), listing every locked Python pin at its
  version, and no Python distribution the lock does not name installed from the lock's step on
  (``attest.sbom``: SPDX holds no wheel hashes, so names and versions are compared);
- signature (with ``--key``): at least one, by that key, of this manifest; and of the index.

With ``require`` (``--require-attestations``), a platform with no provenance or no SBOM fails;
with keys, a missing signature fails. Otherwise absence is not reported. Each listed artifact is
read once, and at most ``MAX_PER_TYPE`` of a type per subject (more is a failed check).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from cannery.attest.attach import (
    KEYID_ANNOTATION,
    PROVENANCE_TYPE,
    SBOM_TYPE,
    SIGNATURE_PREDICATE,
    SIGNATURE_TYPE,
    SPDX_PREDICATE,
)
from cannery.attest.provenance import SLSA_PROVENANCE, resolved_dependencies
from cannery.attest.sbom import lock_mismatches, unlocked_distributions
from cannery.attest.sign import (
    PAYLOAD_TYPE,
    BadSignature,
    keyid,
    open_envelope,
    verify_envelope,
)
from cannery.errors import NetworkError
from cannery.oci.client import OCIClient
from cannery.oci.manifest import MalformedManifest, load_json, parse_index
from cannery.oci.reference import Reference
from cannery.oci.referrers import Referrer, list_referrers, parse_artifact
from cannery.plan import ImageSpec
from cannery.verify.model import Check
from cannery.verify.registry import PlatformImage

if TYPE_CHECKING:
    from cannery.attest.sign import PublicKey  # cryptography: imported where a key is used

MAX_ENVELOPE = 256 << 20  # read into memory to verify: an SBOM of a large image fits
# Artifacts of one type read per subject: a build attaches one (a signature per key); a list
# naming thousands (4 MiB of entries) would otherwise mean thousands of envelope downloads.
MAX_PER_TYPE = 32


class _Bad(Exception):
    """An attestation that cannot be read; the message says why."""


def artifact_blob(
    client: OCIClient, repo: Reference, r: Referrer, subject: str, cap: int
) -> bytes:
    """The one layer of the artifact ``r`` (an envelope or a bundle), read whole: the artifact
    must be about ``subject`` and its layer at most ``cap`` bytes (ValueError otherwise). An
    SBOM can be larger than a config, so the blob is streamed to disk, digest-checked, then
    read."""
    where = f"{r.descriptor.digest[:19]}"
    body, _ = client.get_manifest(repo.with_digest(r.descriptor.digest))
    _, about, layers, _ = parse_artifact(body, where)
    if about.digest != subject:
        raise ValueError(f"{where}: artifact subject is {about.digest}")
    if len(layers) != 1:
        raise ValueError(f"{where}: {len(layers)} layers, expected one")
    if layers[0].size > cap:
        raise ValueError(f"{where}: a {layers[0].size}-byte layer (the limit is {cap})")
    with tempfile.TemporaryDirectory() as tmp:
        client.fetch_blob(repo, layers[0].digest, Path(tmp) / "blob", layers[0].size)
        return (Path(tmp) / "blob").read_bytes()


def _read(
    client: OCIClient, repo: Reference, r: Referrer, subject: str, keys: list[PublicKey]
) -> tuple[dict[str, object], str | None]:
    """(statement, why its signature failed or None) of one DSSE artifact about ``subject``."""
    where = f"{r.descriptor.digest[:19]}"
    try:
        data = artifact_blob(client, repo, r, subject, MAX_ENVELOPE)
    except ValueError as exc:  # MalformedManifest is one
        raise _Bad(str(exc)) from None
    try:
        payload_type, payload, _ = open_envelope(data)
    except BadSignature as exc:
        raise _Bad(f"{where}: {exc}") from None
    # The signature covers the payload type too (DSSE's PAE): one made for another type of
    # payload is not a signature of an in-toto statement, whatever the payload says.
    if payload_type != PAYLOAD_TYPE:
        raise _Bad(f"{where}: envelope payloadType {payload_type[:60]!r}, not {PAYLOAD_TYPE}")
    bad_sig = None
    try:
        if keys:
            verify_envelope(data, keys)
    except BadSignature as exc:
        bad_sig = f"{where}: {exc}"
    try:
        stmt = load_json(payload)
    except ValueError:
        raise _Bad(f"{where}: payload is not JSON") from None
    if not isinstance(stmt, dict):
        raise _Bad(f"{where}: payload is not an in-toto statement")
    if not statement_is_about(stmt, subject):
        raise _Bad(f"{where}: the statement's subject is not {subject}")
    return stmt, bad_sig


def statement_is_about(stmt: dict[str, object], digest: str) -> bool:
    """Whether an in-toto statement names ``digest`` among its subjects."""
    algo, _, hexd = digest.partition(":")
    subjects = stmt.get("subject") or []
    return isinstance(subjects, list) and any(
        isinstance(s, dict) and isinstance(s.get("digest"), dict) and s["digest"].get(algo) == hexd
        for s in subjects
    )


def _deps_diff(have: object, want: list[dict[str, object]]) -> str:
    if not isinstance(have, list):
        return "resolvedDependencies missing"
    h = {json.dumps(d, sort_keys=True) for d in have}
    w = {json.dumps(d, sort_keys=True) for d in want}
    if h == w:
        return ""
    extra, missing = sorted(h - w), sorted(w - h)
    parts = []
    if missing:
        parts.append(f"lock has {missing[0]} which provenance lacks")
    if extra:
        parts.append(f"provenance has {extra[0]} which the lock does not")
    n = len(extra) + len(missing)
    return "; ".join(parts) + (f" ({n} differences)" if n > 1 else "")


def _provenance(
    client: OCIClient,
    repo: Reference,
    spec: ImageSpec,
    img: PlatformImage,
    found: list[Referrer],
    keys: list[PublicKey],
) -> list[Check]:
    out: list[Check] = []
    p, digest = img.platform, img.descriptor.digest
    want = resolved_dependencies(spec, p)
    for r in found:
        try:
            stmt, bad_sig = _read(client, repo, r, digest, keys)
        except _Bad as exc:
            out.append(Check("provenance subject", False, str(exc), p))
            continue
        out.append(Check("provenance subject", True, r.descriptor.digest[:19], p))
        if keys:
            out.append(Check("provenance signature", bad_sig is None, bad_sig or "", p))
        out += provenance_predicate_checks(stmt, spec, p, want)
    return out


def provenance_predicate_checks(
    stmt: dict[str, object],
    spec: ImageSpec,
    platform: str,
    want: list[dict[str, object]] | None = None,
    prefix: str = "provenance",
) -> list[Check]:
    """A SLSA v1 provenance statement names this image and platform and resolves exactly the
    lock's inputs for it (``want``: ``resolved_dependencies``, computed when not given)."""
    p = platform
    if want is None:
        want = resolved_dependencies(spec, p)
    pred = stmt.get("predicate")
    bd = pred.get("buildDefinition") if isinstance(pred, dict) else None
    if stmt.get("predicateType") != SLSA_PROVENANCE or not isinstance(bd, dict):
        why = f"predicateType {stmt.get('predicateType')!r}, not SLSA v1 provenance"
        return [Check(f"{prefix} dependencies", False, why, p)]
    ext = bd.get("externalParameters") or {}
    named = (ext.get("image"), ext.get("platform")) if isinstance(ext, dict) else None
    ok = named == (spec.name, p)
    diff = _deps_diff(bd.get("resolvedDependencies"), want)
    return [
        Check(f"{prefix} parameters", ok, "" if ok else f"names {named}", p),
        Check(f"{prefix} dependencies", not diff, diff or f"{len(want)} entries", p),
    ]


def _sboms(
    client: OCIClient,
    repo: Reference,
    spec: ImageSpec,
    img: PlatformImage,
    found: list[Referrer],
    keys: list[PublicKey],
) -> list[Check]:
    out: list[Check] = []
    p, digest = img.platform, img.descriptor.digest
    for r in found:
        try:
            stmt, bad_sig = _read(client, repo, r, digest, keys)
        except _Bad as exc:
            out.append(Check("sbom subject", False, str(exc), p))
            continue
        if keys:
            out.append(Check("sbom signature", bad_sig is None, bad_sig or "", p))
        doc = stmt.get("predicate")
        if stmt.get("predicateType") != SPDX_PREDICATE or not isinstance(doc, dict):
            out.append(Check("sbom python pins", False, "not an SPDX 2.3 statement", p))
            continue
        missing = lock_mismatches(spec, p, doc)
        out.append(Check("sbom python pins", not missing, _some(missing), p))
        rootfs = img.config.get("rootfs")
        diff_ids = rootfs.get("diff_ids") if isinstance(rootfs, dict) else None
        extra, compared = unlocked_distributions(
            spec, p, doc, [str(d) for d in diff_ids] if isinstance(diff_ids, list) else [])
        out.append(Check("sbom unlocked python", not extra, _some(extra) or compared, p))
    return out


def _some(problems: list[str]) -> str:
    return "; ".join(problems[:3]) + (f" (+{len(problems) - 3})" if len(problems) > 3 else "")


def _signed(
    client: OCIClient,
    repo: Reference,
    subject: str,
    found: list[Referrer],
    keys: list[PublicKey],
    name: str,
    platform: str | None,
) -> Check:
    """At least one signature artifact of ``subject`` that verifies with one of ``keys``."""
    ids = {keyid(k) for k in keys}
    problems = []
    for r in found:
        try:
            stmt, bad_sig = _read(client, repo, r, subject, keys)
        except _Bad as exc:
            problems.append(str(exc))
            continue
        if bad_sig is None and stmt.get("predicateType") == SIGNATURE_PREDICATE:
            return Check(name, True, r.descriptor.digest[:19], platform)
        problems.append(bad_sig or "not a signature statement")
    if not found:
        return Check(name, False, "no signature attached", platform)
    others = {(r.descriptor.annotations or {}).get(KEYID_ANNOTATION, "?") for r in found}
    if not ids & others:  # full key ids compared; shortened only for the message
        shown = ", ".join(sorted(k[:12] for k in others))
        return Check(name, False, f"signed only by other keys ({shown})", platform)
    return Check(name, False, problems[0], platform)


def _by_type(
    found: list[Referrer], subject: str, platform: str | None, checks: list[Check]
) -> dict[str, list[Referrer]]:
    """The referrers of each artifact type, each artifact once, at most MAX_PER_TYPE of a type
    (more is a failed check: those past the limit are not read)."""
    by_type: dict[str, list[Referrer]] = {}
    seen: set[str] = set()
    for r in found:
        if r.descriptor.digest not in seen:
            seen.add(r.descriptor.digest)
            by_type.setdefault(r.artifact_type, []).append(r)
    for kind, entries in by_type.items():
        if len(entries) > MAX_PER_TYPE:
            checks.append(Check("attestations readable", False,
                                f"{len(entries)} {kind[:60]} artifacts attached to "
                                f"{subject[:19]}; verify reads at most {MAX_PER_TYPE}", platform))
            del entries[MAX_PER_TYPE:]
    return by_type


def attestation_checks(
    client: OCIClient,
    ref: Reference,
    spec: ImageSpec,
    images: list[PlatformImage],
    keys: list[PublicKey],
    require: bool,
) -> list[Check]:
    repo = Reference(ref.host, ref.repository)
    checks: list[Check] = []
    try:
        for img in images:
            p, digest = img.platform, img.descriptor.digest
            found, source = list_referrers(client, repo, digest)
            by_type = _by_type(found, digest, p, checks)
            provs, sboms = by_type.get(PROVENANCE_TYPE, []), by_type.get(SBOM_TYPE, [])
            if require or provs:
                via = "referrers API" if source == "api" else "fallback tag"
                ok = bool(provs)
                detail = f"{len(provs)} via {via}" if ok else f"none attached ({via})"
                checks.append(Check("provenance present", ok, detail, p))
            checks += _provenance(client, repo, spec, img, provs, keys)
            if require:
                ok = bool(sboms)
                checks.append(Check("sbom present", ok, "" if ok else "none attached", p))
            checks += _sboms(client, repo, spec, img, sboms, keys)
            if keys:
                sigs = by_type.get(SIGNATURE_TYPE, [])
                checks.append(_signed(client, repo, digest, sigs, keys, "signature", p))
        if keys:
            index = client.head_manifest(ref)
            if index is not None:
                found, _ = list_referrers(client, repo, index.digest, SIGNATURE_TYPE)
                sigs = _by_type(found, index.digest, None, checks).get(SIGNATURE_TYPE, [])
                checks.append(_signed(client, repo, index.digest, sigs, keys, "index signature",
                                      None))
    except (NetworkError, MalformedManifest) as exc:
        checks.append(Check("attestations readable", False, str(exc).splitlines()[0]))
    return checks


def index_entries_check(body: bytes) -> Check:
    """The index lists platform images only: no ``unknown/unknown`` attestation entries (as
    BuildKit adds), since cannery attaches its attestations as referrers. Read strictly: a
    malformed index is a failed check naming the field, never a crash."""
    try:
        entries, _ = parse_index(body, "index")
    except MalformedManifest as exc:
        return Check("index holds images only", False, str(exc))
    odd = [
        e.digest[:19]
        for e in entries
        if (e.platform or {}).get("os") == "unknown"
        or "vnd.docker.reference.type" in (e.annotations or {})
    ]
    return Check("index holds images only", not odd, ", ".join(odd))
