"""What every command needs: load the catalog and lock, print warnings the same way."""

from __future__ import annotations

import re
from pathlib import Path

from rich.console import Console

from cannery.builder.checkout import Checkout
from cannery.catalog.load import LoadedCatalog
from cannery.catalog.models import Catalog
from cannery.errors import InputError
from cannery.lock import Lock, read_lock
from cannery.plan import ImageSpec
from cannery.render.checks import load_checked
from cannery.util.patterns import OCI_DIGEST_PATTERN
from cannery.util.text import did_you_mean

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cannery.oci.reference import Reference

err = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)


def lock_path_for(catalog: Path | None, lock: Path | None) -> Path:
    if lock is not None:
        return lock
    if catalog is not None:
        return catalog.parent / "cannery.lock"
    return Path("cannery.lock")


def load(catalog: Path | None, quiet: bool = False) -> LoadedCatalog:
    loaded = load_checked(catalog)
    if not quiet:
        for w in loaded.warnings:
            err.print(str(w), markup=False)
    return loaded


def load_with_lock(
    catalog: Path | None, lock: Path | None, quiet: bool = False
) -> tuple[LoadedCatalog, Lock, Path]:
    loaded = load(catalog, quiet)
    path = lock_path_for(catalog, lock)
    locked = read_lock(path)
    _check_os(loaded, locked)
    return loaded, locked, path


def _check_os(loaded: LoadedCatalog, lock: Lock) -> None:
    """A base whose `os` or `os_version` contradicts its image's /etc/os-release (read when it
    was locked) is a catalog error at the line of that key: the package manager follows it."""
    from cannery.catalog.load import EMBEDDED, default_catalog_text
    from cannery.catalog.locate import LineMap
    from cannery.errors import CatalogError, Location
    from cannery.lock import os_contradictions

    found = os_contradictions(loaded.catalog, lock)
    if not found:
        return
    text = default_catalog_text() if loaded.path == EMBEDDED else Path(loaded.path).read_text()
    lines = LineMap(text)
    problems = []
    for name, key, why in found:
        if name.startswith("image:"):  # derived from a catalog image: said where it is named
            child = next(i for i, img in loaded.catalog.images.items() if img.base == name)
            line = lines.line_of(("images", child, "base"))
            problems.append(f"{Location(loaded.path, line, f'images.{child}.base')}: {why}")
            continue
        line = lines.line_of(("bases", name, key)) or lines.line_of(("bases", name))
        problems.append(f"{Location(loaded.path, line, f'bases.{name}.{key}')}: {why}")
    raise CatalogError(problems)


def select(loaded: LoadedCatalog, names: list[str] | None) -> list[str]:
    known = list(loaded.catalog.images)
    if not names:
        return known
    unknown = [n for n in names if n not in known]
    if unknown:
        one = len(unknown) == 1
        hint = did_you_mean(unknown[0], known) if one else f"known: {', '.join(known)}"
        raise InputError(f"unknown image {', '.join(unknown)} ({hint})")
    return names


def require_locked(specs: list[ImageSpec]) -> None:
    """``--locked``: every input of every image must be pinned by the lock, else exit 2."""
    items = [f"  {s.name}: {item}" for s in specs for item in s.unlocked()]
    items += [f"  {s.name}: UNPINNED {item}" for s in specs for item in s.unpinned()]
    if items:
        raise InputError(
            f"--locked: {len(items)} unlocked input(s); run `cannery lock` first:\n"
            + "\n".join(items)
        )


def checkout_for(
    specs: list[ImageSpec], context: Path | None, catalog: Path | None, quiet: bool = False
) -> Checkout | None:
    """The checkout images with a `path` component are built from: ``context``, else the
    catalog's directory (the repository root), else the current directory. None when no image
    copies the checkout. A dirty tree is said once."""
    from cannery.builder.checkout import read_checkout

    if not any(c.path is not None for s in specs for c in s.components):
        return None
    root = context or (catalog.parent if catalog is not None else Path("."))
    checkout = read_checkout(root)
    if checkout.dirty and not quiet:
        err.print(
            f"cannery: note: {root} has uncommitted changes: images that copy it are labelled "
            f"{checkout.commit}",
            markup=False,
        )
    return checkout


def spec_for_reference(ref: Reference, specs: list[ImageSpec]) -> ImageSpec:
    """The catalog image REF is: its repository, and its tag exactly (else with a suffix)."""
    from cannery.oci.reference import Reference  # (not at import: `plan` loads no httpx)

    repo = f"{ref.host}/{ref.repository}"
    same_repo = [s for s in specs if Reference.parse(s.repository).repository == ref.repository]
    exact = [s for s in same_repo if ref.tag == s.tag]
    matches = exact or [s for s in same_repo if ref.tag and ref.tag.startswith(s.tag)]
    if len(matches) == 1:
        return matches[0]
    names = ", ".join(s.name for s in specs)
    shown = f"{repo}:{ref.tag}" if ref.tag else str(ref)
    raise InputError(f"{shown}: which catalog image is it? give --image (one of {names})")


def with_base_digests(cat: Catalog, lk: Lock, given: tuple[str, ...] | list[str]) -> Lock:
    """``lk`` with each ``NAME=DIGEST`` of ``given`` (--base-digest: the index a catalog image
    was just pushed with, as CI's merge job says it) pinned as that image's base entry."""
    from cannery.catalog.image_bases import PREFIX, named_image
    from cannery.lock import pin_image_bases

    out: dict[str, str] = {}
    for item in given:
        name, sep, digest = item.partition("=")
        if not sep:
            raise InputError(f"--base-digest {item[:80]!r}: give NAME=sha256:DIGEST")
        if PREFIX + name not in cat.bases:
            used = sorted(k.removeprefix(PREFIX) for k in cat.bases if named_image(k))
            raise InputError(f"--base-digest {name[:80]}: no image of the catalog is built FROM "
                             f"image {name[:80]} (built FROM: {', '.join(used) or 'none'})")
        if not re.fullmatch(OCI_DIGEST_PATTERN, digest):
            raise InputError(f"--base-digest {name}={digest[:80]!r}: not a sha256 digest")
        out[name] = digest
    return pin_image_bases(cat, lk, out) if out else lk
