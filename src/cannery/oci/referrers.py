"""OCI 1.1 referrers: artifacts (provenance, SBOM, signatures) that point at a manifest through
their ``subject``, found by that manifest's digest. Never entries of the image index.

Two ways a registry lists referrers, both handled here:

- the **referrers API** (``GET /v2/<name>/referrers/<digest>``): the registry keeps the list;
  it says so by answering a manifest PUT that has a ``subject`` with an ``OCI-Subject`` header;
- the **tag schema fallback** (registries without the API: Debian's docker-registry 2.8, Docker
  Hub, GHCR): an image index tagged ``sha256-<hex of the subject digest>`` that the client
  maintains by read-modify-write. The spec allows no lock; the write carries ``If-Match`` with
  the ETag of what was read, or ``If-None-Match: *`` when there was no list yet (a registry that
  honours them refuses a lost update with 412), and the list is read back afterwards; a write
  that lost a race is redone, up to ``RACE_TRIES`` times.

Every artifact manifest is pushed under a tag of its own, ``sha256-<hex of the artifact>.artifact``
(:func:`keep_tag`), as cosign tags its ``sha256-<hex>.sig``: a registry that deletes untagged
manifests would otherwise delete it while the fallback index still lists it (Debian's
docker-registry 2.8 ``garbage-collect --delete-untagged`` deletes even the children of a tagged
index; quay.io and SWR expire untagged manifests), and the image would lose its attestations.
The tag is named after the artifact itself, so it never moves and writing it again changes
nothing. When the fallback index is rewritten, entries whose manifests the registry no longer
has (deleted by a GC before this protection existed) are dropped: the registry would refuse an
index that lists them.

``attach`` pushes an artifact; ``list_referrers`` reads what is attached; ``put_referrer`` pushes
an artifact manifest whose blobs are already in the repository; ``keep`` tags one already
there; ``copy_referrers`` carries every referrer of a manifest to another repository or registry
(what a mirror or ``cannery copy`` needs), each with its tag.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cannery.errors import NetworkError
from cannery.oci.client import OCIClient
from cannery.oci.manifest import (
    OCI_INDEX,
    OCI_MANIFEST,
    Descriptor,
    MalformedManifest,
    digest_of,
    load_json,
    load_object,
)
from cannery.oci.reference import Reference, valid_digest

# The spec's empty config for artifacts: the two bytes "{}".
EMPTY_MEDIA_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY_CONFIG = b"{}"
EMPTY = Descriptor(EMPTY_MEDIA_TYPE, digest_of(EMPTY_CONFIG), len(EMPTY_CONFIG))
RACE_TRIES = 8
MAX_REFERRER_DEPTH = 8  # a signature of an SBOM of an image is 2 deep


@dataclass(frozen=True)
class Referrer:
    """One entry of a referrers list: the artifact manifest and its artifact type."""

    descriptor: Descriptor
    artifact_type: str

    def to_json(self) -> dict[str, object]:
        out = self.descriptor.to_json()
        out["artifactType"] = self.artifact_type
        return dict(sorted(out.items()))


def fallback_tag(digest: str) -> str:
    """The tag schema: ``sha256:abc…`` → ``sha256-abc…`` (the tag of the referrers index)."""
    if not valid_digest(digest):
        raise ValueError(f"{digest!r} is not a digest")
    return digest.replace(":", "-", 1)


KEEP_SUFFIX = ".artifact"


def keep_tag(digest: str) -> str:
    """The tag that keeps an artifact manifest from "delete untagged" GC: ``sha256-<hex>.artifact``
    for the artifact's own digest (never a referrers-list tag: those have no suffix)."""
    return fallback_tag(digest) + KEEP_SUFFIX


def keep(client: OCIClient, repo: Reference, digest: str, body: bytes | None = None) -> bool:
    """Tag the artifact manifest ``digest`` (already in ``repo``) with :func:`keep_tag`, unless
    the tag is there; returns whether anything was written. ``body``: its bytes, if known."""
    ref = repo.with_tag(keep_tag(digest))
    current = client.head_manifest(ref)
    if current is not None and current.digest == digest:
        return False
    if body is None:
        body, _ = client.get_manifest(repo.with_digest(digest))
    client.put_manifest(ref, body, OCI_MANIFEST)
    return True


