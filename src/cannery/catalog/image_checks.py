"""The checks of one image's own settings: label and env overrides, publishing, tag
fields, stages, the facts its tags name, uv and host toolkits."""

from __future__ import annotations

from difflib import get_close_matches

from cannery.catalog.collector import Collector
from cannery.catalog.hosts import table_chips
from cannery.catalog.image_bases import PREFIX as IMAGE_BASE
from cannery.catalog.inputs import component_field, tag_values, template_fields
from cannery.catalog.models import TAG_FIELDS, Catalog, Override, PathEdit
from cannery.util.pynames import requirement_name
from cannery.util.text import did_you_mean

# The labels cannery writes on every image (and revision with revision_from), and where each
# value comes from; the io.cannery.* ones no image may write (models.Image._labels).
OWN_LABELS = {
    "org.opencontainers.image.source": "catalog.source",
    "org.opencontainers.image.version": "the image's tag",
    "org.opencontainers.image.base.name": "the base image",
    "org.opencontainers.image.base.digest": "the base image's locked digest",
}
REVISION_LABEL = "org.opencontainers.image.revision"


def check_overrides(cat: Catalog, iname: str, col: Collector) -> None:
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


def check_publish(
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


def tag_fields_ok(
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


def check_stages(cat: Catalog, iname: str, col: Collector) -> None:
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


def check_facts(cat: Catalog, iname: str, col: Collector) -> None:
    """Python, the toolkit and the SoC are facts of the image, not assumptions: whatever uses
    one that the image does not have is an error where it is written (a tag field naming one:
    tag_fields_ok)."""
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


def check_host(cat: Catalog, iname: str, col: Collector) -> None:
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
