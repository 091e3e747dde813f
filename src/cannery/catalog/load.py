"""Load a catalog file: TOML → extends resolved → models → cross-references and compatibility.

Every problem is reported as ``file:line: field.path: reason``; all of them are collected before
raising, so one run shows everything that is wrong.
"""

from __future__ import annotations

import copy
import hashlib
import re
from dataclasses import dataclass, field
from difflib import get_close_matches
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cannery.catalog.compat import check_image
from cannery.catalog.hosts import table_chips
from cannery.catalog.image_bases import PREFIX as IMAGE_BASE
from cannery.catalog.image_bases import derive as derive_image_bases
from cannery.catalog.inputs import component_field, render_tag, tag_values, template_fields
from cannery.catalog.locate import LineMap
from cannery.catalog.matrix import Expanded
from cannery.catalog.matrix import expand as expand_matrices
from cannery.catalog.models import (
    IMAGE_TAG,
    PATTERN_WORDS,
    TAG_FIELDS,
    Catalog,
    Override,
    PathEdit,
)
from cannery.errors import CatalogError, Location
from cannery.util import toml
from cannery.util.bounded import NotRegularFile, OverLimit, read_regular_file
from cannery.util.env import hide_from_children
from cannery.util.patterns import CONTROL
from cannery.util.pynames import requirement_name
from cannery.util.text import did_you_mean

EMBEDDED = "<embedded>/default.toml"
CATALOG_LIMIT = 16 << 20  # a catalog file larger than this is refused unread
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
    # Where each key is written (extends and matrices resolved), kept for the checks that run
    # after loading (cannery.render.checks), so that their errors read as loading's own.
    _col: _Collector | None = field(default=None, repr=False, compare=False)

    @property
    def expanded(self) -> dict[str, Expanded]:
        """The images a matrix made, by name (empty for a catalog without a matrix)."""
        return self._col.expanded if self._col is not None else {}

    def refuse(self, found: list[tuple[tuple[str | int, ...], str]]) -> None:
        """Raise the errors ``found`` after loading (key path, message), each at the line
        where its key is written and said once, as loading says its own; nothing if none."""
        if not found:
            return
        if self._col is None:  # not made by load_catalog: no line map, said by key path
            raise CatalogError([f"{self.path}: {_fmt_path(at)}: {m}" for at, m in found])
        for at, message in found:
            self._col.error(at, message)
        raise CatalogError(self._col.problems())


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
        # (table, entry) → (key → the entry of the extends chain where that key is written;
        # "" for a key nobody wrote): a mistake is reported where it is written, once.
        self.origins: dict[tuple[str, str], dict[str, str]] = {}
        # (image, labels|env) → (key → the image that wrote it): those tables merge
        self.label_origins: dict[tuple[str, str], dict[str, str]] = {}
        self.parents: dict[tuple[str, str], str] = {}
        # Entries of tables the built-in Ascend facts also fill (envs, families) that the
        # catalog itself writes: only those can be unused by its mistake.
        self.own: dict[str, set[str]] = {}
        self._pending: list[tuple[tuple[str, str], tuple[str, str], str]] = []
        # The images a matrix made, by name; and of each error at one of them, how many more
        # of its siblings have it (written once in the entry, it is reported once).
        self.expanded: dict[str, Expanded] = {}
        self._seen: dict[tuple[Any, ...], Problem] = {}
        self._more: dict[Problem, tuple[str, int]] = {}

    def _expanded(self, fpath: tuple[str | int, ...]) -> Expanded | None:
        if len(fpath) >= 2 and fpath[0] == "images" and str(fpath[1]) in self.expanded:
            return self.expanded[str(fpath[1])]
        return None

    def written(self, fpath: tuple[str | int, ...]) -> tuple[str | int, ...]:
        """``fpath`` moved to the entry that wrote the key it names (extends resolved; for an
        image a matrix made, its axis table, include or entry)."""
        exp = self._expanded(fpath)
        if exp is not None:
            src = exp.source(fpath[2:])
            if src is not None:
                return (*src, *fpath[2:])
            fpath = ("images", exp.entry, *fpath[2:])
        if len(fpath) < 2 or (str(fpath[0]), str(fpath[1])) not in self.origins:
            return fpath
        table, entry = str(fpath[0]), str(fpath[1])
        if len(fpath) == 2:
            return fpath
        key = str(fpath[2])
        owner = self.origins[(table, entry)].get(key)
        if owner is None:  # nobody in the chain wrote it: the chain's first entry lacks it
            owner = self.chain(table, entry)[-1]
        if table == "images" and key in MERGED and len(fpath) > 3:
            owner = self.label_origins.get((entry, key), {}).get(str(fpath[3]), owner)
        return (table, owner, *fpath[2:])

    def chain(self, table: str, entry: str) -> list[str]:
        """``entry``, its parent, …, up to the entry that extends nothing."""
        out = [entry]
        while (table, out[-1]) in self.parents and len(out) <= len(self.parents):
            out.append(self.parents[(table, out[-1])])
        return out

    def at(self, fpath: tuple[str | int, ...]) -> Location:
        exp = self._expanded(fpath)
        if exp is not None:  # named with its words, at the line where the key is written
            return Location(self.path, self.lines.line_of(self.written(fpath)),
                            exp.shown(fpath[2:]))
        return Location(self.path, self.lines.line_of(fpath), _fmt_path(fpath))

    def error(self, fpath: tuple[str | int, ...], message: str) -> None:
        exp = self._expanded(fpath)
        if exp is not None:
            problem = Problem(self.at(fpath), message)
            # a mistake at one key of many images of the matrix (written once, or one kind of
            # mistake, e.g. a tag every image renders alike): said once, with how many more
            key = (exp.entry, problem.where.line, _fmt_path(("x", *fpath[2:])))
            if key in self._seen:
                first = self._seen[key]
                self._more[first] = (exp.entry, self._more[first][1] + 1)
                return
            self._seen[key] = problem
            self._more[problem] = (exp.entry, 0)
            self.errors.append(problem)
            return
        fpath = self.written(fpath)
        if len(fpath) == 2 and (str(fpath[0]), str(fpath[1])) in self.parents:
            # A whole-entry mistake of an entry that extends another: if an ancestor has the
            # same one, it is the ancestor's mistake, inherited (already reported there).
            table, entry = str(fpath[0]), str(fpath[1])
            for ancestor in self.chain(table, entry)[1:]:
                self._pending.append(((table, ancestor), (table, entry), message))
        problem = Problem(self.at(fpath), message)
        if problem not in self.errors:
            self.errors.append(problem)

    def problems(self) -> list[str]:
        """Every error once, in the order found."""
        inherited = {
            Problem(self.at(child), message)
            for ancestor, child, message in self._pending
            if Problem(self.at(ancestor), message) in self.errors
        }
        kept = [p for p in self.errors if p not in inherited]
        return [self._shown(p) for p in sorted(kept, key=lambda p: p.where.line or 0)]

    def _shown(self, p: Problem) -> str:
        entry, more = self._more.get(p, ("", 0))
        if more:
            return f"{p} (and {more} more image{'s' if more > 1 else ''} of images.{entry})"
        return str(p)

    def warn(self, fpath: tuple[str | int, ...], code: str, message: str) -> None:
        self.warnings.append(Problem(self.at(fpath), f"warning[{code}]: {message}", code))


