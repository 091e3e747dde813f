"""The checks across a validated catalog's tables: references, effects, overrides,
publishing, stages, facts, uv, host toolkits and package managers."""

from __future__ import annotations

import re
from difflib import get_close_matches
from typing import Any

from cannery.catalog.collector import Collector
from cannery.catalog.compat import check_image
from cannery.catalog.hosts import table_chips
from cannery.catalog.image_bases import PREFIX as IMAGE_BASE
from cannery.catalog.inputs import component_field, render_tag, tag_values, template_fields
from cannery.catalog.models import IMAGE_TAG, TAG_FIELDS, Catalog, Override, PathEdit
from cannery.util.pynames import requirement_name
from cannery.util.text import did_you_mean

# Where each install layout puts the toolkit (ASCEND.md): CANN ≥ 8.5 and ≤ 8.3.
LAYOUT_HOME = {
    "cann": "/usr/local/Ascend/cann-{version}",
    "ascend-toolkit": "/usr/local/Ascend/ascend-toolkit/latest",
}


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


# The labels cannery writes on every image (and revision with revision_from), and where each
# value comes from; the io.cannery.* ones no image may write (models.Image._labels).
OWN_LABELS = {
    "org.opencontainers.image.source": "catalog.source",
    "org.opencontainers.image.version": "the image's tag",
    "org.opencontainers.image.base.name": "the base image",
    "org.opencontainers.image.base.digest": "the base image's locked digest",
}
REVISION_LABEL = "org.opencontainers.image.revision"


def _check_overrides(cat: Catalog, iname: str, col: Collector) -> None:
    """An image's label or env entry that would replace one cannery writes (its own labels, the
    toolkit's env) is an error naming both, unless it says override = true; override = true
    where nothing is replaced is an error too (it would say something untrue)."""
    img = cat.images[iname]
    own = dict(OWN_LABELS)
    if img.revision_from:
        own[REVISION_LABEL] = f"the commit of {img.revision_from} (revision_from)"
    for key, value in img.labels.items():
        at = ("images", iname, "labels", key)
        if isinstance(value, str) and key in own:
            col.error(at, f"label {key} would replace the one cannery writes from {own[key]}: "
                      f'write {key} = {{ value = "...", override = true }} to mean it')
        elif not isinstance(value, str) and key not in own:
            col.error(at, f"override = true, but cannery writes no label {key} on this image: "
                      "give the plain value")
    itk = cat.toolkit_of(iname)
    tk_env = cat.envs.get(itk.env, {}) if itk is not None and itk.env is not None else {}
    for var, env in img.env.items():
        at = ("images", iname, "env", var)
        theirs = tk_env.get(var)
        if isinstance(theirs, list) and not isinstance(env, PathEdit):
            col.error(
                at,
                f"{var} is a search path the toolkit sets; a plain value would drop the "
                f"toolkit's entries: write {var} = {{ append = [...] }}, prepend, or "
                "replace to say so",
            )
        elif isinstance(theirs, str) and isinstance(env, str):
            col.error(at, f"{var} would replace the toolkit's {var} = {theirs!r} (envs."
                      f"{itk.env if itk else ''}): write {var} = {{ value = \"{env}\", override = "
                      "true } to mean it")
        elif isinstance(env, Override) and theirs is None:
            col.error(at, f"override = true, but the image's toolkit sets no {var}: give the "
                      "plain value")


def _check_publish(
    cat: Catalog,
    iname: str,
    registry: str | None,
    col: Collector,
) -> None:
    """Mirrors name known registries other than the image's own, each once."""
    img = cat.images[iname]
    where = ("images", iname)
    if img.mirrors is not None:
        for i, name in enumerate(img.mirrors):
            if name not in cat.registries:
                col.error((*where, "mirrors", i),
                          f"unknown registry {name!r} ({did_you_mean(name, cat.registries)})")
            elif name == registry:
                col.error((*where, "mirrors", i),
                          f"{name!r} is the image's own registry, not a mirror")
        if len(set(img.mirrors)) != len(img.mirrors):
            col.error((*where, "mirrors"), "a registry is listed twice")


