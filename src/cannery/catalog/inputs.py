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


# A download whose URL is a build secret: its key in the lock (and its "URL" in the plan),
# the variable's name after it; never the URL itself.
SECRET_URL = "secret:"

# {date} where the lock cannot say it (an image none of whose inputs is locked yet), and
# what `catalog validate` renders tags with (it reads no lock).
NO_DATE = "unlocked"


def component_field(component: str) -> str:
    """The tag field of a component's version: its name with '-' and '.' as '_'."""
    return re.sub(r"[-.]", "_", component)


def template_fields(template: str) -> list[str]:
    """The {field}s of a tag template, each once, in order."""
    return list(dict.fromkeys(re.findall(r"\{([^}]*)\}", template)))


def tag_values(cat: Catalog, image: str, date: str = NO_DATE) -> dict[str, str | None]:
    """Every field a tag template may name → its value for ``image`` (None: no value here).
    A built-in field wins over a component whose name maps to the same field."""
    img = cat.images[image]
    base = cat.bases[img.base]
    tk = cat.toolkit_of(image)
    values: dict[str, str | None] = {
        component_field(c): comp.version if c in img.components else None
        for c, comp in cat.components.items()
    }
    # A fact the image lacks renders empty; `catalog validate` refuses a tag that names one.
    values.update({
        "name": image,
        "cann": tk.version.lower() if tk else "",  # as Ascend's own tags write it
        "cann_exact": tk.version if tk else "",
        "chip": base.chip or "",
        "os": base.os,
        "os_version": base.os_version,
        "python": cat.python_of(image) or "",
        "recipe": img.recipe,
        "soc": img.soc or "",
        "family": cat.family_for(image) or "",
        "version": cat.catalog.version,
        "date": date,
    })
    return values


def render_tag(
    cat: Catalog, image: str, template: str | None = None, date: str = NO_DATE
) -> str:
    """The image's tag, or ``template`` (one of its aliases) filled in the same way; ``date``
    is {date} (``YYYYMMDD``). The loader has checked that every field has a value."""
    values = tag_values(cat, image, date)
    text = template or cat.images[image].tag
    return re.sub(r"\{([a-z0-9_]+)\}", lambda m: values[m.group(1)] or "", text)


def toolkit_downloads(cat: Catalog, image: str) -> list[tuple[str, str, str]]:
    """(package name, TARGETARCH, URL) for each installer the image needs, in install order."""
    img = cat.images[image]
    base = cat.bases[img.base]
    tk = cat.toolkit_of(image)
    if tk is None or tk.provided == "host" or base.toolkit_version == tk.version:
        return []
    family = cat.family_for(image)
    out = []
    for pkg in tk.packages:
        if pkg.family and pkg.family != family:
            continue
        for arch in arches_of(img.platforms):
            out.append((pkg.name, arch, fill_url(pkg.url, version=tk.version, arch=arch)))
    return out


def file_downloads(cat: Catalog, image: str) -> list[tuple[str, str, str]]:
    """(download name, TARGETARCH, URL) for each file the image's build fetches."""
    img = cat.images[image]
    return [(d.name, arch, fill_url(d.url, arch=arch) if d.url else SECRET_URL + str(d.url_secret))
            for d in img.downloads for arch in arches_of(img.platforms)]


def python_source_url(cat: Catalog, image: str) -> str | None:
    """The URL of the Python source tarball ``image`` builds, or None (no source install)."""
    py = cat.images[image].python
    if py is None or py.install != "source" or py.url is None:
        return None
    return py.url.replace("{version}", py.version)


def stage_bases(cat: Catalog, image: str) -> list[str]:
    """The bases keys the image's builder stages start from (besides the image's own base)."""
    img = cat.images[image]
    return list(dict.fromkeys(s.base for s in img.stages if s.base and s.base != img.base))


# Wheel bundles by file name ending (torch_npu ships a .tar.gz, sgl-kernel-npu a .zip): the
# Dockerfile installs every wheel in one that fits the platform (bundle_wheel_fits), and the
# lock resolves their dependencies.
BUNDLES = {".zip": "zip", ".tar.gz": "tar.gz", ".tgz": "tar.gz"}
# The file-name endings of a bundle's wheels for one platform: that `uname -m`'s platform tag,
# or pure Python. The Dockerfile's `find` selects with the same patterns.
BUNDLE_WHEEL_ENDINGS = ("_{uname_arch}.whl", "-any.whl")


def bundle_wheel_fits(name: str, uname_arch: str, select: tuple[str, ...] = ()) -> bool:
    """Whether a bundle's wheel ``name`` is installed on the platform whose `uname -m` is
    ``uname_arch`` (torch_npu's daily bundle holds its x86_64 and aarch64 wheels): it fits the
    platform and, when the component names ``select`` (bundle_wheels), matches one of them."""
    import fnmatch

    fits = name.endswith(tuple(e.format(uname_arch=uname_arch) for e in BUNDLE_WHEEL_ENDINGS))
    return fits and (not select or any(
        fnmatch.fnmatchcase(name, p.replace("{uname_arch}", uname_arch)) for p in select))


def bundle_kind(url: str) -> str | None:
    """"zip" or "tar.gz" for a wheel bundle's URL, None for a single wheel."""
    return next((kind for end, kind in BUNDLES.items() if url.endswith(end)), None)


def wheel_urls(template: str, arches: tuple[str, ...]) -> list[tuple[str, str]]:
    """(TARGETARCH, URL) of a wheel component for each of ``arches``."""
    return [(a, fill_url(template, arch=a)) for a in arches]
