"""The one owner of OCI and Docker manifest concepts: media types, descriptors, digests,
platforms, and the canonical bytes of an image index.

Everything that writes or reads an index goes through here, so equal inputs give equal bytes
(and so equal digests) whichever command wrote them, and a malformed answer from a registry is
refused with the field it lacks rather than a crash.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cannery.oci.reference import valid_digest

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)
IMAGE_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST)
# The annotation an OCI image layout's index.json names an entry by (its tag).
REF_NAME = "org.opencontainers.image.ref.name"
# What a manifest GET or HEAD accepts, indexes first (a tag of a multi-arch image).
MANIFEST_TYPES = ", ".join([OCI_INDEX, DOCKER_LIST, OCI_MANIFEST, DOCKER_MANIFEST])


class MalformedManifest(ValueError):
    """A manifest, index or descriptor that lacks a field or has one of the wrong type; the
    message names the field."""


def load_json(data: bytes | str) -> Any:  # as json.loads
    """``json.loads`` for bytes from a registry or an attestation: nesting too deep for the
    parser (``[[[[…``, a RecursionError) is a ValueError like any other malformed JSON."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def digest_of(data: bytes, algorithm: str = "sha256") -> str:
    return f"{algorithm}:{hashlib.new(algorithm, data).hexdigest()}"


def matches(data: bytes, digest: str) -> bool:
    """Does ``data`` hash to ``digest``? Only sha256 and sha512 are accepted."""
    algorithm = digest.partition(":")[0]
    return algorithm in ("sha256", "sha512") and digest_of(data, algorithm) == digest


def platform_string(platform: Mapping[str, str] | None) -> str | None:
    """``os/architecture[/variant]``, or None when os or architecture is missing."""
    p = platform or {}
    if not p.get("os") or not p.get("architecture"):
        return None
    return "/".join(x for x in (p["os"], p["architecture"], p.get("variant", "")) if x)


def platform_dict(platform: str) -> dict[str, str]:
    """``linux/arm64/v8`` → ``{"os": "linux", "architecture": "arm64", "variant": "v8"}``."""
    os_, _, rest = platform.partition("/")
    arch, _, variant = rest.partition("/")
    out = {"os": os_, "architecture": arch}
    if variant:
        out["variant"] = variant
    return out


def platform_key(platform: Mapping[str, str] | None) -> tuple[str, str, str]:
    """The sort key of an index entry: os, architecture, variant."""
    p = platform or {}
    return (p.get("os", ""), p.get("architecture", ""), p.get("variant", ""))


@dataclass(frozen=True)
class Descriptor:
    media_type: str
    digest: str
    size: int
    platform: dict[str, str] | None = None
    annotations: dict[str, str] | None = None

    def to_json(self) -> dict[str, object]:
        """The OCI descriptor, keys in a fixed order (so the bytes, and digests, are stable)."""
        out: dict[str, object] = {
            "mediaType": self.media_type,
            "digest": self.digest,
            "size": self.size,
        }
        if self.platform:
            first = [k for k in ("architecture", "os", "variant") if k in self.platform]
            rest = sorted(k for k in self.platform if k not in first)
            out["platform"] = {k: self.platform[k] for k in first + rest}
        if self.annotations:
            out["annotations"] = dict(sorted(self.annotations.items()))
        return out

    @classmethod
    def from_json(cls, data: object, where: str = "descriptor") -> Descriptor:
        """A descriptor read from JSON, strictly: ``mediaType`` a string, ``digest`` a valid
        sha256/sha512 digest, ``size`` a non-negative integer, ``platform`` and
        ``annotations`` objects of strings. Raises :class:`MalformedManifest` naming the field."""
        if not isinstance(data, dict):
            raise MalformedManifest(f"{where}: not a JSON object")
        media_type, digest, size = data.get("mediaType"), data.get("digest"), data.get("size")
        if not isinstance(media_type, str) or not media_type:
            raise MalformedManifest(f"{where}.mediaType: missing or not a string")
        if not isinstance(digest, str) or not valid_digest(digest):
            raise MalformedManifest(f"{where}.digest: missing or not a valid digest")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise MalformedManifest(f"{where}.size: missing or not a non-negative integer")
        return cls(
            media_type,
            digest,
            size,
            _strings(data.get("platform"), f"{where}.platform"),
            _strings(data.get("annotations"), f"{where}.annotations"),
        )


def _strings(value: object, where: str) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise MalformedManifest(f"{where}: not an object of strings")
    return dict(value)


def index_bytes(
    children: Iterable[Descriptor],
    annotations: Mapping[str, str] | None = None,
    media_type: str = OCI_INDEX,
) -> bytes:
    """The canonical bytes of an image index: children sorted by platform, keys in a fixed
    order, compact separators. No tag or registry name is in it, so every tag and every
    registry of one build serve one digest."""
    ordered = sorted(children, key=lambda c: platform_key(c.platform))
    index: dict[str, object] = {
        "schemaVersion": 2,
        "mediaType": media_type,
        "manifests": [c.to_json() for c in ordered],
    }
    if annotations:
        index["annotations"] = dict(sorted(annotations.items()))
    return json.dumps(index, separators=(",", ":"), ensure_ascii=False).encode()


def parse_index(body: bytes, where: str) -> tuple[list[Descriptor], dict[str, str]]:
    """The entries and annotations of an image index or manifest list, strictly."""
    data = load_object(body, where)
    entries = data.get("manifests")
    if not isinstance(entries, list):
        raise MalformedManifest(f"{where}.manifests: missing or not a list")
    children = [Descriptor.from_json(e, f"{where}.manifests[{n}]") for n, e in enumerate(entries)]
    return children, _strings(data.get("annotations"), f"{where}.annotations") or {}


def load_object(body: bytes, where: str) -> dict[str, Any]:
    """A JSON object from a registry or an attestation, strictly: anything else (not JSON,
    nested too deeply, not an object) is :class:`MalformedManifest` naming ``where``."""
    try:
        data = load_json(body)
    except ValueError:
        raise MalformedManifest(f"{where}: not JSON") from None
    if not isinstance(data, dict):
        raise MalformedManifest(f"{where}: not a JSON object")
    return data


def parse_manifest(body: bytes, where: str) -> tuple[Descriptor, list[Descriptor]]:
    """The config and layer descriptors of an image manifest, strictly."""
    data = load_object(body, where)
    config = Descriptor.from_json(data.get("config"), f"{where}.config")
    layers = data.get("layers")
    if not isinstance(layers, list):
        raise MalformedManifest(f"{where}.layers: missing or not a list")
    return config, [Descriptor.from_json(e, f"{where}.layers[{n}]") for n, e in enumerate(layers)]


def parse_config(body: bytes, where: str) -> tuple[dict[str, object], dict[str, str]]:
    """An image config, strictly where cannery reads it (``os``, ``architecture``,
    ``variant``, ``config.Env``, ``config.Labels``, ``history``), and the platform it names."""
    data = load_object(body, where)
    platform: dict[str, str] = {}
    for key in ("architecture", "os", "variant"):
        value = data.get(key)
        if value is None and key == "variant":
            continue
        if not isinstance(value, str) or not value:
            raise MalformedManifest(f"{where}.{key}: missing or not a string")
        platform[key] = value
    cfg = data.get("config")
    if cfg is not None:
        if not isinstance(cfg, dict):
            raise MalformedManifest(f"{where}.config: not a JSON object")
        env = cfg.get("Env")
        if env is not None and not (isinstance(env, list) and all(isinstance(e, str) for e in env)):
            raise MalformedManifest(f"{where}.config.Env: not a list of strings")
        _strings(cfg.get("Labels"), f"{where}.config.Labels")
    history = data.get("history")
    if history is not None and not (
        isinstance(history, list) and all(isinstance(h, dict) for h in history)
    ):
        raise MalformedManifest(f"{where}.history: not a list of objects")
    return data, platform
