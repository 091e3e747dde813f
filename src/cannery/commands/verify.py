"""cannery verify: registry checks, attestation checks (referrers), an optional rebuild, then
runtime checks per platform; exit 1 on any failure."""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

from cannery.attest.sign import load_public_key
from cannery.builder.jobs import ImageJob, plan_build
from cannery.builder.registries import platform_tag, publish_credentials, registry_hosts
from cannery.commands.build import _cert_dir
from cannery.commands.common import (
    checkout_for,
    err,
    load_with_lock,
    out,
    select,
    spec_for_reference,
    with_base_digests,
)
from cannery.errors import FatalError, InputError
from cannery.oci import Credentials, OCIClient, Reference
from cannery.plan import ImageSpec, plan
from cannery.render.dockerfile import render_dockerfile
from cannery.tls import ssl_context
from cannery.verify.attestations import attestation_checks, index_entries_check
from cannery.verify.keyless import KeylessPolicy, keyless_checks, load_verifier
from cannery.verify.layout import LAYOUT_REF, Layout
from cannery.verify.mirrors import registry_parity_checks
from cannery.verify.model import Check
from cannery.verify.registry import PlatformImage, registry_checks
from cannery.verify.runtime import runtime_checks
from cannery.verify.size import BlobSource, budget_checks, layer_steps, platform_size


def _print_checks(checks: list[Check]) -> None:
    """Per platform: what passed, in one line; each failure on a line of its own."""
    groups: dict[str, list[Check]] = {}
    for c in checks:
        groups.setdefault(c.platform or "index", []).append(c)
    for where, group in groups.items():
        passed = [c.name for c in group if c.ok]
        out.print(f"{where}: {len(passed)} of {len(group)} ok", markup=False)
        if passed:
            out.print(f"  ok: {', '.join(passed)}", markup=False)
        for c in group:
            if not c.ok:
                out.print(f"  FAIL {c.name}: {c.detail}", markup=False)


def _rebuild(
    client: OCIClient,
    ref: Reference,
    job: ImageJob,
    images: list[PlatformImage],
    ca_cert: Path | None,
    network: str | None,
    only: list[str] | None,
) -> list[Check]:
    """Rebuild each platform (or those in ``only``) from scratch and compare digests."""
    from cannery.verify.rebuild import compare, rebuild_platform

    repo = Reference(ref.host, ref.repository)
    served = {img.platform: img.descriptor.digest for img in images}
    out = []
    with _cert_dir(ca_cert) as cert_dir, tempfile.TemporaryDirectory() as logs:
        for pjob in job.platforms:
            if (only and pjob.platform not in only) or pjob.platform not in served:
                continue
            err.print(f"verify: rebuilding {pjob.platform} from the lock", markup=False)
            log = Path(logs) / f"{pjob.slug}.log"
            try:
                layout = rebuild_platform(job, pjob, cert_dir, network, log)
            except FatalError as exc:
                out.append(Check("rebuild", False, exc.message, pjob.platform))
                continue
            try:
                out.append(compare(client, repo, served[pjob.platform], layout, pjob.platform))
            finally:
                shutil.rmtree(layout, ignore_errors=True)
    return out


def _budget(source: BlobSource, repo: Reference, spec: ImageSpec,
            images: list[PlatformImage]) -> list[Check]:
    """The size budget on each platform: sizes from the manifests; the layers are read only
    when the budget limits the wasted share."""
    steps = layer_steps(render_dockerfile(spec))
    out: list[Check] = []
    for img in images:
        manifest, _ = source.get_manifest(repo.with_digest(img.descriptor.digest))
        size = platform_size(source, repo, manifest, img.platform, img.config, steps,
                             contents=spec.budget.wasted is not None)
        out += budget_checks(spec.budget, size)
    return out


def keyless_policy(
    identity: str | None, issuer: str | None, trusted_root: Path | None
) -> KeylessPolicy | None:
    """The keyless identity to require, from the three options (both or neither of identity
    and issuer; a trusted root only with them)."""
    if identity is None and issuer is None:
        if trusted_root is not None:
            raise InputError("--trusted-root: give --certificate-identity and "
                             "--certificate-oidc-issuer too")
        return None
    if not identity or not issuer:
        raise InputError("--certificate-identity and --certificate-oidc-issuer go together: "
                         "give both")
    if trusted_root is not None and not trusted_root.is_file():
        raise InputError(f"--trusted-root: {trusted_root}: no such file")
    return KeylessPolicy(identity, issuer, trusted_root)


