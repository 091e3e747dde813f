"""Copy an image from one repository to another by digest, with cannery's own client.

What ``skopeo copy --all --preserve-digests`` does, with cannery's retries, TLS rules and
bounded reads:

- Every manifest is copied as the bytes the source serves, so every digest is kept; an index
  is written only after every manifest it lists is in the target, and a manifest only after
  every blob it names is, so no reader of the target ever sees a partial image.
- A blob the target already has is not copied; on the same host it is mounted from the source
  repository (no bytes move); otherwise it is streamed through a temporary file, its digest and
  size checked while it is read (never held in memory whole, never more bytes than the
  manifest says).
- Referrers (signatures, SBOMs, provenance) are copied with the image by
  :func:`~cannery.oci.referrers.copy_referrers` (the referrers API, else the OCI 1.1 tag schema
  ``sha256-<hex>``), and listed the target's way; nothing when the target lists them all.
- ``docker=True`` writes Docker media types for registries that refuse OCI ones (Huawei SWR):
  an OCI index becomes a Docker manifest list (serialized by
  :func:`~cannery.oci.manifest.index_bytes`) and OCI image manifests become Docker v2 schema 2
  manifests. Manifests that already have Docker types keep their bytes and digests; converted
  ones get new digests, and referrers are then not copied (their ``subject`` would name a
  digest the target does not have).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cannery.errors import InputError, NetworkError
from cannery.oci.client import OCIClient
from cannery.oci.manifest import (
    DOCKER_LIST,
    DOCKER_MANIFEST,
    INDEX_TYPES,
    OCI_INDEX,
    OCI_MANIFEST,
    Descriptor,
    MalformedManifest,
    digest_of,
    index_bytes,
    load_object,
    parse_index,
)
from cannery.oci.reference import Reference
from cannery.oci.referrers import copy_referrers, list_referrers

# OCI → Docker v2 schema 2 types of an image manifest's parts. A layer type with no Docker
# equivalent (zstd, uncompressed tar) makes the conversion fail rather than lie.
_DOCKER_TYPES = {
    OCI_MANIFEST: DOCKER_MANIFEST,
    OCI_INDEX: DOCKER_LIST,
    "application/vnd.oci.image.config.v1+json": "application/vnd.docker.container.image.v1+json",
    "application/vnd.oci.image.layer.v1.tar+gzip": (
        "application/vnd.docker.image.rootfs.diff.tar.gzip"
    ),
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip": (
        "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip"
    ),
}
_DOCKER_KEEP = frozenset(
    {
        DOCKER_MANIFEST,
        DOCKER_LIST,
        "application/vnd.docker.container.image.v1+json",
        "application/vnd.docker.image.rootfs.diff.tar.gzip",
        "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
    }
)


@dataclass
class CopyStats:
    """What one copy did, for the summary line: blobs copied, mounted or already there."""

    blobs_copied: int = 0
    bytes_copied: int = 0
    blobs_mounted: int = 0
    blobs_present: int = 0
    manifests_written: int = 0
    manifests_present: int = 0
    referrers: int = 0
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "blobs_copied": self.blobs_copied,
            "bytes_copied": self.bytes_copied,
            "blobs_mounted": self.blobs_mounted,
            "blobs_present": self.blobs_present,
            "manifests_written": self.manifests_written,
            "manifests_present": self.manifests_present,
            "referrers": self.referrers,
            "notes": self.notes,
        }

    def summary(self) -> str:
        return (
            f"blobs: {self.blobs_copied} copied ({_size(self.bytes_copied)}), "
            f"{self.blobs_mounted} mounted, {self.blobs_present} already there; manifests: "
            f"{self.manifests_written} written, {self.manifests_present} already there"
            + (f"; {self.referrers} referrer(s)" if self.referrers else "")
        )


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:g} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n:.1f} GiB"


def docker_type(media_type: str, where: str) -> str:
    """The Docker media type for ``media_type``; InputError when there is none."""
    if media_type in _DOCKER_KEEP:
        return media_type
    if media_type in _DOCKER_TYPES:
        return _DOCKER_TYPES[media_type]
    raise InputError(f"{where}: media type {media_type} has no Docker equivalent")


def to_docker_manifest(body: bytes, where: str) -> bytes:
    """An image manifest with Docker v2 schema 2 types. Docker-typed bytes come back as they
    are (same digest); OCI ones are rewritten (annotations dropped: Docker has none)."""
    data = load_object(body, where)
    if data.get("mediaType") == DOCKER_MANIFEST:
        return body
    if "subject" in data or "artifactType" in data:
        raise InputError(f"{where}: an OCI artifact (subject/artifactType) has no Docker form")
    config = Descriptor.from_json(data.get("config"), f"{where}.config")
    layers = data.get("layers")
    if not isinstance(layers, list):
        raise MalformedManifest(f"{where}.layers: missing or not a list")
    parts = [Descriptor.from_json(x, f"{where}.layers[{n}]") for n, x in enumerate(layers)]

    def part(d: Descriptor, n: str) -> dict[str, object]:
        return {"mediaType": docker_type(d.media_type, n), "size": d.size, "digest": d.digest}

    out = {
        "schemaVersion": 2,
        "mediaType": DOCKER_MANIFEST,
        "config": part(config, f"{where}.config"),
        "layers": [part(p, f"{where}.layers[{n}]") for n, p in enumerate(parts)],
    }
    return json.dumps(out, separators=(",", ":")).encode()


class Mirror:
    """Copies manifests and blobs between repositories; one per command run (holds stats)."""

    def __init__(
        self,
        client: OCIClient,
        *,
        progress: Callable[[str], None] | None = None,
        docker_hint: str = "--docker-media-types",
    ) -> None:
        """``docker_hint``: the setting a refused OCI media type asks the user to change."""
        self.client = client
        self.docker_hint = docker_hint
        self.stats = CopyStats()
        self._progress = progress or (lambda _line: None)

    # ------------------------------------------------------------------ manifests

    def copy(self, src: Reference, dst: Reference, *, docker: bool = False) -> Descriptor:
        """Copy ``src`` (a tag or a digest) and everything it names into ``dst``'s repository
        by digest; move no tag. Returns the descriptor of what ``dst`` now holds."""
        body, desc = self.client.get_manifest(src)
        repo_src = Reference(src.host, src.repository, digest=desc.digest)
        return self.copy_manifest(repo_src, dst, body, desc, docker=docker)

    def copy_manifest(
        self,
        src: Reference,
        dst: Reference,
        body: bytes,
        desc: Descriptor,
        *,
        docker: bool = False,
    ) -> Descriptor:
        where = f"{src.name}@{desc.digest}"
        media_type = desc.media_type
        if media_type in INDEX_TYPES:
            children, annotations = _index(body, where)
            written = []
            for child in children:
                child_ref = Reference(src.host, src.repository, digest=child.digest)
                cbody, cdesc = self.client.get_manifest(child_ref)
                got = self.copy_manifest(child_ref, dst, cbody, cdesc, docker=docker)
                written.append(
                    Descriptor(
                        got.media_type, got.digest, got.size, child.platform, child.annotations
                    )
                )
            if docker and media_type != DOCKER_LIST:
                body = index_bytes(written, annotations, DOCKER_LIST)
                media_type = DOCKER_LIST
        else:
            original = body
            if docker and media_type != DOCKER_MANIFEST:
                body = to_docker_manifest(body, where)
                media_type = DOCKER_MANIFEST
            # A registry holds a manifest only with its blobs: one there needs none copied.
            if self.client.head_manifest(_by(dst, digest_of(body))) is None:
                self._copy_blobs(src, dst, original, where)
        digest = digest_of(body)
        target = _by(dst, digest)
        if self.client.head_manifest(target) is not None:
            self.stats.manifests_present += 1
        else:
            self.put(target, body, media_type)
            self.stats.manifests_written += 1
        if digest == desc.digest and not docker:
            self.copy_referrers(src, dst, desc.digest)
        elif list_referrers(self.client, src, desc.digest)[0]:
            self.stats.notes.append(f"{desc.digest}: referrers not copied (Docker media types)")
        return Descriptor(media_type, digest, len(body))

    def copy_referrers(self, src: Reference, dst: Reference, digest: str) -> None:
        """The referrers of ``digest`` (and theirs), unless ``dst`` lists them all already."""
        want = list_referrers(self.client, src, digest)[0]
        have = {r.descriptor.digest for r in list_referrers(self.client, dst, digest)[0]}
        if all(r.descriptor.digest in have for r in want):
            return
        self.stats.referrers += len(copy_referrers(self.client, src, self.client, dst, digest))

    def put(self, ref: Reference, body: bytes, media_type: str) -> str:
        """PUT a manifest; a registry that refuses an OCI media type (SWR answers 400) gets
        one line naming the setting that makes cannery write Docker types instead."""
        try:
            return self.client.put_manifest(ref, body, media_type)
        except NetworkError as exc:
            raise refused_media_type(exc, ref, media_type, self.docker_hint) from None

    # ------------------------------------------------------------------ blobs

    def _copy_blobs(self, src: Reference, dst: Reference, body: bytes, where: str) -> None:
        data = load_object(body, where)
        blobs = [Descriptor.from_json(data.get("config"), f"{where}.config")]
        layers = data.get("layers") or []
        if not isinstance(layers, list):
            raise MalformedManifest(f"{where}.layers: not a list")
        blobs += [Descriptor.from_json(x, f"{where}.layers[{n}]") for n, x in enumerate(layers)]
        for blob in dict((b.digest, b) for b in blobs).values():
            self.copy_blob(src, dst, blob)

    def copy_blob(self, src: Reference, dst: Reference, blob: Descriptor) -> None:
        if self.client.blob_exists(dst, blob.digest):
            self.stats.blobs_present += 1
            return
        same_host = src.host == dst.host and src.repository != dst.repository
        if same_host and self.client.mount_blob(dst, blob.digest, src.repository):
            self.stats.blobs_mounted += 1
            return
        fd, name = tempfile.mkstemp(prefix="cannery-blob-")
        os.close(fd)
        path = Path(name)
        try:
            self._progress(f"copying {blob.digest[:19]} ({_size(blob.size)})")
            self.client.fetch_blob(src, blob.digest, path, blob.size)
            self.client.push_blob(dst, path, blob.digest)
        finally:
            path.unlink(missing_ok=True)
        self.stats.blobs_copied += 1
        self.stats.bytes_copied += blob.size


def _index(body: bytes, where: str) -> tuple[list[Descriptor], dict[str, str]]:
    try:
        return parse_index(body, where)
    except MalformedManifest as exc:
        raise NetworkError(f"malformed answer: {exc}") from None


def refused_media_type(
    exc: NetworkError, ref: Reference, media_type: str, hint: str
) -> NetworkError:
    """A manifest PUT refused with 400/415 for an OCI media type becomes one line naming the
    setting that makes cannery write Docker types (SWR answers so); other errors stay as
    they are."""
    refused = re.search(r"registry answered (400|415)\b", exc.message)
    if refused and media_type not in _DOCKER_KEEP:
        return NetworkError(
            f"{ref.host} refused a manifest of media type {media_type} ({refused.group(0)}): "
            f"this registry needs Docker media types; set {hint}"
        )
    return exc


def _by(repo: Reference, digest: str) -> Reference:
    return Reference(repo.host, repo.repository, digest=digest)