# An image's tables that an `extends` child adds to, key by key, rather than replaces.
MERGED = ("labels", "env")
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
        col.origins[(table, name)] = {str(k): name for k in body}
        for sub in MERGED if table == "images" else ():
            if isinstance(body.get(sub), dict):
                col.label_origins[(name, sub)] = {str(k): name for k in body[sub]}
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
        col.parents[(table, name)] = parent_name
        col.origins[(table, name)] = {
            **col.origins[(table, parent_name)], **col.origins[(table, name)]
        }
        for sub in MERGED if table == "images" else ():
            col.label_origins[(name, sub)] = {
                **col.label_origins.get((parent_name, sub), {}),
                **col.label_origins.get((name, sub), {}),
            }
        merged = copy.deepcopy(parent)
        merged.pop("extends", None)
        for key, value in body.items():
            if table == "images" and key in MERGED and isinstance(value, dict):
                merged[key] = {**merged.get(key, {}), **value}
            elif key != "extends":
                merged[key] = value
        done[name] = merged
        return merged

    for name in list(entries):
        result = resolve(name, [name])
        if result is not None:
            entries[name] = result


# The CANN packages with an env table in ascend.toml, in the order Ascend's images source
# their env scripts.
CANN_ENV_PACKAGES = ("toolkit", "ops", "bisheng", "nnal")


