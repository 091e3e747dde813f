"""`cannery verify oci:DIR`: the registry checks, read from an OCI image layout on disk instead
of a registry (what `cannery build --output oci:DIR` writes: a pull request's build pushes
nothing, and is verified on its runner).

:class:`Layout` answers the two reads :func:`cannery.verify.registry.registry_checks` makes of a
registry (a manifest by digest, a platform's manifest and config), each blob checked against
its digest and parsed by :mod:`cannery.oci.manifest`, so a layout and a registry are judged by
the same checks."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from cannery.builder.registries import platform_tag
from cannery.errors import InputError
from cannery.oci import Reference
from cannery.oci.client import CONFIG_CAP, MANIFEST_CAP  # a layout is read as a registry is
from cannery.oci.manifest import (
    IMAGE_TYPES,
    INDEX_TYPES,
    OCI_INDEX,
    REF_NAME,
    Descriptor,
    MalformedManifest,
    digest_of,
    index_bytes,
    load_object,
    matches,
    parse_config,
    parse_index,
    parse_manifest,
)
from cannery.oci.reference import valid_digest
from cannery.util.bounded import read_regular_file

# A name for the layout where registry_checks wants a repository (it appears in messages only).
LAYOUT_REF = Reference("localhost", "oci-layout")


class Layout:
    def __init__(self, root: Path) -> None:
        self.root = root

    def _blob(self, digest: str, cap: int) -> bytes:
        if not valid_digest(digest):
            raise InputError(f"{self.root}: {digest!r} is not a digest")
        algo, _, hexd = digest.partition(":")
        path = self.root / "blobs" / algo / hexd
        try:
            data = read_regular_file(path, limit=cap)
        except OSError as exc:
            raise InputError(f"{self.root}: blob {digest} cannot be read ({exc.strerror})") \
                from None
        if not matches(data, digest):
            raise InputError(f"{path}: its bytes do not hash to {digest}")
        return data

    def get_manifest(self, ref: Reference) -> tuple[bytes, Descriptor]:
        assert ref.digest is not None
        body = self._blob(ref.digest, MANIFEST_CAP)
        try:
            media = load_object(body, f"{self.root} {ref.digest}").get("mediaType")
        except MalformedManifest as exc:
            raise InputError(str(exc)) from None
        if not isinstance(media, str) or media not in (*INDEX_TYPES, *IMAGE_TYPES):
            raise InputError(f"{self.root}: {ref.digest} is not a manifest or an index")
        return body, Descriptor(media, ref.digest, len(body))

    def fetch_blob(self, ref: Reference, digest: str, dest: Path, size: int | None = None) -> int:
        """Copy a blob (a layer) to ``dest``, hashed as it is read: as the registry client's
        fetch_blob, it lands only when its bytes match ``digest`` (and ``size``, when given)."""
        import hashlib
        import shutil

        if not valid_digest(digest):
            raise InputError(f"{self.root}: {digest!r} is not a digest")
        algo, _, hexd = digest.partition(":")
        path = self.root / "blobs" / algo / hexd
        hasher = hashlib.new(algo)
        part = dest.with_name(dest.name + ".part")
        total = 0
        try:
            with path.open("rb") as src, part.open("wb") as out:
                while chunk := src.read(1 << 20):
                    hasher.update(chunk)
                    out.write(chunk)
                    total += len(chunk)
        except OSError as exc:
            part.unlink(missing_ok=True)
            raise InputError(f"{self.root}: blob {digest} cannot be read ({exc.strerror})") \
                from None
        if f"{algo}:{hasher.hexdigest()}" != digest or (size is not None and total != size):
            part.unlink(missing_ok=True)
            raise InputError(f"{path}: its bytes do not hash to {digest}")
        shutil.move(part, dest)
        return total

    def image_config(self, ref: Reference) -> tuple[Descriptor, dict[str, object]]:
        body, desc = self.get_manifest(ref)
        try:
            config, _ = parse_manifest(body, f"{self.root} {ref.digest}")
            cfg, platform = parse_config(
                self._blob(config.digest, CONFIG_CAP), f"{self.root} {config.digest} (config)"
            )
        except MalformedManifest as exc:
            raise InputError(str(exc)) from None
        return replace(desc, platform=platform), cfg

    def named(self, tag: str, platforms: list[str] | None) -> tuple[bytes, Descriptor]:
        """The index the checks read: what ``tag``
        names in ``index.json`` (a build of every platform); with ``platforms``, the platform
        manifests their per-platform tags name (``TAG-amd64``: a build of some platforms,
        `--platform`), in an index made here, so the same checks read both."""
        top_path = self.root / "index.json"
        try:
            raw = read_regular_file(top_path, limit=MANIFEST_CAP)
            entries, _ = parse_index(raw, str(top_path))
        except OSError as exc:
            raise InputError(f"{top_path}: cannot be read ({exc.strerror}); build into it "
                             "with `cannery build --output oci:DIR`") from None
        except MalformedManifest as exc:
            raise InputError(str(exc)) from None
        by_name = {(e.annotations or {}).get(REF_NAME): e for e in entries}  # newest wins
        if not platforms:
            top = by_name.get(tag)
            if top is None or top.media_type not in INDEX_TYPES:
                raise InputError(f"{top_path}: no index is named {tag!r} (a build of some "
                                 "platforms only: give them with --platform)")
            return self.get_manifest(LAYOUT_REF.with_digest(top.digest))
        children = []
        for p in platforms:
            entry = by_name.get(platform_tag(tag, p))
            if entry is None or entry.media_type not in IMAGE_TYPES:
                raise InputError(f"{top_path}: no {p} image is named {platform_tag(tag, p)!r}")
            annotations = {k: v for k, v in (entry.annotations or {}).items() if k != REF_NAME}
            children.append(replace(entry, annotations=annotations or None))
        body = index_bytes(children)
        return body, Descriptor(OCI_INDEX, digest_of(body), len(body))
