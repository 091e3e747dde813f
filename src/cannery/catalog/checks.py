"""The checks across a validated catalog's tables: references, toolkits, platforms, each
image against what it names (its own settings: image_checks.py), package managers.
Entries and keys without effect: effects.py."""

from __future__ import annotations

import re

from cannery.catalog.collector import Collector
from cannery.catalog.compat import check_image
from cannery.catalog.image_bases import PREFIX as IMAGE_BASE
from cannery.catalog.image_checks import (
    check_facts,
    check_host,
    check_overrides,
    check_publish,
    check_stages,
    tag_fields_ok,
)
from cannery.catalog.inputs import render_tag
from cannery.catalog.models import IMAGE_TAG, Catalog
from cannery.util.text import did_you_mean

# Where each install layout puts the toolkit (ASCEND.md): CANN ≥ 8.5 and ≤ 8.3.
LAYOUT_HOME = {
    "cann": "/usr/local/Ascend/cann-{version}",
    "ascend-toolkit": "/usr/local/Ascend/ascend-toolkit/latest",
}


def check_microdnf(cat: Catalog, col: Collector) -> None:
    """build_mirrors.packages reaches apt, dnf, yum and apk through a rewritten copy of the
    base's sources; microdnf has no setting cannery could point at one."""
    if not cat.build_mirrors.packages:
        return
    for iname, img in cat.images.items():
        for bname in dict.fromkeys([img.base, *(s.base for s in img.stages if s.base)]):
            base = cat.bases.get(bname)
            if base is not None and base.manager == "microdnf":
                col.error(("build_mirrors", "packages"),
                          f"image {iname}'s base {bname} installs with microdnf, which cannot "
                          "be pointed at a mirror for one step: drop the mirror or use dnf")
                return


def cross_check(cat: Catalog, col: Collector) -> None:
    """The references between tables, and each image against what it names: every error at
    the line of its key (the order of the checks is the order errors of one line are said)."""
    _check_catalog_refs(cat, col)
    _check_toolkits(cat, col)
    _check_platforms(cat, col)
    socs = [soc for f in cat.families.values() for soc in f.socs]
    tags: dict[str, str] = {}
    acknowledged: dict[tuple[str | int, ...], tuple[bool, str]] = {}
    for iname in cat.images:
        _check_image(cat, iname, col, socs, tags, acknowledged)
    _check_acknowledged(acknowledged, col)


def _check_catalog_refs(cat: Catalog, col: Collector) -> None:
    for cname, comp in cat.components.items():
        # (the schema says it too; here, to name the line where dest is written)
        if comp.git is not None and comp.dest is not None and comp.install == "pip":
            col.error(("components", cname, "dest"),
                      'dest has no effect with install = "pip": the tree is removed once '
                      'installed (keep it with install = "editable" or "none")')
    if cat.catalog.registry and cat.catalog.registry not in cat.registries:
        col.error(("catalog", "registry"), f"unknown registry {cat.catalog.registry!r}")
    for i, name in enumerate(cat.catalog.mirrors):
        if name not in cat.registries:
            col.error(("catalog", "mirrors", i),
                      f"unknown registry {name!r} ({did_you_mean(name, cat.registries)})")


def _check_toolkits(cat: Catalog, col: Collector) -> None:
    for tname, tk in cat.toolkits.items():
        if tk.env is None:  # a toolkit the host provides: nothing of it is in the image
            continue
        home = cat.envs.get(tk.env, {}).get("ASCEND_TOOLKIT_HOME")
        want = LAYOUT_HOME[tk.layout].replace("{version}", tk.version)
        if isinstance(home, str) and home.replace("{version}", tk.version) != want:
            col.error(
                ("envs", tk.env, "ASCEND_TOOLKIT_HOME"),
                f"{home!r} does not match toolkit {tname!r} (toolkits.{tname}.layout "
                f"{tk.layout!r} installs to {want})",
            )
        if tk.env not in cat.envs:
            col.error(
                ("toolkits", tname, "env"),
                f"unknown env table {tk.env!r} ({did_you_mean(tk.env, cat.envs)})",
            )
        for i, pkg in enumerate(tk.packages):
            if pkg.family and pkg.family not in cat.families:
                col.error(
                    ("toolkits", tname, "packages", i, "family"),
                    f"unknown SoC family {pkg.family!r} ({did_you_mean(pkg.family, cat.families)})",
                )


