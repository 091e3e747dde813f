"""The options and arguments several commands share, as typer reads them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

# The shared shape of every command that works on images: IMAGE… positional, then options.
# metavar="" on flags keeps typer from printing a type such as <bool> in help.
ImagesArg = Annotated[
    Optional[list[str]],  # noqa: UP045 - typer needs Optional on 3.10
    typer.Argument(
        help="Images to work on (default: every image in the catalog)",
        metavar="IMAGE",
        show_default=False,
    ),
]
CatalogPathArg = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Argument(
        help="Same as --catalog (kept for older scripts)", metavar="[PATH]", show_default=False
    ),
]
CatalogOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option(
        "--catalog", "-c", help="Catalog TOML (default: the embedded catalog)", metavar="PATH"
    ),
]
LockOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option(
        "--lock",
        help="Lock file (default: cannery.lock beside the catalog, or in the current directory)",
        metavar="PATH",
    ),
]
LockedOpt = Annotated[
    bool,
    typer.Option(
        "--locked",
        help="Exit 2, naming each one, if any input is not pinned by the lock (for CI).",
        metavar="",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.", metavar="")]
BaseDigestOpt = Annotated[
    Optional[list[str]],  # noqa: UP045
    typer.Option(
        "--base-digest",
        help="NAME=DIGEST: the index the catalog image NAME was just pushed with; the images "
        "built FROM it (base = \"image:NAME\") pin it instead of the lock's (repeatable)",
        metavar="NAME=DIGEST",
    ),
]
CaCertOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option(
        "--ca-cert",
        help="Extra CA certificate to trust, added to the system's (env: CANNERY_CA_CERT)",
        metavar="FILE",
    ),
]


def flag(name: str, text: str) -> Any:
    """A boolean option whose help shows no type (typer would print <bool>)."""
    return typer.Option(name, help=text, metavar="")
