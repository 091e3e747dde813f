"""What an image of the catalog needs, before anything is locked: its tag, its toolkit
installers and its URLs per architecture. Both the planner and the lock read these."""

from __future__ import annotations

import re

from cannery.catalog.models import Catalog
from cannery.catalog.platforms import UNAME_ARCH, arches_of


def fill_url(template: str, *, version: str = "", arch: str) -> str:
    return (
        template.replace("{version}", version)
        .replace("{uname_arch}", UNAME_ARCH[arch])
        .replace("{arch}", arch)
    )


def render_tag(cat: Catalog, image: str, template: str | None = None) -> str:
    """The image's tag, or ``template`` (one of its aliases) filled in the same way."""
    img = cat.images[image]
    base = cat.bases[img.base]
    tk = cat.toolkit_of(image)
    # A fact the image lacks renders empty; `catalog validate` refuses a tag that names one.
    values = {
        "name": image,
        "cann": tk.version.lower() if tk else "",
        "chip": base.chip,
        "os": base.os,
        "os_version": base.os_version,
        "python": cat.python_of(image) or "",
        "recipe": img.recipe,
        "soc": img.soc or "",
        "family": cat.family_of(img.soc) or "",
    }
    return re.sub(r"\{([a-z_]+)\}", lambda m: values[m.group(1)], template or img.tag)


def toolkit_downloads(cat: Catalog, image: str) -> list[tuple[str, str, str]]:
    """(package name, TARGETARCH, URL) for each installer the image needs, in install order."""
    img = cat.images[image]
    base = cat.bases[img.base]
    tk = cat.toolkit_of(image)
    if tk is None or tk.provided == "host" or base.toolkit_version == tk.version:
        return []
    family = cat.family_of(img.soc)
    out = []
    for pkg in tk.packages:
        if pkg.family and pkg.family != family:
            continue
        for arch in arches_of(img.platforms):
            out.append((pkg.name, arch, fill_url(pkg.url, version=tk.version, arch=arch)))
    return out


def wheel_urls(template: str, arches: tuple[str, ...]) -> list[tuple[str, str]]:
    """(TARGETARCH, URL) of a wheel component for each of ``arches``."""
    return [(a, fill_url(template, arch=a)) for a in arches]
