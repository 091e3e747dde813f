"""Catalog images as bases: ``base = "image:NAME"`` builds FROM another image of the catalog.

The loader gives each such base a ``bases`` entry of its own, keyed by the spelling itself
(``image:NAME``), whose facts are the named image's: its published reference (its registry's
repository and its tag), its OS, chip and Python, and the CANN it has installed. From there on
the base is an ordinary one: the lock pins the digest its tag names, the plan and the renderer
read its facts. What is special is only when it can be pinned: a build of both images pins
the digest it has just pushed (``pin_image_bases``), and the generated CI passes the merge
job's digest to the images built FROM it.
"""

from __future__ import annotations

from collections.abc import Callable

from cannery.catalog.inputs import render_tag, tag_values, template_fields
from cannery.catalog.models import Base, Catalog
from cannery.util.text import did_you_mean

PREFIX = "image:"

Report = Callable[[tuple[str | int, ...], str], None]


def named_image(base: str) -> str | None:
    """The catalog image a base key names (``image:NAME`` → NAME), else None."""
    return base[len(PREFIX):] if base.startswith(PREFIX) else None


def parent_of(cat: Catalog, image: str) -> str | None:
    """The catalog image ``image`` is built FROM, or None (an ordinary base)."""
    return named_image(cat.images[image].base)


def ancestors(cat: Catalog, image: str) -> list[str]:
    """The catalog images ``image`` is built on, nearest first (the loader refused cycles)."""
    out: list[str] = []
    parent = parent_of(cat, image)
    while parent is not None and parent in cat.images and parent not in out:
        out.append(parent)
        parent = parent_of(cat, parent)
    return out


def in_build_order(cat: Catalog, names: list[str]) -> list[str]:
    """``names`` with each image after the catalog images of ``names`` it is built on (else
    in the order given)."""
    chosen = set(names)
    done: list[str] = []
    for name in names:
        chain = [a for a in reversed(ancestors(cat, name)) if a in chosen]
        for n in [*chain, name]:
            if n not in done:
                done.append(n)
    return done


def derive(cat: Catalog, report: Report) -> None:
    """Check every ``image:NAME`` base and add its ``bases`` entry, parents first. What cannot
    work is reported at the image's ``base`` key: an unknown image, a cycle, a parent whose
    tag is only known after locking ({date}), or a platform the parent is not built for."""
    done: dict[str, bool] = {}
    for iname in cat.images:
        _derive(cat, iname, [], report, done)


def _derive(
    cat: Catalog, iname: str, path: list[str], report: Report, done: dict[str, bool]
) -> bool:
    """Make the base of ``iname`` exist (recursively); False when it cannot (said once)."""
    if iname not in done:
        done[iname] = _derive_one(cat, iname, path, report, done)
    return done[iname]


def _derive_one(
    cat: Catalog, iname: str, path: list[str], report: Report, done: dict[str, bool]
) -> bool:
    img = cat.images[iname]
    parent = named_image(img.base)
    if parent is None:
        return img.base in cat.bases  # an ordinary base (unknown: the cross-check says so)
    if img.base in cat.bases:
        return True
    where = ("images", iname, "base")
    if parent not in cat.images:
        report(where, f"no image {parent!r} in the catalog ({did_you_mean(parent, cat.images)})")
        return False
    if parent in path or parent == iname:
        cycle = [*(path[path.index(parent):] if parent in path else []), iname, parent]
        report(where, "images built FROM each other: " + " → ".join(cycle))
        done.update(dict.fromkeys(cycle, False))
        return False
    if not _derive(cat, parent, [*path, iname], report, done):
        return False
    pimg = cat.images[parent]
    missing = [p for p in img.platforms if p not in pimg.platforms]
    if missing:
        report(where, f"image {parent} is not built for {', '.join(missing)} (its platforms: "
               f"{', '.join(pimg.platforms)})")
        return False
    if "date" in template_fields(pimg.tag):
        report(where, f"image {parent}'s tag uses {{date}}, known only once it is locked: give "
               f"{parent} a tag without it to build FROM")
        return False
    registry = pimg.registry or cat.catalog.registry or ""
    fields = set(template_fields(pimg.tag))
    if registry not in cat.registries or (pimg.toolkit and pimg.toolkit not in cat.toolkits) or (
        fields - set(tag_values(cat, parent))
    ):
        return False  # the cross-check names the unknown registry, toolkit or tag field
    pbase = cat.bases[pimg.base]
    tk = cat.toolkit_of(parent)
    cat.bases[img.base] = Base(
        image=f"{cat.registries[registry].repository}:{render_tag(cat, parent)}",
        python=cat.python_of(parent),
        os=pbase.os,
        os_version=pbase.os_version,
        package_manager=pbase.package_manager,
        chip=pbase.chip,
        toolkit_version=(tk.version if tk is not None and tk.provided == "image"
                         else pbase.toolkit_version),
    )
    return True
