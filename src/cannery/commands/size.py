"""cannery size REF: per platform, each layer with the catalog step that made it, its
compressed and uncompressed size, its biggest paths and the bytes a later layer wastes of it;
then the image's size budget. Exit 1 when over budget."""

from __future__ import annotations

import json
from pathlib import Path

from cannery.builder.registries import registry_hosts
from cannery.commands.common import load_with_lock, out, select, spec_for_reference
from cannery.errors import InputError
from cannery.oci import Credentials, OCIClient, Reference
from cannery.oci.manifest import INDEX_TYPES, parse_index, platform_string
from cannery.plan import ImageSpec, plan
from cannery.render.dockerfile import render_dockerfile
from cannery.tls import ssl_context
from cannery.util.sizes import human_size
from cannery.verify.model import Check
from cannery.verify.size import PlatformSize, budget_checks, layer_steps, platform_size


def _catalog_image(ref: Reference, catalog: Path | None, lock: Path | None,
                   image: str | None, quiet: bool) -> ImageSpec | None:
    """The catalog image ``ref`` is (``--image``, else by repository and tag), or None when
    no image of the catalog is it: its layers are then named from the image's history."""
    loaded, lk, _ = load_with_lock(catalog, lock, quiet=quiet)
    specs = plan(loaded.catalog, lk, select(loaded, [image] if image else None))
    if image:
        return specs[0]
    try:
        return spec_for_reference(ref, specs)
    except InputError:
        return None


def _table(size: PlatformSize) -> list[str]:
    files = f" of {human_size(size.file_bytes)} of files" if size.read else ""
    wasted = (f", {human_size(size.wasted)} wasted ({size.wasted_share:.1%}{files})"
              if size.read else "")
    lines = [f"{size.platform}: {len(size.layers)} layers, {human_size(size.compressed)} "
             f"compressed{wasted}"]
    lines.append(f"  {'layer':>5}  {'compressed':>10}  {'uncompressed':>12}  {'wasted':>9}  "
                 f"{'step':<40}  biggest paths")
    for la in size.layers:
        unc = human_size(la.uncompressed) if la.uncompressed is not None else "–"
        waste = human_size(la.wasted) if size.read else "–"
        paths = ", ".join(f"{p} ({human_size(n)})" for p, n in la.biggest)
        step = la.step if len(la.step) <= 40 else la.step[:39] + "…"  # (--json: whole)
        lines.append(f"  {la.index:>5}  {human_size(la.compressed):>10}  {unc:>12}  "
                     f"{waste:>9}  {step:<40}  {paths}".rstrip())
    return lines


def size_cmd(ref_text: str, catalog: Path | None, lock: Path | None, image: str | None,
             platforms: list[str] | None, top: int, as_json: bool,
             ca_cert: Path | None) -> int:
    try:
        ref = Reference.parse(ref_text)
    except ValueError as exc:
        raise InputError(f"{ref_text}: not an image reference: {exc}") from None
    spec = _catalog_image(ref, catalog, lock, image, as_json)
    steps = layer_steps(render_dockerfile(spec)) if spec is not None else None
    sizes: list[PlatformSize] = []
    checks: list[Check] = []
    # the catalog's per-registry credential variables too, as verify reads them
    creds = Credentials(env_host=ref.host,
                        registries=registry_hosts([spec]) if spec is not None else None)
    with OCIClient(ssl_context(ca_cert), credentials=creds) as client:
        body, desc = client.get_manifest(ref)
        repo = Reference(ref.host, ref.repository)
        if desc.media_type in INDEX_TYPES:
            children, _ = parse_index(body, str(ref))
            wanted = [(p, c.digest) for c in children
                      if (p := platform_string(c.platform)) and p != "unknown/unknown"]
        else:
            wanted = [("", desc.digest)]
        for platform, digest in wanted:
            if platform and platforms and platform not in platforms:
                continue
            manifest, _ = client.get_manifest(repo.with_digest(digest))
            found, config = client.image_config(repo.with_digest(digest))
            platform = platform or platform_string(found.platform) or "?"
            if platforms and platform not in platforms:
                continue  # a one-platform image of another platform
            size = platform_size(client, repo, manifest, platform, config, steps,
                                 contents=True, top=top)
            sizes.append(size)
            if spec is not None:
                checks += budget_checks(spec.budget, size)
    if not sizes:
        raise InputError(f"{ref_text}: no image for {', '.join(platforms or [])}")
    failed = [c for c in checks if not c.ok]
    if as_json:
        out.print_json(json.dumps({
            "reference": ref_text, "image": spec.name if spec else None,
            "platforms": [s.as_json() for s in sizes],
            "budget": [c.to_json() for c in checks]}))
    else:
        for size in sizes:
            for line in _table(size):
                out.print(line, markup=False)
        for c in failed:
            out.print(f"over budget: {c.platform}: {c.name.removeprefix('size budget: ')}: "
                      f"{c.detail}", markup=False)
        if spec is not None and not failed:
            out.print(f"within budget ({spec.name})", markup=False)
    return 1 if failed else 0
