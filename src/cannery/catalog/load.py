"""Load a catalog file: TOML → extends resolved → models → cross-references and compatibility.

Every problem is reported as ``file:line: field.path: reason``; all of them are collected before
raising, so one run shows everything that is wrong.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cannery.catalog.compat import check_image
from cannery.catalog.inputs import render_tag
from cannery.catalog.locate import LineMap
from cannery.catalog.models import IMAGE_TAG, Catalog
from cannery.errors import CatalogError, Location
from cannery.util import toml
from cannery.util.text import did_you_mean

EMBEDDED = "<embedded>/default.toml"
# Where each install layout puts the toolkit (ASCEND.md): CANN ≥ 8.5 and ≤ 8.3.
LAYOUT_HOME = {
    "cann": "/usr/local/Ascend/cann-{version}",
    "ascend-toolkit": "/usr/local/Ascend/ascend-toolkit/latest",
}


@dataclass(frozen=True)
class Problem:
    where: Location
    message: str
    code: str = "error"

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass
class LoadedCatalog:
    catalog: Catalog
    path: str
    digest: str  # sha256 of the catalog file's bytes
    warnings: list[Problem] = field(default_factory=list)


def _read_data(name: str) -> str:
    return (resources.files("cannery.catalog") / "data" / name).read_text(encoding="utf-8")


def default_catalog_text() -> str:
    return _read_data("default.toml")


def _fmt_path(path: tuple[str | int, ...]) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


class _Collector:
    def __init__(self, path: str, lines: LineMap) -> None:
        self.path = path
        self.lines = lines
        self.errors: list[Problem] = []
        self.warnings: list[Problem] = []

    def at(self, fpath: tuple[str | int, ...]) -> Location:
        return Location(self.path, self.lines.line_of(fpath), _fmt_path(fpath))

    def error(self, fpath: tuple[str | int, ...], message: str) -> None:
        self.errors.append(Problem(self.at(fpath), message))

    def warn(self, fpath: tuple[str | int, ...], code: str, message: str) -> None:
        self.warnings.append(Problem(self.at(fpath), f"warning[{code}]: {message}", code))


# Tables whose entries may say `extends = "<sibling>"`: the sibling's keys, then their own.
EXTENDABLE = {"images": "image", "components": "component", "bases": "base", "envs": "env table"}


def _resolve_extends(raw: dict[str, Any], col: _Collector) -> None:
    for table, what in EXTENDABLE.items():
        _resolve_table_extends(raw, table, what, col)


def _resolve_table_extends(raw: dict[str, Any], table: str, what: str, col: _Collector) -> None:
    entries = raw.get(table)
    if not isinstance(entries, dict):
        return
    done: dict[str, dict[str, Any]] = {}

    def resolve(name: str, chain: list[str]) -> dict[str, Any] | None:
        if name in done:
            return done[name]
        body = entries[name]
        if not isinstance(body, dict):
            return None
        parent_name = body.get("extends")
        if parent_name is None:
            done[name] = body
            return body
        if not isinstance(parent_name, str) or parent_name not in entries:
            col.error(
                (table, name, "extends"),
                f"unknown {what} {parent_name!r} "
                f"({did_you_mean(str(parent_name), list(entries))})",
            )
            return None
        if parent_name in chain:
            cycle = " -> ".join([*chain[chain.index(parent_name) :], parent_name])
            col.error((table, name, "extends"), f"cyclic extends: {cycle}")
            return None
        parent = resolve(parent_name, [*chain, parent_name])
        if parent is None:
            return None
        merged = copy.deepcopy(parent)
        merged.pop("extends", None)
        for key, value in body.items():
            if table == "images" and key == "labels" and isinstance(value, dict):
                merged["labels"] = {**merged.get("labels", {}), **value}
            elif key != "extends":
                merged[key] = value
        done[name] = merged
        return merged

    for name in list(entries):
        result = resolve(name, [name])
        if result is not None:
            entries[name] = result


def _merge_knowledge(raw: dict[str, Any]) -> None:
    """Ascend facts (SoC families, toolkit env tables, compatibility table) that every catalog
    starts from."""
    known = toml.loads(_read_data("ascend.toml"))
    families = {**known["families"], **raw.get("families", {})}
    raw["families"] = families
    # set_env.sh of each CANN line, so a catalog can name them without copying (its own win).
    envs = raw.get("envs", {})
    if isinstance(envs, dict):
        raw["envs"] = {**known["envs"], **envs}
    compat = raw.get("compat", {})
    if isinstance(compat, dict):
        merged = {**known["compat"], **{k: v for k, v in compat.items() if k != "rows"}}
        merged["rows"] = [*compat.get("rows", []), *known["compat"]["rows"]]
        raw["compat"] = merged


def load_catalog(path: Path | None = None) -> LoadedCatalog:
    """Load ``path`` (or the embedded default catalog) and validate it completely."""
    if path is None:
        text, shown = default_catalog_text(), EMBEDDED
    else:
        shown = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise CatalogError([f"{shown}: no such catalog file"]) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise CatalogError([f"{shown}: cannot read: {exc}"]) from None
    try:
        raw = toml.loads(text)
    except toml.TOMLDecodeError as exc:
        raise CatalogError([toml.syntax_error(shown, text, exc)]) from None

    col = _Collector(shown, LineMap(text))
    _merge_knowledge(raw)
    _resolve_extends(raw, col)
    if col.errors:
        raise CatalogError([str(p) for p in col.errors])
    try:
        catalog = Catalog.model_validate(raw)
    except ValidationError as exc:
        for err in exc.errors():
            loc = tuple(err["loc"])
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                parent = _get(raw, loc[:-1])
                allowed = _allowed_keys(loc[:-1])
                msg = f"unknown key {loc[-1]!r}"
                if allowed:
                    msg += f" ({did_you_mean(str(loc[-1]), allowed)})"
                del parent
            elif err["type"] == "missing":
                msg = f"missing required key {loc[-1]!r}"
            col.error(loc, msg)
        raise CatalogError([str(p) for p in col.errors]) from None

    _cross_check(catalog, col)
    if col.errors:
        raise CatalogError([str(p) for p in col.errors])
    digest = hashlib.sha256(text.encode()).hexdigest()
    return LoadedCatalog(catalog, shown, digest, col.warnings)


def _get(raw: Any, loc: tuple[Any, ...]) -> Any:
    for part in loc:
        try:
            raw = raw[part]
        except (KeyError, IndexError, TypeError):
            return None
    return raw


def _allowed_keys(loc: tuple[Any, ...]) -> list[str]:
    """Field names of the model at ``loc`` (for 'did you mean')."""
    from pydantic import BaseModel

    from cannery.catalog import models

    model: type[BaseModel] = models.Catalog
    i = 0
    while i < len(loc):
        key = loc[i]
        info = model.model_fields.get(str(key))
        if info is None:
            return []
        ann = info.annotation
        nxt = _model_in(ann)
        if nxt is None:
            return []
        # dict[str, Model] or list[Model] consume one more path element
        origin = getattr(ann, "__origin__", None)
        if origin in (dict, list):
            i += 1
        model = nxt
        i += 1
    return list(model.model_fields)


def _model_in(ann: Any) -> Any:
    from pydantic import BaseModel

    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann
    for arg in getattr(ann, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _check_publish(
    cat: Catalog,
    iname: str,
    registry: str | None,
    col: _Collector,
    aliases: dict[tuple[str, str], str],
) -> None:
    """Mirrors name known registries other than the image's own; an alias is a valid tag that
    one image owns in a repository (two owners would race for it)."""
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
    targets = [registry or "", *(img.mirrors if img.mirrors is not None else cat.catalog.mirrors)]
    for i, alias in enumerate(img.aliases):
        if not IMAGE_TAG.match(alias) or "{" in alias:
            col.error((*where, "aliases", i), f"{alias!r} is not a valid image tag")
            continue
        for name in targets:
            if name not in cat.registries:
                continue
            key = (cat.registries[name].repository, alias)
            owner = aliases.setdefault(key, iname)
            if owner != iname:
                col.error((*where, "aliases", i),
                          f"alias {alias!r} in {key[0]} is already owned by image {owner!r}")
                break


def _cross_check(cat: Catalog, col: _Collector) -> None:
    if cat.catalog.registry and cat.catalog.registry not in cat.registries:
        col.error(("catalog", "registry"), f"unknown registry {cat.catalog.registry!r}")
    for i, name in enumerate(cat.catalog.mirrors):
        if name not in cat.registries:
            col.error(("catalog", "mirrors", i),
                      f"unknown registry {name!r} ({did_you_mean(name, cat.registries)})")
    for tname, tk in cat.toolkits.items():
        home = cat.envs.get(tk.env, {}).get("ASCEND_TOOLKIT_HOME")
        want = LAYOUT_HOME[tk.layout].replace("{version}", tk.version)
        if isinstance(home, str) and home.replace("{version}", tk.version) != want:
            col.error(
                ("envs", tk.env, "ASCEND_TOOLKIT_HOME"),
                f"{home!r} does not match toolkit {tname!r} (layout {tk.layout!r} installs "
                f"to {want})",
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
    for ename, env in cat.envs.items():
        for var in env:
            if not var.replace("_", "a").isalnum() or var[0].isdigit():
                col.error(("envs", ename, var), f"{var!r} is not a valid environment variable name")
    for iname, img in cat.images.items():
        for i, platform in enumerate(img.platforms):
            if platform not in cat.ci.runners:
                col.error(("images", iname, "platforms", i),
                          f"no CI runner for {platform} (add it to ci.runners)")
    for cname, comp in cat.components.items():
        if comp.jobs and not comp.git:
            col.error(
                ("components", cname, "jobs"), "a job limit applies to a built (git) component"
            )
    socs = [soc for f in cat.families.values() for soc in f.socs]
    tags: dict[str, str] = {}
    aliases: dict[tuple[str, str], str] = {}
    for iname, img in cat.images.items():
        where = ("images", iname)
        refs_ok = True
        for fieldname, table in (("base", cat.bases), ("toolkit", cat.toolkits)):
            ref = getattr(img, fieldname)
            if ref not in table:
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
        _check_publish(cat, iname, registry, col, aliases)
        family = cat.family_of(img.soc)
        if family is None:
            col.error(
                (*where, "soc"),
                f"unknown SOC_VERSION {img.soc!r} ({did_you_mean(img.soc, socs)})",
            )
            continue
        if not refs_ok:
            continue
        base = cat.bases[img.base]
        fam = cat.families[family]
        if fam.chip != base.chip:
            col.error(
                (*where, "soc"),
                f"SOC_VERSION {img.soc} is an {family} SoC (chip {fam.chip}) but base "
                f"{img.base!r} is built for chip {base.chip!r}",
            )
        tk = cat.toolkits[img.toolkit]
        fams = {p.family for p in tk.packages if p.family}
        if fams and family not in fams:
            col.error(
                (*where, "toolkit"),
                f"toolkit {img.toolkit!r} has no package for family {family} "
                f"(it has: {', '.join(sorted(fams))})",
            )
        tag = render_tag(cat, iname)
        if not IMAGE_TAG.match(tag):
            col.error(
                (*where, "tag"),
                f"renders to {tag!r}, not a valid image tag (letters, digits, '_', '.', '-'; "
                "at most 128; not starting with '.' or '-')",
            )
        if tag in tags:
            col.error((*where, "tag"), f"tag {tag!r} is also produced by image {tags[tag]!r}")
        tags[tag] = iname
        for level, code, fieldname, message in check_image(cat, iname):
            if level == "error":
                col.error((*where, fieldname), message)
            elif code not in img.acknowledge:
                col.warn(
                    (*where, fieldname),
                    code,
                    message + f" (add {code!r} to images.{iname}.acknowledge to accept)",
                )
