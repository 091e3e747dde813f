"""What a build attaches, as OCI 1.1 referrers, before its tags move.

Per platform manifest: a provenance (a DSSE envelope of an in-toto SLSA v1 statement), an SBOM
(when a scanner is given) and, with a signing key, a signature; per index, with a key, a
signature of the index. Each is a DSSE envelope of an in-toto statement whose subject is that
manifest (unsigned when no key is given). An artifact already attached (same type and, for
signatures, same key) is not attached again, so a no-op build adds nothing. "Already attached"
is read from the artifact manifest itself (its ``subject``, type and key id), not from the
list's entry: an entry is only a claim (a fallback tag anyone with push rights can write). One
found attached without its keep tag (attached by a cannery before those) gets it, so the next
"delete untagged" GC keeps it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cannery.attest.provenance import BuildContext, provenance
from cannery.attest.sign import ENVELOPE_MEDIA_TYPE, Signer, envelope
from cannery.builder.jobs import INPUTS_LABEL, ImageJob
from cannery.errors import CommandError
from cannery.oci.client import NotFound, OCIClient
from cannery.oci.manifest import Descriptor, MalformedManifest, load_json, platform_string
from cannery.oci.reference import Reference
from cannery.oci.referrers import (
    Referrer,
    attach,
    keep,
    keep_tag,
    list_referrers,
    parse_artifact,
)
from cannery.util.fs import atomic_write

PROVENANCE_TYPE = "application/vnd.in-toto+json"
SBOM_TYPE = "application/spdx+json"
SIGNATURE_TYPE = "application/vnd.cannery.signature.v1+json"
SIGNATURE_PREDICATE = "urn:cannery:predicate:signature:v1"
SPDX_PREDICATE = "https://spdx.dev/Document/v2.3"
KEYID_ANNOTATION = "io.cannery.keyid"
MAX_CLAIMS = 32  # listed artifacts of one type read to find ours; past that, attach anew

# (repository, platform manifest, platform) → SPDX JSON bytes
Scanner = Callable[[Reference, Descriptor, str], bytes]


def statement(
    repository: str, subject: Descriptor, predicate_type: str, predicate: dict[str, object]
) -> bytes:
    """An in-toto v1 statement about one manifest (or index)."""
    algo, _, hexd = subject.digest.partition(":")
    stmt = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [
            {"name": repository, "digest": {algo: hexd}, "mediaType": subject.media_type}
        ],
        "predicateType": predicate_type,
        "predicate": predicate,
    }
    return json.dumps(stmt, sort_keys=True).encode()


@dataclass
class Attester:
    client: OCIClient
    ctx: BuildContext
    signer: Signer | None = None
    scanner: Scanner | None = None
    # Also write each platform's SLSA predicate to DIR/IMAGE/OS-ARCH.json, for a keyless signer
    # run after cannery (the generated workflow's actions/attest step).
    save: Path | None = None

    def __call__(self, image: ImageJob, index: Descriptor, children: list[Descriptor]) -> int:
        return self.platforms(image, children) + self.index(image, index, children)

    def platforms(self, image: ImageJob, children: list[Descriptor]) -> int:
        """What is attached to each platform manifest (provenance, SBOM, signature): it needs
        only the manifests, so a build runs it beside writing the index. Each method returns
        how many artifacts it attached (0: all were there)."""
        repo = Reference.parse(image.repository)
        inputs = {p.platform: p.input_digest for p in image.platforms}
        attached = 0
        for child in children:
            platform = platform_string(child.platform) or ""
            input_digest = (child.annotations or {}).get(INPUTS_LABEL) or inputs.get(platform, "")
            attached += self.platform(image, repo, child, platform, input_digest)
        return attached

    def index(self, image: ImageJob, index: Descriptor, children: list[Descriptor]) -> int:
        """What is attached to the index once it is written: its signature, with a key."""
        repo = Reference.parse(image.repository)
        if self.signer is None:
            return 0
        pred: dict[str, object] = {
            "image": image.name,
            "platforms": {platform_string(c.platform) or "": c.digest for c in children},
        }
        return self._sign(repo, index, pred)

    def platform(
        self, image: ImageJob, repo: Reference, child: Descriptor, platform: str, input_digest: str
    ) -> int:
        subject = Descriptor(child.media_type, child.digest, child.size)
        have, _ = list_referrers(self.client, repo, child.digest)
        stmt = provenance(image.spec, platform, subject, input_digest, self.ctx)
        if self.save is not None:
            predicate = json.dumps(json.loads(stmt)["predicate"], sort_keys=True, indent=1)
            atomic_write(self.save / image.name / f"{platform.replace('/', '-')}.json",
                         predicate + "\n")
        attached = 0
        if not self._attached(repo, subject.digest, have, PROVENANCE_TYPE):
            attach(self.client, repo, subject, PROVENANCE_TYPE,
                   envelope(stmt, self.signer), ENVELOPE_MEDIA_TYPE, self._annotations())
            attached += 1
        if self.scanner is not None and not self._attached(repo, subject.digest, have, SBOM_TYPE):
            try:
                sbom = load_json(self.scanner(repo, subject, platform))
            except ValueError:
                sbom = None
            if not isinstance(sbom, dict):
                raise CommandError(f"SBOM scan of {repo.name}@{child.digest} ({platform}): the "
                                   "scanner's output is not a JSON object")
            stmt = statement(repo.name, subject, SPDX_PREDICATE, sbom)
            attach(self.client, repo, subject, SBOM_TYPE,
                   envelope(stmt, self.signer), ENVELOPE_MEDIA_TYPE, self._annotations())
            attached += 1
        if self.signer is not None:
            attached += self._sign(repo, subject, {"image": image.name, "platform": platform},
                                   have)
        return attached

    def complete(self, image: ImageJob, children: list[Descriptor], index: Descriptor) -> bool:
        """Reads only: whether ``platforms`` and ``index`` would find everything attached and
        kept (and no predicate file is asked for), so a publish that writes nothing need not
        run them. A build's probe asks it, side by side with the other images'."""
        if self.save is not None:
            return False
        repo = Reference.parse(image.repository)
        key = self.signer.keyid if self.signer else None
        wanted = [PROVENANCE_TYPE, *([SBOM_TYPE] if self.scanner else [])]
        for child in children:
            have, _ = list_referrers(self.client, repo, child.digest)
            for kind in wanted:
                if not self._kept(repo, child.digest, have, kind):
                    return False
            if key and not self._kept(repo, child.digest, have, SIGNATURE_TYPE, key):
                return False
        if key:
            have, _ = list_referrers(self.client, repo, index.digest)
            return self._kept(repo, index.digest, have, SIGNATURE_TYPE, key)
        return True

    def _attached(
        self,
        repo: Reference,
        subject: str,
        have: list[Referrer],
        artifact_type: str,
        key: str | None = None,
    ) -> bool:
        """Whether an artifact of this type (by this key) about ``subject`` is attached, as its
        own manifest says (one listed but missing or malformed does not count); it gets its
        keep tag if it lacks one."""
        found = self._claimed(repo, subject, have, artifact_type, key)
        if found is not None:
            keep(self.client, repo, *found)
        return found is not None

    def _kept(
        self,
        repo: Reference,
        subject: str,
        have: list[Referrer],
        artifact_type: str,
        key: str | None = None,
    ) -> bool:
        """``_attached`` without writing: attached, and its keep tag on it."""
        found = self._claimed(repo, subject, have, artifact_type, key)
        if found is None:
            return False
        tagged = self.client.head_manifest(repo.with_tag(keep_tag(found[0])))
        return tagged is not None and tagged.digest == found[0]

    def _claimed(
        self,
        repo: Reference,
        subject: str,
        have: list[Referrer],
        artifact_type: str,
        key: str | None,
    ) -> tuple[str, bytes] | None:
        """The digest and bytes of the first listed artifact whose own manifest says it is of
        this type (by this key) about ``subject``."""
        claims = [r for r in have if r.artifact_type == artifact_type]
        for r in claims[:MAX_CLAIMS]:
            try:
                body, _ = self.client.get_manifest(repo.with_digest(r.descriptor.digest))
                kind, about, _, ann = parse_artifact(body, r.descriptor.digest)
            except (NotFound, MalformedManifest):
                continue
            if (kind, about.digest) == (artifact_type, subject) and (
                key is None or ann.get(KEYID_ANNOTATION) == key
            ):
                return r.descriptor.digest, body
        return None

    def _annotations(self) -> dict[str, str] | None:
        return {KEYID_ANNOTATION: self.signer.keyid} if self.signer else None

    def _sign(
        self,
        repo: Reference,
        subject: Descriptor,
        predicate: dict[str, object],
        have: list[Referrer] | None = None,
    ) -> int:
        assert self.signer is not None
        if have is None:
            have, _ = list_referrers(self.client, repo, subject.digest)
        if self._attached(repo, subject.digest, have, SIGNATURE_TYPE, self.signer.keyid):
            return 0
        # The signature says only "this key signs this manifest (or index)".
        stmt = statement(repo.name, subject, SIGNATURE_PREDICATE, predicate)
        attach(self.client, repo, subject, SIGNATURE_TYPE,
               envelope(stmt, self.signer), ENVELOPE_MEDIA_TYPE, self._annotations())
        return 1
