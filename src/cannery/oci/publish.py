"""Publish a multi-platform image so that no reader ever sees a partial one.

The order is the guarantee: every blob, then each platform manifest by digest, then the index
by digest, and only when the index reads back intact are tags pointed at it. Until the last
step no tag changes; each tag move is one manifest PUT, which the registry applies whole, so a
reader of a tag sees either the old complete index or the new complete index.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from cannery.errors import InputError, NetworkError
from cannery.oci.client import OCIClient
from cannery.oci.manifest import (
    DOCKER_MANIFEST,
    INDEX_TYPES,
    OCI_INDEX,
    Descriptor,
    MalformedManifest,
    digest_of,
    index_bytes,
    parse_index,
    platform_key,
)
from cannery.oci.reference import Reference, valid_digest


def push_image_dir(
    client: OCIClient, repo: Reference, layout: Path, known: frozenset[str] = frozenset()
) -> Descriptor:
    """Upload a single-platform image from ``layout`` and PUT its manifest by digest.

    ``layout`` is what ``buildah push IMG dir:LAYOUT`` writes (containers/image's ``dir:``
    transport: ``manifest.json`` and one file per blob named by its hex digest), or an OCI image
    layout (``index.json`` naming exactly one manifest, blobs under ``blobs/<alg>/<hex>``).
    Blobs the repository already has are skipped; a layer the layout lacks must be one of them
    (checked before anything is uploaded; ``known``: digests this run has just seen the
    repository answer for, not asked again). The descriptor returned carries the platform
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
        if not path.exists() and digest != config["digest"] and (
            digest in known or client.blob_exists(repo, digest)
        ):
            continue  # a layer not exported again: the repository has it
        if not path.is_file() or path.stat().st_size != size:
            raise InputError(f"{layout}: blob {digest} missing or not {size} bytes")
    uploads = [(digest, path) for (digest, _), path in zip(digests, paths, strict=True)
               if path.exists()]
    # side by side (each is two or three round trips); the first error is raised once the
    # uploads under way end (those not started are dropped), and no manifest is written
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(client.push_blob, repo, path, digest) for digest, path in uploads]
        try:
            for done in futures:
                done.result()
        except BaseException:
            for waiting in futures:
                waiting.cancel()
            raise
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


def index_body(children: list[Descriptor], annotations: dict[str, str],
               media_type: str = OCI_INDEX) -> bytes:
    """The bytes of the index ``merge_index`` writes for ``children`` (one per platform),
    serialized by :func:`~cannery.oci.manifest.index_bytes`: equal inputs give equal bytes, so
    an equal digest (a publish that finds every tag on it already has nothing to write)."""
    if not children:
        raise ValueError("an index needs at least one platform manifest")
    return index_bytes(_by_platform(children).values(), annotations, media_type)


def _by_platform(children: list[Descriptor]) -> dict[tuple[str, str, str], Descriptor]:
    keyed = {}
    for child in children:
        if not child.platform:
            raise ValueError(f"{child.digest}: a child of an index needs a platform")
        key = platform_key(child.platform)
        if key in keyed:
            raise ValueError(f"two manifests for platform {'/'.join(k for k in key if k)}")
        keyed[key] = child
    return keyed


def merge_index(
    client: OCIClient,
    repo: Reference,
    children: list[Descriptor],
    annotations: dict[str, str],
    media_type: str = OCI_INDEX,
) -> Descriptor:
    """PUT, by digest, an OCI image index (or, with ``media_type`` DOCKER_LIST, a Docker
    manifest list) of ``children`` (platform manifests already in ``repo``): the bytes of
    :func:`index_body`."""
    body = index_body(children, annotations, media_type)
    for key, child in _by_platform(children).items():
        # head_manifest never guesses a size: without Content-Length it reads the bytes.
        found = client.head_manifest(_at(repo, child.digest))
        if found is None or (found.size, found.media_type) != (child.size, child.media_type):
            raise NetworkError(
                f"{repo.name}@{child.digest} ({'/'.join(k for k in key if k)}) is not in the "
                "registry as described; not writing an index that lists it"
            )
    digest = digest_of(body)
    # Already there (a no-op build merges to the same bytes): write nothing.
    if client.head_manifest(_at(repo, digest)) is None:
        client.put_manifest(_at(repo, digest), body, media_type)
    return Descriptor(media_type, digest, len(body), annotations=dict(annotations) or None)


# The newest lock time an index was built from (``lock.lock_epoch``, Unix seconds): a
# build from an older lock reads it on the tag's current index and does not move the tag back.
LOCK_EPOCH = "io.cannery.lock-epoch"


@dataclass
class TagMoves:
    """What happened to each tag, as far as cannery knows it (each tag in exactly one list).

    ``moved``: the tag now points at the index because of this run (confirmed by the PUT's
    answer, or, when that answer was lost, by reading the tag back: those are in ``settled``
    too). ``unchanged``: it already did; nothing was written. ``uncertain``: a PUT was sent,
    its answer was lost and reading the tag back failed too: it may point at either index.
    ``not_moved``: no PUT was sent, or the tag read back on its old index.
    """

    moved: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    uncertain: list[str] = field(default_factory=list)
    not_moved: list[str] = field(default_factory=list)
    settled: list[str] = field(default_factory=list)
    error: str | None = None
    exit_code: int = 0

    def to_json(self) -> dict[str, list[str]]:
        return {
            "tags_moved": self.moved,
            "tags_unchanged": self.unchanged,
            "tags_uncertain": self.uncertain,
            "tags_not_moved": self.not_moved,
        }


