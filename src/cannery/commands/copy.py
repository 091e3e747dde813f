"""cannery copy SRC DST…: every platform of an image (and its referrers) to other registries,
by digest; then the tag, last, in each target."""

from __future__ import annotations

import json
from pathlib import Path

from cannery.commands.common import err, out
from cannery.errors import InputError
from cannery.oci import Credentials, OCIClient, Reference
from cannery.oci.auth import push_host
from cannery.oci.mirror import Mirror
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


def copy_cmd(
    src_text: str,
    dst_texts: list[str],
    docker_media_types: bool,
    ca_cert: Path | None,
    as_json: bool,
) -> int:
    src, _ = _parse(src_text, "SRC")
    targets = []
    for text in dst_texts:
        dst, explicit = _parse(text, "DST")
        if dst.digest and not src.digest:
            raise InputError(f"DST {text}: give a repository or a tag; the digest is the source's")
        tag = dst.tag if explicit else src.tag  # no tag given: the source's (if any)
        targets.append((Reference(dst.host, dst.repository, tag=tag), text))
    creds = Credentials(env_host=push_host([str(t) for t, _ in targets]))
    results = []
    with OCIClient(ssl_context(ca_cert), credentials=creds) as client:
        for dst, _text in targets:
            mirror = Mirror(client, progress=lambda line: err.print(f"  {line}", markup=False))
            desc = mirror.copy(src, dst, docker=docker_media_types)
            tagged = False
            if dst.tag:
                current = client.head_manifest(dst)
                if current is None or current.digest != desc.digest:
                    body, _ = client.get_manifest(dst.with_digest(desc.digest))
                    mirror.put(dst, body, desc.media_type)
                    tagged = True
            shown = f"{dst.name}:{dst.tag}" if dst.tag else dst.name
            results.append((shown, desc.digest, tagged, mirror.stats))
            if not as_json:
                note = "tag moved" if tagged else ("tag already there" if dst.tag else "no tag")
                out.print(f"{shown}@{desc.digest} ({note})", markup=False)
                out.print(f"  {mirror.stats.summary()}", markup=False)
                for line in mirror.stats.notes:
                    out.print(f"  note: {line}", markup=False)
    if as_json:
        out.print_json(
            json.dumps(
                {
                    "source": str(src),
                    "targets": [
                        {"target": t, "digest": d, "tag_moved": m, **s.to_json()}
                        for t, d, m, s in results
                    ],
                }
            )
        )
    return 0