def compose_cann_env(series: dict[str, Any]) -> dict[str, Any]:
    """One CANN series' env table from its packages' (ascend.toml ``cann_envs.<series>``): the
    plain values in package order, then each search path with the entries of the package
    sourced last first, as sourcing the scripts in that order leaves it."""
    unknown = set(series) - {*CANN_ENV_PACKAGES, "source"}
    if unknown:
        raise ValueError(f"ascend.toml: unknown CANN package {sorted(unknown)}")
    packages = [series.get(p, {}) for p in CANN_ENV_PACKAGES]
    table: dict[str, Any] = {}
    for pkg in packages:
        table.update((k, v) for k, v in pkg.items() if isinstance(v, str))
    for pkg in reversed(packages):
        for key, value in pkg.items():
            if isinstance(value, list):
                table[key] = [*table.get(key, []), *value]
    return table


def _merge_knowledge(raw: dict[str, Any]) -> None:
    """Ascend facts (SoC families, toolkit env tables, compatibility table) that every catalog
    starts from."""
    known = toml.loads(_read_data("ascend.toml"))
    families = {**known["families"], **raw.get("families", {})}
    raw["families"] = families
    # set_env.sh of each CANN line, so a catalog can name them without copying (its own win).
    envs = raw.get("envs", {})
    if isinstance(envs, dict):
        builtin = {name: compose_cann_env(series) for name, series in known["cann_envs"].items()}
        raw["envs"] = {**builtin, **envs}
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
            text = read_regular_file(path, limit=CATALOG_LIMIT).decode("utf-8")
        except FileNotFoundError:
            raise CatalogError([f"{shown}: no such catalog file"]) from None
        except (NotRegularFile, OverLimit) as exc:  # a symlink to /dev/zero, a FIFO
            raise CatalogError([exc.message]) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise CatalogError([f"{shown}: cannot read: {exc}"]) from None
    try:
        raw = toml.loads(text)
    except toml.TOMLDecodeError as exc:
        raise CatalogError([toml.syntax_error(shown, text, exc)]) from None

    col = _Collector(shown, LineMap(text))
    # First, before any name or value is used (extends, messages): no string of the file, key
    # or value, holds a control character (`cannery schema` says the same of every string).
    _control_chars(raw, (), col)
    if col.errors:
        raise CatalogError(col.problems())
    col.own = {t: set(raw[t]) if isinstance(raw.get(t), dict) else set()
               for t in ("envs", "families")}
    _merge_knowledge(raw)
    _resolve_extends(raw, col)
    if col.errors:
        raise CatalogError(col.problems())
    # Right after extends (an entry's matrix may be inherited): from here on, the images a
    # matrix makes are ordinary images.
    col.expanded = expand_matrices(raw, col.error)
    if col.errors:
        raise CatalogError(col.problems())
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
                if RENAMED.get(str(loc[-1])) in allowed:
                    msg += f" (renamed to {RENAMED[str(loc[-1])]!r})"
                elif allowed:
                    msg += f" ({did_you_mean(str(loc[-1]), allowed)})"
                del parent
            elif err["type"] == "string_pattern_mismatch":
                words = PATTERN_WORDS.get(str(err.get("ctx", {}).get("pattern", "")))
                if words is not None:
                    msg = f"{_key_path(loc)} must {words}, got {_shown(err['input'])}"
            elif err["type"] == "missing":
                msg = f"missing required key {loc[-1]!r}"
            elif err["type"] == "literal_error":
                choices = re.findall(r"'([^']*)'", str(err.get("ctx", {}).get("expected", "")))
                got = err["input"]
                msg = f"{_shown(got)} is not one of {', '.join(choices)}"
                if isinstance(got, str):
                    msg += f" ({did_you_mean(got, choices)})"
            elif err["type"].endswith("_type"):
                msg = f"{msg}, got {_toml_type(err['input'])} {_shown(err['input'])}"
            col.error(loc, msg)
        raise CatalogError(col.problems()) from None

    for img in catalog.images.values():  # before any command starts a child process
        for d in img.downloads:
            if d.url_secret:
                hide_from_children(d.url_secret)
    derive_image_bases(catalog, col.error)
    _cross_check(catalog, col)
    _check_microdnf(catalog, col)
    if not col.errors:
        _check_effects(catalog, col)
    if col.errors:
        raise CatalogError(col.problems())
    digest = hashlib.sha256(text.encode()).hexdigest()
    return LoadedCatalog(catalog, shown, digest, col.warnings, col)


