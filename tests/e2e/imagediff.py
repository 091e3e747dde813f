"""What differs between two pushed images of the same repository: config keys and layer files.
Used to say *why* two builds of the same lock are not byte-identical."""

from __future__ import annotations

import difflib
import hashlib
import io
import json
import tarfile

import httpx

ACCEPT = ", ".join(
    [
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
    ]
)


def _files(blob: bytes) -> dict[str, tuple[object, ...]]:
    out: dict[str, tuple[object, ...]] = {}
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:*") as tar:
        for info in tar:
            f = tar.extractfile(info) if info.isfile() else None
            data = f.read() if f else b""
            out[info.name] = (info.type, info.mode, info.uid, info.mtime, info.linkname,
                              hashlib.sha256(data).hexdigest()[:12], len(data))
    return out


def describe_across(client: httpx.Client, base_a: str, a: str, base_b: str, b: str) -> str:
    """``base_*`` is ``https://host/v2/repo``; ``a``/``b`` manifest digests in them."""
    ma = client.get(f"{base_a}/manifests/{a}", headers={"Accept": ACCEPT}).json()
    mb = client.get(f"{base_b}/manifests/{b}", headers={"Accept": ACCEPT}).json()
    lines = []
    ca = json.dumps(client.get(f"{base_a}/blobs/{ma['config']['digest']}").json(), indent=1,
                    sort_keys=True).splitlines()
    cb = json.dumps(client.get(f"{base_b}/blobs/{mb['config']['digest']}").json(), indent=1,
                    sort_keys=True).splitlines()
    lines += [d for d in difflib.unified_diff(ca, cb, "config a", "config b", lineterm="", n=0)]
    for n, (la, lb) in enumerate(zip(ma["layers"], mb["layers"], strict=False)):
        if la["digest"] == lb["digest"]:
            continue
        fa = _files(client.get(f"{base_a}/blobs/{la['digest']}").content)
        fb = _files(client.get(f"{base_b}/blobs/{lb['digest']}").content)
        lines.append(f"layer {n}: {la['digest'][:19]} != {lb['digest'][:19]}")
        for name in sorted(set(fa) | set(fb)):
            if fa.get(name) != fb.get(name):
                lines.append(f"  {name}: {fa.get(name)} != {fb.get(name)}")
    return "\n".join(lines[:80])
