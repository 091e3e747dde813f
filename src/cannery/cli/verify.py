"""`cannery verify`: its options, one by one, and the command (registered in
:mod:`cannery.cli.app`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from cannery.cli.options import (
    BaseDigestOpt,
    CaCertOpt,
    CatalogOpt,
    JsonOpt,
    LockOpt,
    flag,
)

RefOpt = Annotated[
    str,
    typer.Argument(
        help="Pushed image: REGISTRY/REPO:TAG or REGISTRY/REPO@DIGEST; or oci:DIR, a layout "
        "`cannery build --output oci:DIR` wrote (needs --image)",
        metavar="REF",
    ),
]
ImageOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option(
        "--image", help="Catalog image to check against (default: found by tag)",
        metavar="NAME",
    ),
]
RuntimeOpt = Annotated[
    bool,
    typer.Option(
        "--runtime/--no-runtime",
        help="Also check a running container of each platform (buildah)",
    ),
]
KeyOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option(
        "--key",
        help="PEM public key: provenance, SBOM and signatures must be signed by it",
        metavar="PUB",
    ),
]
RequireAttestationsOpt = Annotated[
    bool,
    flag("--require-attestations", "Fail when a platform has no provenance or no SBOM"),
]
RebuildOpt = Annotated[
    bool,
    flag("--rebuild", "Rebuild each platform from the lock (buildah, fresh storage) and "
          "compare digests; name the first differing layer and its files"),
]
RebuildPlatformOpt = Annotated[
    Optional[list[str]],  # noqa: UP045
    typer.Option("--platform", help="With --rebuild: only this platform; with oci:DIR: "
                 "the platform a `build --platform` wrote there (repeatable)",
                 metavar="OS/ARCH"),
]
NetworkOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option("--network", help="With --rebuild: network mode for RUN steps",
                 metavar="MODE"),
]
AllRegistriesOpt = Annotated[
    bool,
    flag(
        "--all-registries",
        "Also check that every registry of the image serves the expected index and "
        "platform digests under the tag, and its per-platform tags (TAG-amd64 …)",
    ),
]
CertificateIdentityOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option(
        "--certificate-identity",
        help="Keyless: each platform needs a Sigstore bundle (actions/attest) whose "
        "certificate names this identity (with --certificate-oidc-issuer)",
        metavar="SAN",
    ),
]
CertificateOidcIssuerOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option("--certificate-oidc-issuer", help="Keyless: the identity's OIDC issuer",
                 metavar="URL"),
]
TrustedRootOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option(
        "--trusted-root",
        help="Keyless: a Sigstore trusted_root.json (default: the public-good root "
        "sigstore-python ships, read offline)",
        metavar="FILE",
    ),
]


def verify(
    ref: RefOpt,
    catalog: CatalogOpt = None,
    lock: LockOpt = None,
    image: ImageOpt = None,
    as_json: JsonOpt = False,
    ca_cert: CaCertOpt = None,
    runtime: RuntimeOpt = True,
    key: KeyOpt = None,
    require_attestations: RequireAttestationsOpt = False,
    rebuild: RebuildOpt = False,
    rebuild_platform: RebuildPlatformOpt = None,
    network: NetworkOpt = None,
    all_registries: AllRegistriesOpt = False,
    certificate_identity: CertificateIdentityOpt = None,
    certificate_oidc_issuer: CertificateOidcIssuerOpt = None,
    base_digest: BaseDigestOpt = None,
    trusted_root: TrustedRootOpt = None,
) -> None:
    """Check a pushed image: platforms, config env, labels, attestations; then env and
    imports at runtime."""
    from cannery.commands.verify import keyless_policy, verify_cmd

    keyless = keyless_policy(certificate_identity, certificate_oidc_issuer, trusted_root)
    raise typer.Exit(
        verify_cmd(
            ref, catalog, lock, image, as_json, ca_cert, runtime, key, require_attestations,
            rebuild, network, rebuild_platform, all_registries, keyless,
            tuple(base_digest or ()),
        )
    )
