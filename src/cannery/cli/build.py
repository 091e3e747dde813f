"""`cannery build`: its options, one by one, and the command (registered in
:mod:`cannery.cli.app`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from cannery.cli.options import (
    BaseDigestOpt,
    CaCertOpt,
    CatalogOpt,
    ImagesArg,
    JsonOpt,
    LockOpt,
    flag,
)

PlatformOpt = Annotated[
    Optional[list[str]],  # noqa: UP045
    typer.Option(
        "--platform",
        help="Build only this platform (repeatable); pushed by digest, no tag moves",
        metavar="OS/ARCH",
    ),
]
BackendOpt = Annotated[
    str,
    typer.Option(
        "--backend", help="buildah (daemonless) or buildx (BuildKit)", metavar="NAME"
    ),
]
PushOpt = Annotated[
    bool, flag("--push", "Push to the catalog's registry by digest, merge, then tag")
]
OutputOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option(
        "--output",
        help="oci:DIR writes a multi-arch OCI image layout, no registry "
        "(the default without --push: oci:cannery-images)",
        metavar="oci:DIR",
    ),
]
TagSuffixOpt = Annotated[
    str, typer.Option("--tag-suffix", help="Appended to each tag", metavar="TEXT")
]
ExtraTagOpt = Annotated[
    Optional[list[str]],  # noqa: UP045
    typer.Option("--extra-tag", help="One more tag for the image's index, moved after its "
                 "tag and aliases (repeatable; one image per repository)", metavar="TAG"),
]
BuilderOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option(
        "--builder", help="buildx builder (a remote or Kubernetes BuildKit)", metavar="NAME"
    ),
]
ForceOpt = Annotated[
    bool, flag(
        "--force",
        "Rebuild platforms whose inputs are unchanged, and move a tag even from an index "
        "built from a newer lock",
    )
]
LockedOpt = Annotated[
    bool, flag("--locked", "Exit 2 if cannery.lock would change (for CI)")
]
FrozenOpt = Annotated[
    bool, flag("--frozen", "Never resolve: an unlocked input is an error")
]
DigestDirOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option(
        "--digest-dir",
        help="Write each pushed platform's descriptor here and move no tag "
        "(with --merge-only: read them, merge, tag)",
        metavar="DIR",
    ),
]
MergeOnlyOpt = Annotated[
    bool, flag("--merge-only", "Merge the descriptors in --digest-dir, then tag")
]
NetworkOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option(
        "--network", help="Network mode for RUN steps (e.g. host)", metavar="MODE"
    ),
]
LogDirOpt = Annotated[
    Path,
    typer.Option("--log-dir", help="One build log per image and platform", metavar="DIR"),
]
RegistryCacheOpt = Annotated[
    bool,
    flag(
        "--registry-cache",
        "buildx: a registry cache per image and platform (REPO:cache-IMAGE-ARCH)",
    ),
]
SignKeyOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option(
        "--sign-key",
        help="Sign provenance and manifests with this PEM private key (ECDSA P-256 or "
        "Ed25519): a FILE, or env:NAME for a variable holding it (never the key itself)",
        metavar="FILE|env:NAME",
    ),
]
AttestOpt = Annotated[
    bool,
    typer.Option(
        "--attest/--no-attest",
        help="With --push: attach provenance (and SBOM, signatures) as OCI referrers",
    ),
]
SbomOpt = Annotated[
    bool,
    typer.Option("--sbom/--no-sbom", help="With --attest: attach an SPDX SBOM (syft)"),
]
ProvenanceDirOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option(
        "--provenance-dir",
        help="With --attest: also write each platform's SLSA predicate to "
        "DIR/IMAGE/OS-ARCH.json (for a keyless signer such as actions/attest)",
        metavar="DIR",
    ),
]
ContextOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option(
        "--context",
        help="The checkout images with a `path` component copy (default: the catalog's "
             "directory); its commit is read from git",
        metavar="DIR",
    ),
]


def build(
    images: ImagesArg = None,
    catalog: CatalogOpt = None,
    lock: LockOpt = None,
    platform: PlatformOpt = None,
    backend: BackendOpt = "buildah",
    push: PushOpt = False,
    output: OutputOpt = None,
    tag_suffix: TagSuffixOpt = "",
    extra_tag: ExtraTagOpt = None,
    base_digest: BaseDigestOpt = None,
    builder: BuilderOpt = None,
    force: ForceOpt = False,
    locked: LockedOpt = False,
    frozen: FrozenOpt = False,
    ca_cert: CaCertOpt = None,
    as_json: JsonOpt = False,
    digest_dir: DigestDirOpt = None,
    merge_only: MergeOnlyOpt = False,
    network: NetworkOpt = None,
    log_dir: LogDirOpt = Path(".cannery/logs"),
    registry_cache: RegistryCacheOpt = False,
    sign_key: SignKeyOpt = None,
    attest: AttestOpt = True,
    sbom: SbomOpt = False,
    provenance_dir: ProvenanceDirOpt = None,
    context: ContextOpt = None,
) -> None:
    """Build each platform, push it by digest, merge one index, then move the tag."""
    from cannery.tls import context_ahead

    tls = context_ahead(ca_cert)  # the roots load while the build's modules import
    from cannery.commands.build import BuildRequest, build_cmd

    raise typer.Exit(
        build_cmd(
            BuildRequest(
                images=images,
                catalog=catalog,
                lock=lock,
                platforms=platform,
                backend=backend,
                push=push,
                output=output,
                tag_suffix=tag_suffix,
                builder=builder,
                force=force,
                locked=locked,
                frozen=frozen,
                ca_cert=ca_cert,
                as_json=as_json,
                digest_dir=digest_dir,
                merge_only=merge_only,
                network=network,
                log_dir=log_dir,
                registry_cache=registry_cache,
                context=context,
                sign_key=sign_key,
                attest=attest,
                sbom=sbom,
                provenance_dir=provenance_dir,
                extra_tags=tuple(extra_tag or ()),
                base_digests=tuple(base_digest or ()),
            ),
            tls,
        )
    )