def _tag_fields_ok(
    cat: Catalog, image: str, at: tuple[str | int, ...], template: str, col: Collector
) -> bool:
    """Every {field} of ``template`` is known and has a value for ``image``. Unknown fields
    are one error at the line where the template is written (an `extends` child inherits it,
    and is not told again); a field without a value names the image and the field."""
    comps = {component_field(c): c for c in cat.components}
    fields = template_fields(template)
    unknown = [f for f in fields if f not in TAG_FIELDS and f not in comps]
    if unknown:
        known = [*TAG_FIELDS, *sorted(comps)]
        names = ", ".join(f"{{{f}}}" for f in unknown)
        close = [f"{{{m[0]}}}" for f in unknown if (m := get_close_matches(f, known, n=1))]
        hint = f"did you mean {', '.join(close)}? " if close else ""
        col.error(at, f"unknown tag template field{'s' if len(unknown) > 1 else ''} {names} "
                  f"({hint}known: {', '.join(f'{{{k}}}' for k in known)}; a component's field "
                  "is its name with '-' and '.' as '_')")
    values = tag_values(cat, image)
    # A fact the image lacks (no Python, toolkit, soc or family) renders "": named as such.
    lacking = [f for f in fields if f in TAG_FACTS and values.get(f) == ""]
    for f in lacking:
        col.error(at, f"tag field {{{f}}}: the image has no {TAG_FACTS[f]}")
    # An empty version is no value either: it would vanish from the tag.
    missing = [f for f in fields if f not in unknown and f not in lacking and (
        values.get(f) is None or (values.get(f) == "" and (f == "version" or f not in TAG_FIELDS))
    )]
    for f in missing:
        if f == "version":
            why = "catalog.version is " + ("empty" if values.get(f) == "" else "not set")
        elif comps[f] not in cat.images[image].components:
            why = f"component {comps[f]!r} is not one of its components"
        else:
            why = f"component {comps[f]!r} has no version"
        col.error(at, f"image {image}: tag field {{{f}}} has no value ({why})")
    return not unknown and not lacking and not missing


def _check_stages(cat: Catalog, iname: str, col: Collector) -> None:
    """Builder stages: distinct names, known bases, Python where a step needs it."""
    img = cat.images[iname]
    seen: set[str] = set()
    for i, stage in enumerate(img.stages):
        at = ("images", iname, "stages", i)
        if stage.name in seen:
            col.error((*at, "name"), f"stage {stage.name!r} is defined twice in this image")
        seen.add(stage.name)
        base = cat.bases.get(stage.base or img.base)
        if stage.base is not None and stage.base.startswith(IMAGE_BASE):
            col.error((*at, "base"), f"{stage.base!r}: a builder stage starts from a bases "
                      "entry; only an image's own base can be another image of the catalog")
            continue
        if stage.base is not None and base is None:
            col.error((*at, "base"),
                      f"unknown base {stage.base!r} ({did_you_mean(stage.base, cat.bases)})")
        for j, step in enumerate(stage.steps):
            if step.uninstall is not None and base is not None and base.python is None:
                col.error((*at, "steps", j, "uninstall"),
                          f"pip uninstall needs Python, and base {stage.base or img.base!r} of "
                          "this stage has none (bases.X.python)")


# What an image uses its Python for: each of these, when non-empty, needs one.
NEEDS_PYTHON = ("components", "pip_tools", "smoke_imports")
# The pip_args options `uv pip install` takes as pip does (installer = "uv"); values
# (`--opt=value`, `-Cvalue`, or the next item) are not checked. Not among them: what the
# rendered uv command passes itself (`--no-cache-dir` is its `--no-cache`, `--index-url` the
# catalog's python_index), which uv refuses to be given twice.
UV_PIP_ARGS = frozenset({
    "--no-build-isolation", "--no-deps", "--pre", "--upgrade", "-U", "--verbose", "-v",
    "--quiet", "-q", "--extra-index-url", "--config-settings", "-C", "--no-binary",
    "--only-binary", "--force-reinstall", "--reinstall",
})
# Tag fields that name a fact the image may not have.
TAG_FACTS = {"python": "python", "cann": "toolkit", "cann_exact": "toolkit", "soc": "soc",
             "family": "family", "chip": "chip (its base sets none)"}


