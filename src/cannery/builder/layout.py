"""The OCI image layout output (`build --output oci:DIR`): blobs, the index, the names in
``index.json``."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from cannery.builder.registries import (
    platform_tag,
)
from cannery.errors import InputError
from cannery.oci.manifest import (
    OCI_INDEX,
    OCI_MANIFEST,
    REF_NAME,
    Descriptor,
    digest_of,
    index_bytes,
    platform_string,
)
from cannery.util.fs import atomic_write


def _copy_into_layout(layout: Path, oci_dir: Path) -> Descriptor:
    """Copy a ``dir:`` layout's blobs and manifest into an OCI layout's blob store (a blob the
    ``dir:`` layout lacks must be in the store already: the engine did not export it again)."""
    blobs = oci_dir / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    (oci_dir / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    for f in layout.iterdir():
        dest = blobs / f.name
        if len(f.name) == 64 and not (dest.exists() and dest.stat().st_size == f.stat().st_size):
            tmp = blobs / f".{f.name}.partial"
            shutil.copyfile(f, tmp)
            os.replace(tmp, dest)
    manifest = (layout / "manifest.json").read_bytes()
    parsed = json.loads(manifest)
    for blob in [parsed["config"], *parsed.get("layers", [])]:
        path = blobs / str(blob["digest"]).partition(":")[2]
        if not (path.is_file() and path.stat().st_size == blob["size"]):
            raise InputError(f"{oci_dir}: blob {blob['digest']} is missing")
    digest = digest_of(manifest)
    atomic_write(blobs / digest.partition(":")[2], manifest)
    media = parsed.get("mediaType", OCI_MANIFEST)
    return Descriptor(media_type=media, digest=digest, size=len(manifest))


def _layout_top(top_path: Path) -> dict[str, Any]:
    """The layout's ``index.json`` (a new, empty one when there is none yet)."""
    try:
        top = json.loads(top_path.read_text())
    except FileNotFoundError:
        return {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": []}
    except (OSError, ValueError) as exc:
        raise InputError(f"{top_path}: not an OCI image layout index ({exc})") from None
    if not isinstance(top, dict) or not isinstance(top.get("manifests"), list):
        raise InputError(f"{top_path}: not an OCI image layout index")
    return top


def _write_layout_index(
    oci_dir: Path, children: list[Descriptor], annotations: dict[str, str], tags: tuple[str, ...]
) -> Descriptor:
    body = index_bytes(children, annotations)
    digest = digest_of(body)
    atomic_write(oci_dir / "blobs" / digest.replace(":", "/", 1), body)
    index = Descriptor(media_type=OCI_INDEX, digest=digest, size=len(body))
    _name_in_layout(oci_dir, {tag: {**index.to_json(), "annotations": {REF_NAME: tag}}
                              for tag in tags})
    return index


def _write_layout_platforms(oci_dir: Path, children: list[Descriptor], tag: str) -> None:
    """A layout built for some platforms only (``--platform``): no index and nothing under the
    tag (which never names a partial image), but each platform's manifest is named in
    ``index.json`` by its per-platform tag (``TAG-amd64``, as in a registry), so `cannery
    verify oci:DIR --platform P` and containers/image (``oci:DIR:TAG-amd64``) find it."""
    entries: dict[str, dict[str, object]] = {}
    for child in children:  # the input digest annotation stays, as in an index
        name = platform_tag(tag, platform_string(child.platform) or "")
        entries[name] = {**child.to_json(),
                         "annotations": {**(child.annotations or {}), REF_NAME: name}}
    _name_in_layout(oci_dir, entries)


def _name_in_layout(oci_dir: Path, entries: dict[str, dict[str, object]]) -> None:
    """``index.json`` of the layout with each name of ``entries`` pointing at its entry (an
    earlier entry of that name dropped), written atomically."""
    top_path = oci_dir / "index.json"
    top = _layout_top(top_path)
    top["manifests"] = [
        m for m in top["manifests"]
        if not isinstance(m, dict) or (m.get("annotations") or {}).get(REF_NAME) not in entries
    ] + list(entries.values())
    atomic_write(top_path, json.dumps(top, indent=2) + "\n")
