"""Nothing silent: the entries and keys of a validated catalog that would have no effect."""

from __future__ import annotations

from typing import Any

from cannery.catalog.collector import Collector
from cannery.catalog.inputs import template_fields
from cannery.catalog.models import Catalog


def check_effects(cat: Catalog, col: Collector) -> None:
    """Nothing silent: an entry that nothing uses, or a key whose only effect would be a label
    or nothing, is an error that says why (the catalog is checked and its references known)."""
    used: dict[str, set[str]] = {t: set() for t in ("registries", "bases", "toolkits",
                                                     "components", "envs", "families")}
    for iname, img in cat.images.items():
        used["registries"].update(cat.published_to(iname))
        used["bases"].update([img.base, *(s.base for s in img.stages if s.base)])
        used["components"].update(img.components)
        if img.toolkit is not None:
            used["toolkits"].add(img.toolkit)
        family = cat.family_for(iname)
        if family is not None:
            used["families"].add(family)
    used["envs"] = {tk.env for n, tk in cat.toolkits.items()
                    if n in used["toolkits"] and tk.env is not None}
    what = {"registries": "no image is published to it (images.X.registry, catalog.registry, "
                          "mirrors)",
            "bases": "no image or stage is built on it", "toolkits": "no image names it",
            "components": "no image installs it", "envs": "no toolkit an image uses names it",
            "families": "no image's SoC or chip is of it"}
    for table, names in used.items():
        # an entry that others extend is used through them
        for name in list(names):
            names.update(col.chain(table, name))
        entries: Any = getattr(cat, table)
        for name in entries:
            if name not in names and (table not in col.own or name in col.own[table]):
                col.error((table, name), f"{table}.{name} has no effect: {what[table]}; "
                          "remove it")
    published = [img.registry for img in cat.images.values()]
    if cat.catalog.registry and cat.images and None not in published:
        col.error(("catalog", "registry"), "catalog.registry has no effect: every image names "
                  "its own registry")
    mirrors = [img.mirrors for img in cat.images.values()]
    if cat.catalog.mirrors and cat.images and None not in mirrors:
        col.error(("catalog", "mirrors"), "catalog.mirrors has no effect: every image names "
                  "its own mirrors")
    templates = [t for img in cat.images.values() for t in (img.tag, *img.aliases)]
    if cat.catalog.version is not None and not cat.ci.release_tags and not cat.ci.releases \
            and not any("version" in template_fields(t) for t in templates):
        col.error(("catalog", "version"), "catalog.version has no effect: no tag or alias "
                  "names {version}, [ci] release_tags is empty and [ci] releases is off")
    for tname, tk in cat.toolkits.items():
        builders = [c for iname, img in cat.images.items() if img.toolkit == tname
                    for c in img.components if cat.components[c].toolkit_build]
        if tk.devlib is not None and not builders:
            col.error(("toolkits", tname, "devlib"), "devlib has no effect: no image with "
                      "this toolkit builds a component against it (toolkit_build = true)")
    # a soc is written once and inherited: an error only if no image that has it uses it
    soc_used: dict[tuple[str | int, ...], bool] = {}
    for iname, img in cat.images.items():
        if img.soc is None:
            continue
        itk = cat.toolkit_of(iname)
        # what picks the SoC family's packages without a soc (Catalog.family_for)
        of_chip = [f for f, fam in cat.families.items() if fam.chip == cat.bases[img.base].chip]
        chip_family = of_chip[0] if len(of_chip) == 1 else None
        picks_packages = itk is not None and any(p.family for p in itk.packages) and (
            cat.family_of(img.soc) != chip_family)
        written = col.written(("images", iname, "soc"))
        soc_used[written] = soc_used.get(written, False) or (
            any(cat.components[c].toolkit_build for c in img.components)
            or any("soc" in template_fields(t) for t in (img.tag, *img.aliases))
            or picks_packages)
    for written, effect in soc_used.items():
        # one that replaces an inherited soc corrects what the label would claim: kept
        replaces = any(cat.images[p].soc for p in col.chain("images", str(written[1]))[1:]
                       if p in cat.images)
        if not effect and not replaces:
            col.error(written, "soc has no effect but a label: no component of an image that "
                      "has it builds for it (toolkit_build = true), no tag names {soc}, and it "
                      "picks no toolkit package; omit it for a chip-generic image")
