"""Load a catalog file: TOML → extends resolved → models → cross-references and compatibility.

Every problem is reported as ``file:line: field.path: reason``; all of them are collected before
raising, so one run shows everything that is wrong.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cannery.catalog.checks import check_microdnf, cross_check
from cannery.catalog.collector import Collector, Problem, fmt_path
from cannery.catalog.effects import check_effects
from cannery.catalog.extends import CANN_ENV_PACKAGES as CANN_ENV_PACKAGES  # where importers look
from cannery.catalog.extends import merge_knowledge, read_data, resolve_extends
from cannery.catalog.image_bases import derive as derive_image_bases
from cannery.catalog.locate import LineMap
from cannery.catalog.matrix import Expanded
from cannery.catalog.matrix import expand as expand_matrices
from cannery.catalog.models import Catalog
from cannery.catalog.validation import say_validation_errors
from cannery.errors import CatalogError, Location
from cannery.util import toml
from cannery.util.bounded import NotRegularFile, OverLimit, read_regular_file
from cannery.util.env import hide_from_children
from cannery.util.patterns import CONTROL

EMBEDDED = "<embedded>/default.toml"
CATALOG_LIMIT = 16 << 20  # a catalog file larger than this is refused unread


@dataclass
class LoadedCatalog:
    catalog: Catalog
    path: str
    digest: str  # sha256 of the catalog file's bytes
    warnings: list[Problem] = field(default_factory=list)
    # Where each key is written (extends and matrices resolved), kept for the checks that run
    # after loading (cannery.render.checks), so that their errors read as loading's own.
    _col: Collector | None = field(default=None, repr=False, compare=False)

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
            raise CatalogError([f"{self.path}: {fmt_path(at)}: {m}" for at, m in found])
        for at, message in found:
            self._col.error(at, message)
        raise CatalogError(self._col.problems())


def default_catalog_text() -> str:
    return read_data("default.toml")


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

    col = Collector(shown, LineMap(text))
    # First, before any name or value is used (extends, messages): no string of the file, key
    # or value, holds a control character (`cannery schema` says the same of every string).
    _control_chars(raw, (), col)
    if col.errors:
        raise CatalogError(col.problems())
    col.own = {t: set(raw[t]) if isinstance(raw.get(t), dict) else set()
               for t in ("envs", "families")}
    merge_knowledge(raw)
    resolve_extends(raw, col)
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
        say_validation_errors(exc, raw, col)
        raise CatalogError(col.problems()) from None

    for img in catalog.images.values():  # before any command starts a child process
        for d in img.downloads:
            if d.url_secret:
                hide_from_children(d.url_secret)
    derive_image_bases(catalog, col.error)
    cross_check(catalog, col)
    check_microdnf(catalog, col)
    if not col.errors:
        check_effects(catalog, col)
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


def _control_chars(node: Any, at: tuple[str | int, ...], col: Collector) -> None:
    """An error at each key and string value of the TOML document that holds a control
    character (a key's error is at the key itself)."""
    items: list[tuple[str | int, Any]] = (
        list(node.items()) if isinstance(node, dict)
        else list(enumerate(node)) if isinstance(node, list) else []
    )
    for key, value in items:
        if isinstance(key, str) and (why := _control_char(key)) is not None:
            # named by its table, at the key's own line (the key itself is not printable)
            where = Location(col.path, col.lines.line_of((*at, key)), fmt_path(at) or None)
            col.errors.append(Problem(where, f"key {why}"))
        elif isinstance(value, str) and (why := _control_char(value)) is not None:
            col.error((*at, key), why)
        else:
            _control_chars(value, (*at, key), col)