def artifact_manifest(
    subject: Descriptor,
    artifact_type: str,
    layers: list[Descriptor],
    annotations: Mapping[str, str] | None = None,
) -> bytes:
    """An OCI 1.1 artifact: an image manifest with the empty config, ``artifactType`` and
    ``subject`` (only media type, digest and size of the subject: no platform)."""
    manifest: dict[str, object] = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": artifact_type,
        "config": EMPTY.to_json(),
        "layers": [layer.to_json() for layer in layers],
        "subject": Descriptor(subject.media_type, subject.digest, subject.size).to_json(),
    }
    if annotations:
        manifest["annotations"] = dict(sorted(annotations.items()))
    return json.dumps(manifest, separators=(",", ":"), ensure_ascii=False).encode()


def parse_artifact(
    body: bytes, where: str
) -> tuple[str, Descriptor, list[Descriptor], dict[str, str]]:
    """(artifactType, subject, layers, annotations) of an artifact manifest, read strictly."""
    data = load_object(body, where)
    artifact_type = data.get("artifactType")
    if not isinstance(artifact_type, str):
        config = Descriptor.from_json(data.get("config"), f"{where}.config")
        artifact_type = config.media_type
    subject = Descriptor.from_json(data.get("subject"), f"{where}.subject")
    layers = data.get("layers")
    if not isinstance(layers, list):
        raise MalformedManifest(f"{where}.layers: missing or not a list")
    descs = [Descriptor.from_json(x, f"{where}.layers[{n}]") for n, x in enumerate(layers)]
    ann = data.get("annotations") or {}
    if not isinstance(ann, dict) or not all(isinstance(v, str) for v in ann.values()):
        raise MalformedManifest(f"{where}.annotations: not an object of strings")
    return artifact_type, subject, descs, dict(ann)


def attach(
    client: OCIClient,
    repo: Reference,
    subject: Descriptor,
    artifact_type: str,
    payload: bytes,
    media_type: str,
    annotations: Mapping[str, str] | None = None,
) -> Referrer:
    """Push ``payload`` as the one layer of an artifact that refers to ``subject``, and list it
    (the registry does, through its API; else the fallback tag is updated)."""
    layer = Descriptor(media_type, digest_of(payload), len(payload))
    client.push_blob(repo, EMPTY_CONFIG, EMPTY.digest)
    client.push_blob(repo, payload, layer.digest)
    body = artifact_manifest(subject, artifact_type, [layer], annotations)
    return put_referrer(client, repo, body)


def put_referrer(client: OCIClient, repo: Reference, body: bytes) -> Referrer:
    """Push an artifact manifest (its blobs already in ``repo``) under its :func:`keep_tag` (one
    PUT: the manifest is never untagged), then make sure it is listed among its subject's
    referrers."""
    artifact_type, subject, _, annotations = parse_artifact(body, "artifact manifest")
    desc = Descriptor(OCI_MANIFEST, digest_of(body), len(body), annotations=annotations or None)
    stored, oci_subject = client.put_manifest_if(
        repo.with_tag(keep_tag(desc.digest)), body, OCI_MANIFEST
    )
    if not stored:
        raise NetworkError(f"{repo.name}@{desc.digest}: registry refused the artifact (412)")
    entry = Referrer(desc, artifact_type)
    if oci_subject != subject.digest:  # no referrers API: the client keeps the list
        _add_to_fallback(client, repo, subject.digest, entry)
    return entry


def list_referrers(
    client: OCIClient, repo: Reference, digest: str, artifact_type: str | None = None
) -> tuple[list[Referrer], str]:
    """The referrers of ``digest`` (of one artifact type, if given), and where they were found:
    ``"api"`` or ``"tag"`` (the fallback; an absent tag is an empty list)."""
    body = client.get_referrers(repo, digest)
    source = "api"
    if body is None:
        source = "tag"
        got = client.get_manifest_etag(repo.with_tag(fallback_tag(digest)))
        body = got[0] if got else None
    entries = _parse_list(body, f"{repo.name} referrers of {digest}") if body else []
    if artifact_type is not None:
        entries = [e for e in entries if e.artifact_type == artifact_type]
    return entries, source


def referrers_index(entries: list[Referrer]) -> bytes:
    """The bytes of a referrers list (an image index; entries in the order they were added)."""
    manifests = [e.to_json() for e in entries]
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests}
    return json.dumps(index, separators=(",", ":"), ensure_ascii=False).encode()


