"""Base images in the lock: a catalog image used as a base (pinned at the digest its build
pushed, with its parent's time and OS) and the check of each base's OS against the
/etc/os-release the lock recorded."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cannery.catalog.image_bases import PREFIX as IMAGE_BASE
from cannery.catalog.image_bases import named_image
from cannery.lock.file import BaseEntry, Lock, now

if TYPE_CHECKING:
    from cannery.catalog.models import Catalog


def os_contradictions(cat: Catalog, lock: Lock) -> list[tuple[str, str, str]]:
    """(base name, field, why) for each base whose ``os`` or ``os_version`` says other than its
    image's /etc/os-release as the lock recorded it (a base not read yet says nothing)."""
    out = []
    for name, base in cat.bases.items():
        entry = lock.bases.get(base.image)
        if entry is None or entry.os_id is None:
            continue
        said = f"{entry.os_id} {entry.os_version}".strip()
        if base.os != entry.os_id.lower():
            out.append((name, "os", f"{base.os!r}, but {base.image}'s /etc/os-release says "
                        f"{said} (cannery.lock)"))
        elif entry.package_managers and base.manager not in entry.package_managers:
            where = "package_manager" if base.package_manager else "os"
            out.append((name, where, f"{base.os!r} {base.os_version} installs with "
                        f"{base.manager}, but {base.image} has "
                        f"{', '.join(entry.package_managers)} (cannery.lock)"
                        + ("" if base.package_manager else
                           f": set package_manager = {entry.package_managers[0]!r}")))
        elif entry.os_version and base.os_version != entry.os_version and not (
            # a release's point version (Alpine's 3.20.3, Rocky's 9.4) is of that release
            entry.os_version.startswith(base.os_version + ".")
        ):
            out.append((name, "os_version", f"{base.os_version!r}, but {base.image}'s "
                        f"/etc/os-release says {said} (cannery.lock)"))
    return out


def _image_base_key(cat: Catalog, ref: str) -> str | None:
    """The ``image:NAME`` bases key whose reference is ``ref``, or None."""
    return next((k for k, b in cat.bases.items() if named_image(k) and b.image == ref), None)


def _as_image_base(
    cat: Catalog, bases: dict[str, BaseEntry], ref: str, entry: BaseEntry,
    seen: frozenset[str] = frozenset(),
) -> BaseEntry:
    """``entry`` as the lock holds a catalog image's digest: with its parent's base time and
    OS, so that a build pinning the digest it has just pushed (``pin_image_bases``) plans the
    same clock as one that reads the lock, and the OS check compares like with like."""
    key = _image_base_key(cat, ref)
    if key is None:
        return entry
    parent = cat.bases[cat.images[key[len(IMAGE_BASE):]].base].image
    if parent not in bases or parent == ref or parent in seen:
        return entry  # (an image FROM its own earlier release: its own base entry stands)
    above = _as_image_base(cat, bases, parent, bases[parent], seen | {ref})  # a chain: the root
    return entry.model_copy(update={"resolved_at": above.resolved_at, "os_id": above.os_id,
                                    "os_version": above.os_version})


def pin_image_bases(cat: Catalog, lock: Lock, pushed: dict[str, str]) -> Lock:
    """``lock`` with each catalog image of ``pushed`` (name → the index digest it was just
    pushed with) pinned, as a base, at that digest."""
    bases = dict(lock.bases)
    for name, digest in pushed.items():
        key = IMAGE_BASE + name
        if key not in cat.bases:
            continue
        ref = cat.bases[key].image
        fresh = BaseEntry(digest=digest, resolved_at=now())
        bases[ref] = _as_image_base(cat, bases, ref, fresh)
    return lock.model_copy(update={"bases": bases})