def _check_platforms(cat: Catalog, col: Collector) -> None:
    for iname, img in cat.images.items():
        for i, platform in enumerate(img.platforms):
            if platform not in cat.ci.runners:
                col.error(("images", iname, "platforms", i),
                          f"no CI runner for {platform} (add it to ci.runners)")


def _check_image(
    cat: Catalog, iname: str, col: Collector, socs: list[str], tags: dict[str, str],
    acknowledged: dict[tuple[str | int, ...], tuple[bool, str]],
) -> None:
    """One image: its references, inputs, SoC and chip, tags and compatibility; ``tags``
    (repository:tag → owner) and ``acknowledged`` gather across images."""
    img = cat.images[iname]
    where = ("images", iname)
    refs_ok = _image_refs(cat, iname, col)
    _check_inputs(cat, iname, refs_ok, col)
    family = cat.family_of(img.soc)
    if img.soc is not None and family is None:
        col.error(
            (*where, "soc"),
            f"unknown SOC_VERSION {img.soc!r} ({did_you_mean(img.soc, socs)})",
        )
        return
    check_stages(cat, iname, col)
    if not refs_ok or not _check_chip(cat, iname, family, col):
        return
    _check_tags(cat, iname, col, tags)
    _check_compat(cat, iname, col, acknowledged)


def _image_refs(cat: Catalog, iname: str, col: Collector) -> bool:
    """Whether the image's base, toolkit and components all exist (an error for each that
    does not)."""
    img = cat.images[iname]
    where = ("images", iname)
    refs_ok = True
    for fieldname, table in (("base", cat.bases), ("toolkit", cat.toolkits)):
        ref = getattr(img, fieldname)
        if fieldname == "base" and ref.startswith(IMAGE_BASE) and ref not in table:
            refs_ok = False  # derive_image_bases said why
        elif ref is not None and ref not in table:
            refs_ok = False
            col.error(
                (*where, fieldname), f"unknown {fieldname} {ref!r} ({did_you_mean(ref, table)})"
            )
    for i, comp_name in enumerate(img.components):
        if comp_name not in cat.components:
            refs_ok = False
            col.error(
                (*where, "components", i),
                f"unknown component {comp_name!r} ({did_you_mean(comp_name, cat.components)})",
            )
    return refs_ok


def _check_inputs(cat: Catalog, iname: str, refs_ok: bool, col: Collector) -> None:
    img = cat.images[iname]
    where = ("images", iname)
    if len(set(img.components)) != len(img.components):
        col.error((*where, "components"), "a component is listed twice")
    if img.revision_from and img.revision_from not in img.components:
        col.error(
            (*where, "revision_from"),
            f"{img.revision_from!r} is not one of this image's components",
        )
    registry = img.registry or cat.catalog.registry
    if registry is None:
        col.error(where, "no registry: set images.<name>.registry or catalog.registry")
    elif registry not in cat.registries:
        col.error((*where, "registry"), f"unknown registry {registry!r}")
    check_publish(cat, iname, registry, col)
    if refs_ok:
        check_host(cat, iname, col)
    seen: dict[str, str] = {}
    for i, dl in enumerate(img.downloads):
        # the build's variables are the name with '.' and '-' as '_': one per download
        var = re.sub(r"[^a-z0-9]", "_", dl.name)
        if var in seen:
            col.error((*where, "downloads", i, "name"),
                      f"{dl.name!r}: another download of this image is named {seen[var]!r} "
                      "(names must differ in more than '.', '-' and '_')")
        seen.setdefault(var, dl.name)