def _parse_list(body: bytes, where: str) -> list[Referrer]:
    try:
        data = load_json(body)
    except ValueError:
        raise NetworkError(f"{where}: not JSON") from None
    if not isinstance(data, dict) or data.get("mediaType", OCI_INDEX) != OCI_INDEX:
        raise NetworkError(f"{where}: not an OCI image index")
    manifests = data.get("manifests")
    if not isinstance(manifests, list):
        raise NetworkError(f"{where}.manifests: missing or not a list")
    out = []
    for n, entry in enumerate(manifests):
        try:
            desc = Descriptor.from_json(entry, f"{where}.manifests[{n}]")
        except MalformedManifest as exc:
            raise NetworkError(str(exc)) from None
        artifact_type = entry.get("artifactType")
        if not isinstance(artifact_type, str):
            raise NetworkError(f"{where}.manifests[{n}].artifactType: missing or not a string")
        out.append(Referrer(desc, artifact_type))
    return out


def _add_to_fallback(
    client: OCIClient,
    repo: Reference,
    subject: str,
    entry: Referrer,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Read-modify-write of the fallback index, as safe as the spec allows (see the module)."""
    tag_ref = repo.with_tag(fallback_tag(subject))
    where = f"{tag_ref}"
    for attempt in range(RACE_TRIES):
        got = client.get_manifest_etag(tag_ref)
        etag = None
        entries: list[Referrer] = []
        if got is not None:
            body, desc, etag = got
            if desc.media_type != OCI_INDEX:
                # The spec: a tag of this form that is not an index is not ours to overwrite.
                raise NetworkError(f"{where}: the referrers tag holds a {desc.media_type}")
            entries = _parse_list(body, where)
        if any(e.descriptor.digest == entry.descriptor.digest for e in entries):
            return
        # One the registry lost (a GC before keep tags) would make it refuse the whole list.
        entries = [e for e in entries if client.head_manifest(repo.with_digest(
            e.descriptor.digest)) is not None]
        new = referrers_index([*entries, entry])
        stored, _ = client.put_manifest_if(tag_ref, new, OCI_INDEX, etag, create_only=got is None)
        if stored:
            check = client.get_manifest_etag(tag_ref)
            listed = _parse_list(check[0], where) if check else []
            if any(e.descriptor.digest == entry.descriptor.digest for e in listed):
                return
        # Another writer got there between our read and our write: read again and redo.
        sleep(random.uniform(0, 0.05 * 2**attempt))
    raise NetworkError(
        f"{where}: the referrers list kept changing under us ({RACE_TRIES} tries); push again"
    )


def copy_referrers(
    src: OCIClient,
    src_repo: Reference,
    dst: OCIClient,
    dst_repo: Reference,
    digest: str,
    _seen: set[str] | None = None,
    _depth: int = 0,
) -> list[Referrer]:
    """Carry every referrer of ``digest`` from one repository to another (a mirror): blobs,
    then the artifact manifest by digest, listed there the destination's way (API or tag).
    Referrers of the referrers (a signature of an SBOM) are carried too, each artifact once
    and at most ``MAX_REFERRER_DEPTH`` levels down (a registry's list may name a cycle)."""
    seen = {digest} if _seen is None else _seen
    if _depth > MAX_REFERRER_DEPTH:
        raise NetworkError(
            f"{src_repo.name}@{digest}: referrers nest more than {MAX_REFERRER_DEPTH} deep"
        )
    found, _ = list_referrers(src, src_repo, digest)
    out = []
    for r in found:
        if r.descriptor.digest in seen:
            continue
        seen.add(r.descriptor.digest)
        where = f"{src_repo.name}@{r.descriptor.digest}"
        body, _ = src.get_manifest(src_repo.with_digest(r.descriptor.digest))
        try:
            _, _, layers, _ = parse_artifact(body, where)
            config = Descriptor.from_json(load_json(body).get("config"), f"{where}.config")
        except MalformedManifest as exc:
            raise NetworkError(f"{src_repo.host}: malformed answer: {exc}") from None
        for d in [config, *layers]:
            if not dst.blob_exists(dst_repo, d.digest):
                with tempfile.TemporaryDirectory() as tmp:
                    path = Path(tmp) / "blob"
                    src.fetch_blob(src_repo, d.digest, path, d.size)
                    dst.push_blob(dst_repo, path, d.digest)
        out.append(put_referrer(dst, dst_repo, body))
        out += copy_referrers(src, src_repo, dst, dst_repo, r.descriptor.digest, seen,
                              _depth + 1)
    return out
