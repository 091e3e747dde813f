"""Publish a multi-platform image so that no reader ever sees a partial one.

The order is the guarantee: every blob, then each platform manifest by digest, then the index
by digest, and only when the index reads back intact are tags pointed at it. Until the last
step no tag changes; each tag move is one manifest PUT, which the registry applies whole, so a
reader of a tag sees either the old complete index or the new complete index.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from cannery.errors import InputError, NetworkError
from cannery.oci.client import OCIClient
from cannery.oci.manifest import (
    DOCKER_MANIFEST,
    OCI_INDEX,
    Descriptor,
    digest_of,
    index_bytes,
    platform_key,
)
from cannery.oci.reference import Reference, valid_digest


def push_image_dir(client: OCIClient, repo: Reference, layout: Path) -> Descriptor:
    """Upload a single-platform image from ``layout`` and PUT its manifest by digest.

    ``layout`` is what ``buildah push IMG dir:LAYOUT`` writes (containers/image's ``dir:``
    transport: ``manifest.json`` and one file per blob named by its hex digest), or an OCI image
    layout (``index.json`` naming exactly one manifest, blobs under ``blobs/<alg>/<hex>``).
    Blobs the repository already has are skipped. The descriptor returned carries the platform
    read from the image config, ready for :func:`merge_index`.
    """
    manifest_bytes, blob_path = _read_layout(layout)
    try:
        manifest = json.loads(manifest_bytes)
        config = manifest["config"]
        blobs = [config, *manifest.get("layers", [])]
        digests = [(str(b["digest"]), int(b["size"])) for b in blobs]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise InputError(f"{layout}: manifest is not an image manifest") from None
    paths = [blob_path(digest) for digest, _ in digests]  # every check before any upload
    for (digest, size), path in zip(digests, paths, strict=True):
        if not path.is_file() or path.stat().st_size != size:
            raise InputError(f"{layout}: blob {digest} missing or not {size} bytes")
    for (digest, _), path in zip(digests, paths, strict=True):
        client.push_blob(repo, path, digest)
    try:
        cfg = json.loads(blob_path(str(config["digest"])).read_bytes())
        platform = {"architecture": str(cfg["architecture"]), "os": str(cfg["os"])}
        if cfg.get("variant"):
            platform["variant"] = str(cfg["variant"])
    except (ValueError, KeyError, TypeError, AttributeError):
        raise InputError(f"{layout}: image config has no os/architecture") from None
    media_type = str(manifest.get("mediaType") or DOCKER_MANIFEST)
    digest = digest_of(manifest_bytes)
    client.put_manifest(_at(repo, digest), manifest_bytes, media_type)
    return Descriptor(media_type, digest, len(manifest_bytes), platform)


def _read_layout(layout: Path) -> tuple[bytes, Callable[[str], Path]]:
    """The manifest bytes, and where a blob of the layout lives (digests checked first, so a
    crafted manifest cannot name a file outside the layout)."""
    oci = not (layout / "manifest.json").is_file()

    def blob(digest: str) -> Path:
        if not valid_digest(digest):
            raise InputError(f"{layout}: invalid digest {digest!r}")
        algorithm, _, hexpart = digest.partition(":")
        return layout / "blobs" / algorithm / hexpart if oci else layout / hexpart

    if not oci:  # containers/image dir: transport
        return (layout / "manifest.json").read_bytes(), blob
    try:
        entries = json.loads((layout / "index.json").read_bytes())["manifests"]
        (entry,) = entries
        data = blob(str(entry["digest"])).read_bytes()
    except FileNotFoundError:
        raise InputError(f"{layout}: neither a dir: layout nor an OCI image layout") from None
    except (ValueError, KeyError, TypeError):
        raise InputError(f"{layout}: index.json must name exactly one manifest") from None
    return data, blob


def merge_index(
    client: OCIClient,
    repo: Reference,
    children: list[Descriptor],
    annotations: dict[str, str],
    media_type: str = OCI_INDEX,
) -> Descriptor:
    """PUT, by digest, an OCI image index (or, with ``media_type`` DOCKER_LIST, a Docker
    manifest list) of ``children`` (platform manifests already in ``repo``), serialized by
    :func:`~cannery.oci.manifest.index_bytes`: equal inputs give equal bytes, so an equal
    digest."""
    if not children:
        raise ValueError("an index needs at least one platform manifest")
    keyed = {}
    for child in children:
        if not child.platform:
            raise ValueError(f"{child.digest}: a child of an index needs a platform")
        key = platform_key(child.platform)
        if key in keyed:
            raise ValueError(f"two manifests for platform {'/'.join(k for k in key if k)}")
        keyed[key] = child
    for key, child in keyed.items():
        # head_manifest never guesses a size: without Content-Length it reads the bytes.
        found = client.head_manifest(_at(repo, child.digest))
        if found is None or (found.size, found.media_type) != (child.size, child.media_type):
            raise NetworkError(
                f"{repo.name}@{child.digest} ({'/'.join(k for k in key if k)}) is not in the "
                "registry as described; not writing an index that lists it"
            )
    body = index_bytes(keyed.values(), annotations, media_type)
    digest = digest_of(body)
    # Already there (a no-op build merges to the same bytes): write nothing.
    if client.head_manifest(_at(repo, digest)) is None:
        client.put_manifest(_at(repo, digest), body, media_type)
    return Descriptor(media_type, digest, len(body), annotations=dict(annotations) or None)


def move_tags(client: OCIClient, repo: Reference, index: Descriptor, tags: list[str]) -> list[str]:
    """Point each tag at ``index`` once it reads back intact by digest; return the tags that
    changed (a tag already there is not written, so a no-op publish writes nothing)."""
    # Read back by digest before any tag: get_manifest hashes the bytes, so an index the
    # registry lost (NotFound) or altered (DigestMismatch) stops here, with no tag moved.
    body, _ = client.get_manifest(_at(repo, index.digest))
    changed = []
    for tag in dict.fromkeys(tags):  # each once, in the order given
        ref = repo.with_tag(tag)
        current = client.head_manifest(ref)
        if current is not None and current.digest == index.digest:
            continue
        client.put_manifest(ref, body, index.media_type)
        changed.append(tag)
    return changed


def _at(repo: Reference, digest: str) -> Reference:
    """``repo`` by digest alone, so messages do not name a tag the request does not touch."""
    return Reference(repo.host, repo.repository, digest=digest)
