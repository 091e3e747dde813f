"""``verify --all-registries``: every registry of an image serves what the first one does.

From the index the verified reference serves, it derives what each registry of the catalog
must serve under the same tag: the same platform manifest digests (the bytes are copied, never
rebuilt), and an index of the registry's media type: the same digest where that type is the
reference's, else the digest of the same entries serialized as the other type by
:func:`~cannery.oci.manifest.index_bytes` (an OCI index vs a Docker manifest list). Each
platform's ``TAG-<arch>`` tag must name that platform's manifest (GC protection).
"""

from __future__ import annotations

from cannery.builder.registries import platform_tag
from cannery.errors import FatalError
from cannery.oci import OCIClient, Reference
from cannery.oci.manifest import (
    DOCKER_LIST,
    INDEX_TYPES,
    OCI_INDEX,
    MalformedManifest,
    digest_of,
    index_bytes,
    parse_index,
    platform_string,
)
from cannery.plan import ImageSpec
from cannery.verify.model import Check


def registry_parity_checks(client: OCIClient, ref: Reference, spec: ImageSpec) -> list[Check]:
    tag = ref.tag or spec.tag
    body, desc = client.get_manifest(ref)
    if desc.media_type not in INDEX_TYPES:
        return [Check("registries", False, f"{ref} is not an index ({desc.media_type})")]
    try:
        children, annotations = parse_index(body, str(ref))
    except MalformedManifest as exc:
        return [Check("registries", False, str(exc))]
    expected = {
        OCI_INDEX: digest_of(index_bytes(children, annotations, OCI_INDEX)),
        DOCKER_LIST: digest_of(index_bytes(children, annotations, DOCKER_LIST)),
    }
    expected[desc.media_type] = desc.digest  # what the reference serves is the reference
    platforms = {platform_string(c.platform) or "": c.digest for c in children}
    checks = []
    for target in spec.registries:
        repo = Reference.parse(target.repository)
        name = f"registry {target.name}"
        want_type = DOCKER_LIST if target.media_types == "docker" else OCI_INDEX
        try:
            checks.append(_one(client, repo.with_tag(tag), want_type, expected, platforms, name))
        except FatalError as exc:
            checks.append(Check(name, False, exc.message))
    return checks


def _one(
    client: OCIClient,
    ref: Reference,
    want_type: str,
    expected: dict[str, str],
    platforms: dict[str, str],
    name: str,
) -> Check:
    found = client.head_manifest(ref)
    if found is None:
        return Check(name, False, f"{ref}: no such tag")
    body, desc = client.get_manifest(ref.with_digest(found.digest))
    if desc.media_type != want_type:
        return Check(name, False, f"{ref}: serves {desc.media_type}, catalog says {want_type}")
    if desc.digest != expected[want_type]:
        return Check(name, False, f"{ref}: serves {desc.digest}, expected {expected[want_type]}")
    children, _ = parse_index(body, str(ref))
    got = {platform_string(c.platform) or "": c.digest for c in children}
    if got != platforms:
        return Check(name, False, f"{ref}: platform digests differ from the first registry's")
    for platform, digest in platforms.items():
        arch_tag = platform_tag(str(ref.tag), platform)
        leg = client.head_manifest(ref.with_tag(arch_tag))
        if leg is None or leg.digest != digest:
            return Check(name, False, f"{ref.name}:{arch_tag} does not name {digest}")
    return Check(name, True, f"{ref}@{desc.digest}")
