"""cannery host-check: will these images run on this node? Each image's config is read from
its registry (a manifest and a config blob, never a layer) and its labels compared with the
node's NPU driver, firmware and chip. Exit 1 when one cannot run; 2 when the node has no
driver or an image cannot be read."""

from __future__ import annotations

import json
import platform as platform_mod
from pathlib import Path

from cannery.catalog.platforms import UNAME_ARCH
from cannery.commands.common import out
from cannery.errors import InputError
from cannery.oci import Credentials, OCIClient, Reference
from cannery.oci.auth import push_host
from cannery.oci.client import NotFound
from cannery.oci.manifest import MalformedManifest, parse_index, platform_string
from cannery.tls import ssl_context
from cannery.verify.host import Verdict, judge, read_host

INDEX_TYPES = ("application/vnd.oci.image.index.v1+json",
               "application/vnd.docker.distribution.manifest.list.v2+json")


def host_platform() -> str:
    """linux/<arch> of the machine this runs on (x86_64 → linux/amd64)."""
    machine = platform_mod.machine().lower()
    arch = {v: k for k, v in UNAME_ARCH.items()}.get(machine, machine)
    return f"linux/{arch}"


def _same(platform: str | None, want: str) -> bool:
    """linux/arm64/v8 is linux/arm64 (the one variant spelled out in practice)."""
    return platform is not None and platform.removesuffix("/v8") == want.removesuffix("/v8")


def read_labels(client: OCIClient, ref: Reference, want: str) -> dict[str, str]:
    """The labels of ``ref``'s image for platform ``want`` (through its index, if it has one);
    an image of another platform is exit 2, never judged as if it ran here."""
    body, desc = client.get_manifest(ref)
    target = ref
    if desc.media_type in INDEX_TYPES:
        children, _ = parse_index(body, str(ref))
        found = [c for c in children if _same(platform_string(c.platform), want)]
        if not found:
            have = sorted({p for c in children if (p := platform_string(c.platform))})
            raise InputError(f"{ref}: no {want} image in its index (it has "
                             f"{', '.join(have) or 'none'}; give --platform)")
        target = ref.with_digest(found[0].digest)
    found_desc, config = client.image_config(target)
    built_for = platform_string(found_desc.platform)
    if not _same(built_for, want):
        raise InputError(f"{ref}: an image for {built_for}, not {want} (give --platform)")
    cfg = config.get("config") or {}
    labels = cfg.get("Labels") if isinstance(cfg, dict) else None
    return {str(k): str(v) for k, v in (labels or {}).items()}


def host_check_cmd(
    images: list[str],
    root: Path | None,
    chip: str | None,
    platform: str | None,
    ca_cert: Path | None,
    as_json: bool,
) -> int:
    host = read_host(root, chip)  # no driver: exit 2 before any registry is asked
    want = platform or host_platform()
    refs = []
    for image in images:
        try:
            refs.append(Reference.parse(image))
        except ValueError as exc:
            raise InputError(f"{image}: {exc}") from None
    verdicts: list[Verdict] = []
    creds = Credentials(env_host=push_host([str(r) for r in refs]))
    with OCIClient(ssl_context(ca_cert), credentials=creds) as client:
        for image, ref in zip(images, refs, strict=True):
            try:
                labels = read_labels(client, ref, want)
            except NotFound:
                raise InputError(f"{image}: not found in its registry") from None
            except MalformedManifest as exc:
                raise InputError(f"{image}: {exc}") from None
            verdicts.append(judge(image, labels, host))
    if as_json:
        facts = {"driver": host.driver.value,
                 "firmware": host.firmware.value if host.firmware else None,
                 "chip": host.chip.value if host.chip else None, "platform": want}
        out.print_json(json.dumps({"host": facts, "images": [v.as_json() for v in verdicts]}))
    else:
        for v in verdicts:
            out.print(v.line(), markup=False)
    return 0 if all(v.runs for v in verdicts) else 1