def verify_cmd(
    ref_text: str,
    catalog: Path | None,
    lock: Path | None,
    image: str | None,
    as_json: bool,
    ca_cert: Path | None,
    runtime: bool,
    key: Path | None = None,
    require_attestations: bool = False,
    rebuild: bool = False,
    network: str | None = None,
    rebuild_platforms: list[str] | None = None,
    all_registries: bool = False,
    keyless: KeylessPolicy | None = None,
    base_digests: tuple[str, ...] = (),
) -> int:
    if ref_text.startswith("oci:"):
        if base_digests:
            raise InputError(f"{ref_text}: --base-digest is for a pushed image; a layout is "
                             "checked against the lock as it was built")
        if rebuild or all_registries or key or require_attestations or keyless:
            raise InputError(f"{ref_text}: --rebuild, --all-registries, --key, "
                             "--require-attestations and --certificate-identity check a "
                             "registry, not a layout")
        return _verify_layout(Path(ref_text[4:]), catalog, lock, image, as_json, runtime,
                              rebuild_platforms)
    try:
        ref = Reference.parse(ref_text)
    except ValueError as exc:
        raise InputError(f"{ref_text}: not an image reference: {exc}") from None
    keys = [load_public_key(key)] if key else []
    sigstore = load_verifier(keyless) if keyless is not None else None
    loaded, lk, _ = load_with_lock(catalog, lock, quiet=as_json)
    lk = with_base_digests(loaded.catalog, lk, base_digests)
    specs = plan(loaded.catalog, lk, select(loaded, [image] if image else None))
    spec = specs[0] if image else spec_for_reference(ref, specs)
    checks: list[Check] = []
    # An image that copies the checkout is planned from the one verify runs in.
    checkout = checkout_for([spec], None, catalog, quiet=as_json)
    job = plan_build(spec, render_dockerfile(spec), lk, checkout=checkout)
    if checkout is not None:
        spec = spec.with_checkout(checkout.commit)
    creds = (
        publish_credentials([job])
        if all_registries
        else Credentials(env_host=ref.host, registries=registry_hosts([job]))
    )
    with OCIClient(ssl_context(ca_cert), credentials=creds) as client:
        inputs = {p.platform: p.input_digest for p in job.platforms}
        # The tag is read once; every later read is by that digest, so the index whose entries
        # and signature are checked is the one whose platforms were (the tag may move meanwhile).
        index = client.get_manifest(ref)
        by_digest = ref.with_digest(index[1].digest)
        found, images = registry_checks(client, by_digest, spec, inputs, index)
        checks += found
        plain_http = client.plain_http(ref.host)  # what the client learnt, not re-derived
        if images:
            checks.append(index_entries_check(index[0]))
            checks += attestation_checks(client, by_digest, spec, images, keys,
                                         require_attestations)
            if keyless is not None and sigstore is not None:
                checks += keyless_checks(client, by_digest, spec, images, keyless, sigstore)
        checks += _budget(client, Reference(ref.host, ref.repository), spec, images)
        if rebuild:
            checks += _rebuild(client, by_digest, job, images, ca_cert, network, rebuild_platforms)
        if all_registries:  # the registry checks above and the runtime checks run once
            checks += registry_parity_checks(client, by_digest, spec)
    if runtime:
        with _cert_dir(ca_cert) as cert_dir:
            for img in images:
                pinned = f"{ref.host}/{ref.repository}@{img.descriptor.digest}"
                checks += runtime_checks(
                    pinned, img.platform, spec, cert_dir, ref.host, plain_http,
                    registry_hosts([job]),
                )
    return _report(ref_text, spec, checks, as_json)


def _report(ref_text: str, spec: ImageSpec, checks: list[Check], as_json: bool) -> int:
    failed = [c for c in checks if not c.ok]
    if as_json:
        out.print_json(
            json.dumps(
                {
                    "reference": ref_text,
                    "image": spec.name,
                    "ok": not failed,
                    "checks": [c.to_json() for c in checks],
                }
            )
        )
    else:
        _print_checks(checks)
        verdict = f"{len(failed)} of {len(checks)} checks failed" if failed else "all passed"
        out.print(f"{ref_text} ({spec.name}): {len(checks)} checks, {verdict}", markup=False)
    return 1 if failed else 0


def _verify_layout(
    root: Path,
    catalog: Path | None,
    lock: Path | None,
    image: str | None,
    as_json: bool,
    runtime: bool,
    platforms: list[str] | None,
) -> int:
    """The registry checks read from the layout a build wrote (`--output oci:DIR`), then the
    runtime checks in a container made from it. ``platforms``: the ones built into it (a
    pull request's leg builds one); the catalog's when not given."""
    loaded, lk, _ = load_with_lock(catalog, lock, quiet=as_json)
    if image is None:
        names = ", ".join(loaded.catalog.images)
        raise InputError(f"oci:{root}: which catalog image is it? give --image (one of {names})")
    spec = plan(loaded.catalog, lk, select(loaded, [image]))[0]
    unknown = [p for p in platforms or [] if p not in spec.platforms]
    if unknown:
        raise InputError(f"{spec.name}: --platform {', '.join(unknown)} is not one of its "
                         f"platforms ({', '.join(spec.platforms)})")
    checkout = checkout_for([spec], None, catalog, quiet=as_json)
    job = plan_build(spec, render_dockerfile(spec), lk, checkout=checkout)
    if checkout is not None:
        spec = spec.with_checkout(checkout.commit)
    if platforms:
        spec = replace(spec, platforms=tuple(p for p in spec.platforms if p in platforms))
    layout = Layout(root)
    tag = job.tags[0]
    index = layout.named(tag, platforms)
    inputs = {p.platform: p.input_digest for p in job.platforms}
    checks, images = registry_checks(layout, LAYOUT_REF.with_digest(index[1].digest), spec,
                                     inputs, index)
    if images:
        checks.append(index_entries_check(index[0]))
    checks += _budget(layout, LAYOUT_REF, spec, images)
    if runtime:
        for img in images:
            # the tag names an index (containers/image picks --arch's platform), TAG-ARCH one
            name = platform_tag(tag, img.platform) if platforms else tag
            checks += runtime_checks(f"oci:{root}:{name}", img.platform, spec, None, "")
    return _report(f"oci:{root}", spec, checks, as_json)
