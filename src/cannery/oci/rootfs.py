"""A file of an image's root filesystem, read from its layers in the registry: today the
base image's /etc/os-release, which says what OS (and so what package manager) it is.

Layers are read bottom up, each checked against its digest as it is written to a temporary
file, then scanned as one tar stream (nothing is unpacked); the scan stops at the first layer
that has the file. The OS is laid down by the first layers, and a CANN base's later ones are
its gigabytes of toolkit, so at most ``MAX_LAYERS`` layers are read.
"""

from __future__ import annotations

import posixpath
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cannery.oci.client import OCIClient
from cannery.oci.layers import READABLE, layer_tar
from cannery.oci.manifest import (
    INDEX_TYPES,
    MalformedManifest,
    parse_index,
    parse_manifest,
    platform_string,
)
from cannery.oci.reference import Reference

OS_RELEASE = ("etc/os-release", "usr/lib/os-release")
MAX_LAYERS = 3
# The package managers a base can install with, by the program's path (any file type: dnf is a
# link to dnf-3 on Fedora; /bin and /sbin may be links into /usr).
MANAGERS = {
    "usr/bin/apt-get": "apt", "bin/apt-get": "apt",
    "usr/bin/dnf": "dnf", "bin/dnf": "dnf",
    "usr/bin/yum": "yum", "bin/yum": "yum",
    "usr/bin/microdnf": "microdnf", "bin/microdnf": "microdnf",
    "sbin/apk": "apk", "usr/sbin/apk": "apk",
}


@dataclass(frozen=True)
class BaseOs:
    """What a base's first layers say about its OS: os-release's ID and VERSION_ID, and the
    package managers found in the layer that has it (and those below it)."""

    id: str
    version: str
    managers: tuple[str, ...]

def parse_os_release(text: str) -> tuple[str, str] | None:
    """(ID, VERSION_ID) of an os-release file, unquoted; None without an ID."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip()] = value.strip().strip("\"'")
    if not fields.get("ID"):
        return None
    return fields["ID"], fields.get("VERSION_ID", "")


def _scan(path: Path, media_type: str, managers: set[str]) -> str | None:
    """The text of the first os-release file in the layer at ``path`` (a symlink followed
    within the same layer), or None; the package managers the layer holds are added to
    ``managers``."""
    found: dict[str, bytes] = {}
    links: dict[str, str] = {}
    with layer_tar(path, media_type) as (tar, _):
        for member in tar:
            name = member.name.removeprefix("./").strip("/")
            if name in MANAGERS:
                managers.add(MANAGERS[name])
            if name not in OS_RELEASE:
                continue
            if member.isreg() and member.size <= 1 << 16:
                data = tar.extractfile(member)
                found[name] = data.read() if data else b""
            elif member.issym():
                target = member.linkname
                links[name] = posixpath.normpath(
                    target.lstrip("/") if target.startswith("/")
                    else posixpath.join(posixpath.dirname(name), target))
    return _resolved(found, links)


def _resolved(found: dict[str, bytes], links: dict[str, str]) -> str | None:
    """/etc/os-release's text if what was read settles it (else /usr/lib/os-release's, which
    systemd reads when /etc has none), following a link to the other."""
    etc, usr = OS_RELEASE
    if etc in found:
        return found[etc].decode("utf-8", "replace")
    if etc in links:
        target = links[etc]
        return found[target].decode("utf-8", "replace") if target in found else None
    return found[usr].decode("utf-8", "replace") if usr in found else None


def read_os_release(client: OCIClient, image: str, digest: str,
                    platform: str = "linux/amd64") -> BaseOs | None:
    """``image@digest``'s os-release and package managers, for ``platform`` when it is an
    index; None when none of its first layers has an os-release (or they are zstd)."""
    repo = Reference.parse(image)
    ref = repo.with_digest(digest)
    body, desc = client.get_manifest(ref)
    if desc.media_type in INDEX_TYPES:
        children, _ = parse_index(body, str(ref))
        chosen = next((c for c in children if platform_string(c.platform) == platform), None)
        chosen = chosen or next((c for c in children
                                 if (platform_string(c.platform) or "").startswith("linux/")),
                                None)
        if chosen is None:
            return None
        body, _ = client.get_manifest(ref.with_digest(chosen.digest))
    try:
        _, layers = parse_manifest(body, str(ref))
    except MalformedManifest:
        return None
    managers: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="cannery-os-") as tmp:
        blob = Path(tmp) / "layer"
        for layer in layers[:MAX_LAYERS]:
            if layer.media_type not in READABLE:
                return None
            client.fetch_blob(ref, layer.digest, blob, layer.size)
            try:
                text = _scan(blob, layer.media_type, managers)
            except (OSError, EOFError, tarfile.TarError):
                return None
            finally:
                blob.unlink(missing_ok=True)
            if text is not None:
                found = parse_os_release(text)
                return BaseOs(found[0], found[1], tuple(sorted(managers))) if found else None
    return None