def _control_char(text: str) -> str | None:
    """Why ``text`` cannot be a catalog string (it holds a CONTROL character), or None."""
    found = re.search(CONTROL, text)
    if found is None:
        return None
    return (f"{text!r} holds the control character {found.group()!r}: no catalog string may "
            "(a line break would end the line it is rendered into)")


def _control_chars(node: Any, at: tuple[str | int, ...], col: _Collector) -> None:
    """An error at each key and string value of the TOML document that holds a control
    character (a key's error is at the key itself)."""
    items: list[tuple[str | int, Any]] = (
        list(node.items()) if isinstance(node, dict)
        else list(enumerate(node)) if isinstance(node, list) else []
    )
    for key, value in items:
        if isinstance(key, str) and (why := _control_char(key)) is not None:
            # named by its table, at the key's own line (the key itself is not printable)
            where = Location(col.path, col.lines.line_of((*at, key)), _fmt_path(at) or None)
            col.errors.append(Problem(where, f"key {why}"))
        elif isinstance(value, str) and (why := _control_char(value)) is not None:
            col.error((*at, key), why)
        else:
            _control_chars(value, (*at, key), col)


# Keys of earlier versions → their names now.
RENAMED = {"apt": "packages"}


# Tables of named entries: a key's path within its entry starts after the entry's name.
NAMED_TABLES = ("registries", "bases", "envs", "toolkits", "components", "images", "families")


def _key_path(loc: tuple[Any, ...]) -> str:
    """The key as a person names it within its entry: ``python.version`` of
    ``images.one.python.version``, ``python`` of ``ci.python``."""
    rest = loc[2:] if loc and loc[0] in NAMED_TABLES else loc[1:]
    return _fmt_path(tuple(rest)) or _fmt_path(loc)


def _toml_type(value: Any) -> str:
    """The TOML word for a value's type, for messages such as 'a boolean, got string "no"'."""
    kinds = ((bool, "boolean"), (int, "integer"), (float, "float"), (str, "string"),
             (list, "array"), (dict, "table"))
    return next((word for t, word in kinds if isinstance(value, t)), type(value).__name__)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


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


def _check_effects(cat: Catalog, col: _Collector) -> None:
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


def _check_overrides(cat: Catalog, iname: str, col: _Collector) -> None:
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
    col: _Collector,
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
    cat: Catalog, image: str, at: tuple[str | int, ...], template: str, col: _Collector
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


def _check_stages(cat: Catalog, iname: str, col: _Collector) -> None:
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


def _check_facts(cat: Catalog, iname: str, col: _Collector) -> None:
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


def _check_uv(cat: Catalog, iname: str, col: _Collector) -> None:
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


def _check_host(cat: Catalog, iname: str, col: _Collector) -> None:
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


def _check_microdnf(cat: Catalog, col: _Collector) -> None:
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


def _cross_check(cat: Catalog, col: _Collector) -> None:
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
    for iname, img in cat.images.items():
        for i, platform in enumerate(img.platforms):
            if platform not in cat.ci.runners:
                col.error(("images", iname, "platforms", i),
                          f"no CI runner for {platform} (add it to ci.runners)")
    socs = [soc for f in cat.families.values() for soc in f.socs]
    tags: dict[str, str] = {}
    acknowledged: dict[tuple[str | int, ...], tuple[bool, str]] = {}
    for iname, img in cat.images.items():
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
        family = cat.family_of(img.soc)
        if img.soc is not None and family is None:
            col.error(
                (*where, "soc"),
                f"unknown SOC_VERSION {img.soc!r} ({did_you_mean(img.soc, socs)})",
            )
            continue
        _check_stages(cat, iname, col)
        if not refs_ok:
            continue
        base = cat.bases[img.base]
        if base.chip is None and (img.toolkit is not None or img.soc is not None):
            # a toolkit's packages and env, and a SoC, are per chip: a plain OS base has none
            col.error((*where, "toolkit" if img.toolkit is not None else "soc"),
                      f"{'a toolkit' if img.toolkit is not None else 'a soc'} needs the chip of "
                      f"the image's base, and bases.{img.base}.chip is not set")
            continue
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
    for written, (used, code) in acknowledged.items():
        if not used:
            # Accepting a warning that does not occur has no effect: say so, or it hides the
            # next real one. Written once and inherited: an error only if no image needs it.
            col.error(written, f"{code!r} is acknowledged but no image that inherits it has that "
                      "warning: remove it")
