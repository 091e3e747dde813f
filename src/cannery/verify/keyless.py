"""Keyless (Sigstore) signature checks: the bundles ``actions/attest-build-provenance`` (the
generated workflow's keyless step) pushes with ``push-to-registry`` — OCI 1.1 referrers of each
platform manifest, artifact type ``application/vnd.dev.sigstore.bundle.v0.3+json`` — verified
offline by sigstore-python against a trusted root: the public-good Sigstore root that
sigstore-python ships (no network), or ``--trusted-root FILE`` (a Sigstore ``trusted_root.json``,
e.g. GitHub's own instance for private repositories).

Per platform, one check "keyless signature": at least one bundle whose certificate chains to
the root, carries an SCT, is logged in the transparency log (inclusion proof, checkpoint,
entry timestamp), names exactly ``--certificate-identity`` (a SAN) and
``--certificate-oidc-issuer``, whose DSSE envelope verifies, and whose in-toto statement is
about this platform manifest. A failure names the first reason (sigstore-python's message, e.g.
"Certificate's SANs do not match …"). A verified statement that is SLSA provenance is then
checked like a keyed one ("keyless provenance dependencies": exactly the lock's inputs).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cannery.errors import InputError, NetworkError
from cannery.oci.client import OCIClient
from cannery.oci.manifest import MalformedManifest, load_json
from cannery.oci.reference import Reference
from cannery.oci.referrers import Referrer, list_referrers
from cannery.plan import ImageSpec
from cannery.verify.attestations import (
    artifact_blob,
    provenance_predicate_checks,
    statement_is_about,
)
from cannery.verify.model import Check
from cannery.verify.registry import PlatformImage

BUNDLE_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
BUNDLE_TYPES = (BUNDLE_TYPE, "application/vnd.dev.sigstore.bundle+json;version=0.3")
MAX_BUNDLE = 16 << 20
MAX_BUNDLES = 32  # read per platform; a list naming more is not read further


@dataclass(frozen=True)
class KeylessPolicy:
    identity: str
    issuer: str
    trusted_root: Path | None = None


def load_verifier(policy: KeylessPolicy) -> tuple[Any, Any]:
    """sigstore-python's offline verifier and identity policy (imported here: an optional
    dependency, needed only when a keyless identity is given); read before any registry is,
    so a bad trusted root is exit 2 at once."""
    try:
        from sigstore.models import TrustedRoot
        from sigstore.verify import Verifier
        from sigstore.verify.policy import Identity
    except ImportError:
        raise InputError(
            "--certificate-identity: keyless verification needs sigstore "
            "(pip install 'cannery[keyless]')"
        ) from None
    if policy.trusted_root is None:
        verifier = Verifier.production(offline=True)  # the root sigstore-python ships
    else:
        try:
            root = TrustedRoot.from_file(str(policy.trusted_root))
        except (OSError, ValueError) as exc:
            raise InputError(f"{policy.trusted_root}: not a Sigstore trusted root: "
                             f"{str(exc).splitlines()[0][:200]}") from None
        verifier = Verifier(trusted_root=root)
    return verifier, Identity(identity=policy.identity, issuer=policy.issuer)


def _statement(
    verifier: Any, identity: Any, data: bytes, subject: str, where: str
) -> dict[str, object]:
    """The in-toto statement of a bundle that verifies and is about ``subject``."""
    from sigstore.errors import Error as SigstoreError
    from sigstore.models import Bundle

    try:
        bundle = Bundle.from_json(data)
        payload_type, payload = verifier.verify_dsse(bundle, identity)
    except (SigstoreError, ValueError) as exc:
        raise ValueError(f"{where}: {str(exc).splitlines()[0][:300]}") from None
    if payload_type != "application/vnd.in-toto+json":
        raise ValueError(f"{where}: payloadType {payload_type[:60]!r}, not an in-toto statement")
    stmt = load_json(payload)
    if not isinstance(stmt, dict) or not statement_is_about(stmt, subject):
        raise ValueError(f"{where}: the statement's subject is not {subject}")
    return stmt


def keyless_checks(
    client: OCIClient,
    ref: Reference,
    spec: ImageSpec,
    images: list[PlatformImage],
    policy: KeylessPolicy,
    loaded: tuple[Any, Any],
) -> list[Check]:
    """``loaded``: what :func:`load_verifier` gave for ``policy``."""
    verifier, identity = loaded
    repo = Reference(ref.host, ref.repository)
    checks: list[Check] = []
    for img in images:
        p, digest = img.platform, img.descriptor.digest
        try:
            found, _ = list_referrers(client, repo, digest)
        except (NetworkError, MalformedManifest) as exc:
            checks.append(Check("keyless signature", False, str(exc).splitlines()[0], p))
            continue
        bundles = [r for r in found if r.artifact_type in BUNDLE_TYPES][:MAX_BUNDLES]
        problems: list[str] = []
        verified: tuple[Referrer, dict[str, object]] | None = None
        for r in bundles:
            where = r.descriptor.digest[:19]
            try:
                data = artifact_blob(client, repo, r, digest, MAX_BUNDLE)
                stmt = _statement(verifier, identity, data, digest, where)
            except (ValueError, NetworkError, MalformedManifest) as exc:
                problems.append(str(exc).splitlines()[0])
                continue
            verified = (r, stmt)
            break
        if verified is None:
            why = problems[0] if problems else "no Sigstore bundle attached"
            checks.append(Check("keyless signature", False, why, p))
            continue
        r, stmt = verified
        checks.append(Check("keyless signature", True,
                            f"{r.descriptor.digest[:19]} by {policy.identity}", p))
        checks += provenance_predicate_checks(stmt, spec, p, prefix="keyless provenance")
    return checks