def _check_facts(cat: Catalog, iname: str, col: Collector) -> None:
    """Python, the toolkit and the SoC are facts of the image, not assumptions: whatever uses
    one that the image does not have is an error where it is written (a tag field naming one:
    _tag_fields_ok)."""
    img = cat.images[iname]
    where = ("images", iname)
    python = cat.python_of(iname)
    if python is None:
        needs: list[tuple[str | int, ...]] = [(k,) for k in NEEDS_PYTHON if getattr(img, k)]
        needs += [("steps", i, "uninstall") for i, s in enumerate(img.steps) if s.uninstall]
        for path in needs:
            col.error((*where, *path),
                      f"needs Python, and neither base {img.base!r} ships one (bases.X.python) "
                      "nor the image installs one ([images.X.python])")
    if img.installer == "uv":
        _check_uv(cat, iname, col)
    tk = cat.toolkit_of(iname)
    for i, cname in enumerate(img.components):
        comp = cat.components.get(cname)
        if comp is None or not comp.toolkit_build:
            continue
        if img.soc is None:
            col.error((*where, "components", i),
                      f"component {cname!r} has toolkit_build = true, which needs the image's "
                      "soc (SOC_VERSION)")
        if tk is None or tk.provided == "host":
            what = "has no toolkit" if tk is None else "gets its toolkit from the host at run time"
            col.error((*where, "components", i),
                      f"component {cname!r} has toolkit_build = true, but the image {what}: "
                      "nothing to build against")


def _check_uv(cat: Catalog, iname: str, col: Collector) -> None:
    """installer = "uv": uv is installed by the image's own Python tools step (pinned and
    hash-checked with the rest of the lock), on every platform, and uv takes every
    component's pip_args (one difference stays: with several indexes uv takes a package
    from the first index that has it, where pip merges them; see docs/catalog.md)."""
    img = cat.images[iname]
    tools = {requirement_name(t): t for t in img.pip_tools}
    if "uv" not in tools:
        col.error(("images", iname, "installer"),
                  'installer = "uv" needs uv in this image\'s pip_tools (e.g. "uv==0.13.9"), '
                  "which installs it before the components")
    elif ";" in tools["uv"]:
        col.error(("images", iname, "installer"),
                  f'installer = "uv" needs uv on every platform of the image: pip_tools has '
                  f"{tools['uv']!r}, with an environment marker")
    for i, cname in enumerate(img.components):
        comp = cat.components.get(cname)
        for arg in comp.pip_args if comp is not None else ():
            flag = "-C" if arg.startswith("-C") else arg.split("=", 1)[0]
            if arg.startswith("-") and flag not in UV_PIP_ARGS:
                col.error(("images", iname, "components", i),
                          f'installer = "uv": component {cname!r} has pip_args {arg!r}, which '
                          f"the rendered uv pip install cannot take as pip does (it takes: "
                          f"{', '.join(sorted(UV_PIP_ARGS))})")


def _check_host(cat: Catalog, iname: str, col: Collector) -> None:
    """An image's `host` table only where there is a CANN toolkit in the image, and its chip
    among those the built-in table gives its CANN release, unless `host.chips` says so."""
    img = cat.images[iname]
    tk = cat.toolkit_of(iname)
    in_image = tk is not None and tk.provided == "image"
    if img.host is not None and not in_image:
        col.error(("images", iname, "host"),
                  "host has no effect: the image has no CANN toolkit in it, so it needs no "
                  "driver of the node")
        return
    chip = cat.bases[img.base].chip
    if tk is None or not in_image or chip is None or (img.host and img.host.chips):
        return
    chips = table_chips(tk.version)
    if chips is not None and chip not in chips:
        col.error(("images", iname, "toolkit"),
                  f"CANN {tk.version} does not run on chip {chip!r} (Ascend publishes it for "
                  f"{', '.join(chips)}: ascend.toml [[hosts]]); if this image does, say so in "
                  "host.chips")


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
    _check_stages(cat, iname, col)
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
    _check_publish(cat, iname, registry, col)
    if refs_ok:
        _check_host(cat, iname, col)
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
    _check_facts(cat, iname, col)
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
             if _tag_fields_ok(cat, iname, at, t, col)]
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
    _check_overrides(cat, iname, col)
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