def move_tags(
    client: OCIClient,
    repo: Reference,
    index: Descriptor,
    tags: list[str],
    *,
    lock_epoch: int | None = None,
    force: bool = False,
) -> TagMoves:
    """Point each tag at ``index`` once it reads back intact by digest. A tag already there
    is not written (a no-op publish writes nothing). Before any tag moves, each tag's current
    index is read: if its ``io.cannery.lock-epoch`` is newer than ``lock_epoch`` (it was built
    from a newer lock) no tag moves (exit 2) unless ``force``. A PUT whose answer is lost is
    settled by reading the tag back; the first tag that did not (or may not have) moved stops
    the rest. Failures are in the returned ``TagMoves`` (``error``), never half-reported."""
    moves = TagMoves()
    if not tags:
        return moves
    # Read back by digest before any tag: get_manifest hashes the bytes, so an index the
    # registry lost (NotFound) or altered (DigestMismatch) stops here, with no tag moved.
    body, _ = client.get_manifest(_at(repo, index.digest))
    todo = []
    for tag in dict.fromkeys(tags):  # each once, in the order given
        current = client.head_manifest(repo.with_tag(tag))
        if current is not None and current.digest == index.digest:
            moves.unchanged.append(tag)
            continue
        refused = _refusal(client, repo, tag, current, lock_epoch) if not force else None
        if refused is not None:
            moves.not_moved = [t for t in dict.fromkeys(tags) if t not in moves.unchanged]
            moves.error = refused
            moves.exit_code = 2
            return moves
        todo.append(tag)
    for n, tag in enumerate(todo):
        ref = repo.with_tag(tag)
        try:
            client.put_manifest(ref, body, index.media_type)
        except NetworkError as exc:
            state = _read_back(client, ref, index.digest)
            if state == "moved":  # the registry applied it; only its answer was lost
                moves.moved.append(tag)
                moves.settled.append(tag)
                continue
            (moves.uncertain if state == "unknown" else moves.not_moved).append(tag)
            moves.not_moved += todo[n + 1 :]
            why = "may have moved: reading it back failed too" if state == "unknown" else (
                "read back on its old index"
            )
            moves.error = f"{exc.message}; tag {tag} {why}"
            moves.exit_code = exc.exit_code
            return moves
        moves.moved.append(tag)
    return moves


def backwards(
    client: OCIClient, repo: Reference, digest: str, tags: list[str], lock_epoch: int | None
) -> str | None:
    """The refusal :func:`move_tags` (without ``force``) would give for moving ``tags`` to the
    index ``digest`` of ``lock_epoch``, read now without writing anything; None: no tag is on
    an index from a newer lock. For callers that check every repository before any tag moves
    (``move_tags`` checks again, as it moves)."""
    for tag in dict.fromkeys(tags):
        current = client.head_manifest(repo.with_tag(tag))
        if current is not None and current.digest == digest:
            continue
        refused = _refusal(client, repo, tag, current, lock_epoch)
        if refused is not None:
            return refused
    return None


def _refusal(
    client: OCIClient,
    repo: Reference,
    tag: str,
    current: Descriptor | None,
    lock_epoch: int | None,
) -> str | None:
    """Why ``tag`` (now on ``current``) is not moved: its index is from a newer lock."""
    newer = _newer_lock(client, repo, tag, current, lock_epoch)
    if newer is None:
        return None
    return (
        f"{repo.name}:{tag} points at {current.digest if current else '?'}, built from "
        f"a newer lock ({LOCK_EPOCH} {newer} > {lock_epoch}); not moving it back "
        "(--force moves it anyway)"
    )


def _newer_lock(
    client: OCIClient,
    repo: Reference,
    tag: str,
    current: Descriptor | None,
    lock_epoch: int | None,
) -> int | None:
    """The lock epoch of the index ``tag`` points at now, when newer than ``lock_epoch``."""
    if current is None or lock_epoch is None or current.media_type not in INDEX_TYPES:
        return None
    data, _ = client.get_manifest(_at(repo, current.digest))
    try:
        _, annotations = parse_index(data, f"{repo.name}:{tag}")
    except MalformedManifest as exc:
        raise NetworkError(f"{repo.host}: malformed answer: {exc}") from None
    value = annotations.get(LOCK_EPOCH, "")
    if not value.isdigit():
        return None  # not built by a cannery that records it: nothing says it is newer
    return int(value) if int(value) > lock_epoch else None


def _read_back(client: OCIClient, ref: Reference, digest: str) -> str:
    """Where ``ref`` points after a PUT whose answer was lost: "moved" (at ``digest``),
    "old" (elsewhere, or nowhere) or "unknown" (the registry did not say)."""
    try:
        now = client.head_manifest(ref)
    except NetworkError:
        return "unknown"
    return "moved" if now is not None and now.digest == digest else "old"


def _at(repo: Reference, digest: str) -> Reference:
    """``repo`` by digest alone, so messages do not name a tag the request does not touch."""
    return Reference(repo.host, repo.repository, digest=digest)