def _check_chip(cat: Catalog, iname: str, family: str | None, col: Collector) -> bool:
    """The image's toolkit and SoC against its base's chip, then its facts; False when the
    base has no chip for them (nothing further of the image is checked)."""
    img = cat.images[iname]
    where = ("images", iname)
    base = cat.bases[img.base]
    if base.chip is None and (img.toolkit is not None or img.soc is not None):
        # a toolkit's packages and env, and a SoC, are per chip: a plain OS base has none
        col.error((*where, "toolkit" if img.toolkit is not None else "soc"),
                  f"{'a toolkit' if img.toolkit is not None else 'a soc'} needs the chip of "
                  f"the image's base, and bases.{img.base}.chip is not set")
        return False
    fam = cat.families[family] if family is not None else None
    if fam is not None and fam.chip != base.chip:
        col.error(
            (*where, "soc"),
            f"SOC_VERSION {img.soc} is an {family} SoC (chip {fam.chip}) but base "
            f"{img.base!r} is built for chip {base.chip!r}",
        )
    check_facts(cat, iname, col)
    family = cat.family_for(iname)
    itk = cat.toolkit_of(iname)
    fams = {p.family for p in itk.packages if p.family} if itk is not None else set()
    if fams and family is None:
        col.error(
            (*where, "toolkit"),
            f"toolkit {img.toolkit!r} has packages per SoC family "
            f"({', '.join(sorted(fams))}), and the image has no soc and its base's chip "
            f"{base.chip!r} no single family: set soc",
        )
    elif fams and family not in fams:
        col.error(
            (*where, "toolkit"),
            f"toolkit {img.toolkit!r} has no package for family {family} "
            f"(it has: {', '.join(sorted(fams))})",
        )
    return True


def _check_tags(cat: Catalog, iname: str, col: Collector, tags: dict[str, str]) -> None:
    """The image's tag and aliases render to valid tags, each with one owner per repository
    (``tags``: repository:tag → the image that claimed it first)."""
    img = cat.images[iname]
    where = ("images", iname)
    # Every repository the image is published to (its registry, then its mirrors, as the
    # plan lists them): a tag is owned per repository, so two images that share any one of
    # them cannot both claim it.
    published = cat.published_to(iname)
    repositories = list(dict.fromkeys(
        cat.registries[n].repository for n in published if n in cat.registries
    )) or [""]
    templates: list[tuple[tuple[str | int, ...], str]] = [((*where, "tag"), img.tag)]
    templates += [((*where, "aliases", i), a) for i, a in enumerate(img.aliases)]
    named = [(at, render_tag(cat, iname, t)) for at, t in templates
             if tag_fields_ok(cat, iname, at, t, col)]
    for at, tag in named:
        if not IMAGE_TAG.fullmatch(tag):
            col.error(
                at,
                f"renders to {tag!r}, not a valid image tag (letters, digits, '_', '.', '-'; "
                "at most 128; not starting with '.' or '-')",
            )
        # A tag has one owner: two images moving it would each undo the other's push.
        for repository in repositories:
            owner = tags.get(f"{repository}:{tag}")
            if owner is not None and owner != iname:
                col.error(at, f"tag {tag!r} in {repository} is claimed by images {owner!r} "
                          f"and {iname!r}: a tag has one owner")
                break
            if owner == iname:
                col.error(at, f"tag {tag!r} is given twice for this image")
                break
            tags[f"{repository}:{tag}"] = iname


def _check_compat(
    cat: Catalog, iname: str, col: Collector,
    acknowledged: dict[tuple[str | int, ...], tuple[bool, str]],
) -> None:
    img = cat.images[iname]
    where = ("images", iname)
    check_overrides(cat, iname, col)
    fired: set[str] = set()
    for level, code, fieldname, message in check_image(cat, iname):
        fired.add(code)
        if level == "error":
            col.error((*where, fieldname), message)
        elif code not in img.acknowledge:
            col.warn(
                (*where, fieldname),
                code,
                message + f" (add {code!r} to images.{iname}.acknowledge to accept)",
            )
    for i, code in enumerate(img.acknowledge):
        written = col.written((*where, "acknowledge", i))
        acknowledged[written] = (acknowledged.get(written, (False, code))[0]
                                 or code in fired, code)


def _check_acknowledged(
    acknowledged: dict[tuple[str | int, ...], tuple[bool, str]], col: Collector
) -> None:
    for written, (used, code) in acknowledged.items():
        if not used:
            # Accepting a warning that does not occur has no effect: say so, or it hides the
            # next real one. Written once and inherited: an error only if no image needs it.
            col.error(written, f"{code!r} is acknowledged but no image that inherits it has that "
                      "warning: remove it")
