"""cannery copy SRC DST…: every platform of an image (and its referrers) to other registries,
by digest; then the tag, last, in each target.

The publish path's guarantees (``oci/publish.py``, ``builder/registries.py``), for any image:

- SRC is read once: every target gets the bytes of that one read, by digest, so a tag that
  moves while the copy runs cannot give two targets two images.
- No tag moves until every target holds the whole image by digest.
- Tags move through :func:`~cannery.oci.publish.move_tags`, the build's own: a target tag on
  an index built from a newer lock (``io.cannery.lock-epoch`` newer than SRC's) is not moved
  back (exit 2, unless ``--force``). Every target tag is checked before anything is copied,
  so such a refusal writes nothing anywhere. An SRC that carries no lock epoch (not a cannery
  index) is not compared, as a build's would not be.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cannery.commands.common import err, out
from cannery.errors import FatalError, InputError, NetworkError
from cannery.oci import Credentials, OCIClient, Reference
from cannery.oci.auth import push_host
from cannery.oci.manifest import INDEX_TYPES, Descriptor, MalformedManifest, parse_index
from cannery.oci.mirror import CopyStats, Mirror
from cannery.oci.publish import LOCK_EPOCH, backwards, move_tags
from cannery.tls import ssl_context


def _parse(text: str, what: str) -> tuple[Reference, bool]:
    """The reference, and whether it names a tag itself (``latest`` is not implied)."""
    try:
        ref = Reference.parse(text)
    except ValueError as exc:
        raise InputError(f"{what} {text}: {exc}") from None
    name = text.partition("@")[0]
    explicit = ":" in name.rpartition("/")[2]
    return ref, explicit


def lock_epoch(src: Reference, body: bytes, desc: Descriptor) -> int | None:
    """The ``io.cannery.lock-epoch`` of SRC's index (None: not an index, or none recorded)."""
    if desc.media_type not in INDEX_TYPES:
        return None
    try:
        _, annotations = parse_index(body, f"{src.name}@{desc.digest}")
    except MalformedManifest as exc:
        raise NetworkError(f"{src.host}: malformed answer: {exc}") from None
    value = annotations.get(LOCK_EPOCH, "")
    return int(value) if value.isdigit() else None


def copy_cmd(
    src_text: str,
    dst_texts: list[str],
    docker_media_types: bool,
    ca_cert: Path | None,
    as_json: bool,
    force: bool = False,
) -> int:
    src, _ = _parse(src_text, "SRC")
    targets = []
    for text in dst_texts:
        dst, explicit = _parse(text, "DST")
        if dst.digest and not src.digest:
            raise InputError(f"DST {text}: give a repository or a tag; the digest is the source's")
        tag = dst.tag if explicit else src.tag  # no tag given: the source's (if any)
        targets.append(Reference(dst.host, dst.repository, tag=tag))
    creds = Credentials(env_host=push_host([str(t) for t in targets]))
    results: list[_Result] = []
    with OCIClient(ssl_context(ca_cert), credentials=creds) as client:
        # The one read of SRC: from here on it is its digest (and these bytes), everywhere.
        body, desc = client.get_manifest(src)
        pinned = Reference(src.host, src.repository, digest=desc.digest)
        epoch = lock_epoch(src, body, desc)
        if not force:
            for dst in targets:
                refused = backwards(client, dst, desc.digest, [dst.tag] if dst.tag else [], epoch)
                if refused is not None:
                    raise InputError(f"{refused}; nothing copied, no tag moved")
        placed = []
        for dst in targets:
            mirror = Mirror(client, progress=lambda line: err.print(f"  {line}", markup=False))
            got = mirror.copy_manifest(pinned, dst, body, desc, docker=docker_media_types)
            placed.append((dst, got, mirror.stats))
        for n, (dst, got, stats) in enumerate(placed):
            moved = False
            if dst.tag:
                moves = move_tags(client, dst, got, [dst.tag], lock_epoch=epoch, force=force)
                if moves.error:
                    _report(results, as_json, src)
                    raise _stopped(moves.error, moves.exit_code, [d for d, _, _ in placed], n)
                moved = bool(moves.moved)
            results.append(_Result(dst, got.digest, moved, stats))
    _report(results, as_json, src)
    return 0


@dataclass
class _Result:
    target: Reference
    digest: str
    tag_moved: bool
    stats: CopyStats

    @property
    def shown(self) -> str:
        return f"{self.target.name}:{self.target.tag}" if self.target.tag else self.target.name


def _stopped(error: str, exit_code: int, targets: list[Reference], n: int) -> FatalError:
    """The first tag that did not move stops the rest: one line naming the targets whose tag
    is on the copy (moved, or there already) and those whose tag is not."""
    def tags(refs: list[Reference]) -> str:
        return ", ".join(f"{r.name}:{r.tag}" for r in refs if r.tag) or "none"

    exc = FatalError(
        f"{error} (the tag is on the copy in: {tags(targets[:n])}; not in: {tags(targets[n:])})"
    )
    exc.exit_code = exit_code
    return exc


def _report(results: list[_Result], as_json: bool, src: Reference) -> None:
    if as_json:
        out.print_json(
            json.dumps(
                {
                    "source": str(src),
                    "targets": [
                        {"target": r.shown, "digest": r.digest, "tag_moved": r.tag_moved,
                         **r.stats.to_json()}
                        for r in results
                    ],
                }
            )
        )
        return
    for r in results:
        note = "tag moved" if r.tag_moved else (
            "tag already there" if r.target.tag else "no tag"
        )
        out.print(f"{r.shown}@{r.digest} ({note})", markup=False)
        out.print(f"  {r.stats.summary()}", markup=False)
        for line in r.stats.notes:
            out.print(f"  note: {line}", markup=False)
