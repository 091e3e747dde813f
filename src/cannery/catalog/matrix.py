"""Expand an image entry's ``matrix`` into ordinary images, on the raw catalog (after `extends`).

The rule, in one place (the README's "A matrix of images" says it for users):

- every key of ``matrix`` other than ``name``, ``include`` and ``exclude`` is an axis: a list of
  words, or of tables ``{ value = "word", <image fields> }`` whose fields set those keys of every
  image with that word (``labels`` and ``env`` key by key, as with ``extends``);
- the images are every combination of the axes' words, minus each ``exclude`` table's matches
  (every axis it names has its word), plus the ``include`` tables: one whose axis words match
  images sets its other keys on them (over what the axis values set); one that matches none
  and names a word for every axis adds that image;
- ``{matrix.AXIS}`` in any string value of the entry, its axis tables and includes is the
  image's word of that axis;
- each image is named by ``matrix.name`` (a template of ``{matrix.AXIS}``), by default the
  entry's name and its words joined by ``-``.

A key set by two axis values of one image (or by two includes) is an error: no order decides.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cannery.catalog.models import AXIS_NAME, AXIS_WORD, MATRIX_RESERVED, NAME, Image
from cannery.util.text import did_you_mean

Path = tuple[str | int, ...]
ErrorFn = Callable[[Path, str], None]
PLACEHOLDER = re.compile(r"\{matrix\.([^{}]*)\}")
# The image tables that merge key by key (load.MERGED: the same as for `extends`).
MERGED = ("labels", "env")
IMAGE_FIELDS = frozenset(Image.model_fields)
# What an axis table or an include may set: an image's fields, but not these.
SETTABLE = sorted(IMAGE_FIELDS - {"extends", "matrix"})


def _unknown_keys(fields: dict[str, Any], where: Path, error: ErrorFn) -> bool:
    """An error at each key of ``fields`` that is no image field (said once, where written,
    rather than at every image it would reach); False if there is one."""
    bad = [k for k in fields if k not in SETTABLE]
    for key in bad:
        error((*where, key), f"unknown key {key!r}: an axis table or include sets image fields "
              f"({did_you_mean(key, SETTABLE)})")
    return not bad


@dataclass
class Expanded:
    """One image a matrix made: its entry, its words, and where each of its keys is written
    (the keys its axis tables and includes set; every other key is the entry's)."""

    entry: str
    axes: tuple[tuple[str, str], ...]
    sources: dict[tuple[str, ...], Path] = field(default_factory=dict)
    word_at: dict[str, Path] = field(default_factory=dict)  # axis → where its word is written

    @property
    def label(self) -> str:
        return ", ".join(f"{a}={w}" for a, w in self.axes)

    def shown(self, rest: Path) -> str:
        """``images.ENTRY[a=x, b=y].rest``: the image as the catalog writes it."""
        out = f"images.{self.entry}[{self.label}]"
        for p in rest:
            out += f"[{p}]" if isinstance(p, int) else f".{p}"
        return out

    def source(self, rest: Path) -> Path | None:
        """Where the key ``rest`` names is written, if an axis table or include set it."""
        if len(rest) >= 2 and (str(rest[0]), str(rest[1])) in self.sources:
            return self.sources[(str(rest[0]), str(rest[1]))]
        if rest and (str(rest[0]),) in self.sources:
            return self.sources[(str(rest[0]),)]
        return None


@dataclass
class _Combo:
    words: dict[str, str]
    tables: list[tuple[Path, dict[str, Any]]]  # (where, fields) of its axis values, axis order
    includes: list[tuple[Path, dict[str, Any]]] = field(default_factory=list)
    word_at: dict[str, Path] = field(default_factory=dict)


def expand(raw: dict[str, Any], error: ErrorFn) -> dict[str, Expanded]:
    """Replace each image entry that has a ``matrix`` with its images, in place; returns the
    images made, by name. Mistakes go to ``error`` (at the key path where they are written)."""
    images = raw.get("images")
    if not isinstance(images, dict):
        return {}
    plain = {n for n, b in images.items() if not (isinstance(b, dict) and "matrix" in b)}
    out: dict[str, Any] = {}
    made: dict[str, Expanded] = {}
    told: set[tuple[str, str]] = set()
    for entry, body in images.items():
        if entry in plain:
            if isinstance(body, dict):
                _no_placeholders(body, ("images", entry), error)
            out[entry] = body
            continue
        for name, image, exp in _expand_entry(entry, body, error):
            where = ("images", entry, "matrix", "name") if "name" in body["matrix"] \
                else ("images", entry, "matrix")
            if name in plain:
                error(where, f"[{exp.label}] is named {name!r}, as the image images.{name} "
                      "is: an expanded name must be new")
            elif name in made:
                other = made[name]
                if (entry, other.entry) in told:  # one collision is enough to say why
                    continue
                told.add((entry, other.entry))
                whose = "this matrix" if other.entry == entry else f"images.{other.entry}"
                error(where, f"[{exp.label}] and {whose}'s [{other.label}] are both named "
                      f"{name!r}: use every axis in matrix.name")
            else:
                out[name] = image
                made[name] = exp
    raw["images"] = out
    return made


def _no_placeholders(node: Any, at: Path, error: ErrorFn) -> None:
    if isinstance(node, str):
        if PLACEHOLDER.search(node):
            error(at, f"{node!r} holds a {{matrix.AXIS}} placeholder, but the image has no "
                  "matrix")
    elif isinstance(node, dict):
        for k, v in node.items():
            _no_placeholders(v, (*at, k), error)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _no_placeholders(v, (*at, i), error)


def _axes(entry: str, matrix: dict[str, Any], error: ErrorFn
          ) -> dict[str, list[tuple[str, dict[str, Any] | None]]] | None:
    """The axes, each a list of (word, table or None); None after an error."""
    at: Path = ("images", entry, "matrix")
    axes: dict[str, list[tuple[str, dict[str, Any] | None]]] = {}
    ok = True
    for axis, values in matrix.items():
        if axis in MATRIX_RESERVED:
            continue
        if not re.fullmatch(AXIS_NAME, axis):
            error((*at, axis), f"axis {axis!r}: name an axis with lowercase letters, digits "
                  "and '_', starting with a letter")
            ok = False
            continue
        if axis in IMAGE_FIELDS:
            error((*at, axis), f"axis {axis!r} has the name of an image field, which an "
                  f"include table could not tell from it: name it otherwise ({axis}s)")
            ok = False
            continue
        if not isinstance(values, list) or not values:
            error((*at, axis), f"axis {axis}: give a non-empty array of words or "
                  "{ value = \"word\", ... } tables")
            ok = False
            continue
        words: list[tuple[str, dict[str, Any] | None]] = []
        for i, item in enumerate(values):
            word = item.get("value") if isinstance(item, dict) else item
            if not isinstance(word, str) or not re.fullmatch(AXIS_WORD, word):
                error((*at, axis, i), f"axis {axis}: {word!r} is not a word (letters, digits "
                      "and . _ -, as in an image tag); a table gives its word as value = "
                      "\"...\"")
                ok = False
            elif word in [w for w, _ in words]:
                error((*at, axis, i), f"axis {axis}: {word!r} is listed twice")
                ok = False
            else:
                table = {k: v for k, v in item.items() if k != "value"} \
                    if isinstance(item, dict) else None
                ok = _unknown_keys(table or {}, (*at, axis, i), error) and ok
                words.append((word, table))
        axes[axis] = words
    if ok and not axes:
        error(at, "a matrix needs at least one axis (a key other than name, include, exclude)")
        ok = False
    return axes if ok else None


def _expand_entry(entry: str, body: dict[str, Any], error: ErrorFn
                  ) -> list[tuple[str, dict[str, Any], Expanded]]:
    at: Path = ("images", entry, "matrix")
    matrix = body["matrix"]
    if not isinstance(matrix, dict):
        error(at, "matrix must be a table of axes (matrix.AXIS = [...])")
        return []
    axes = _axes(entry, matrix, error)
    if axes is None:
        return []
    names = list(axes)
    combos = [
        _Combo({a: w for a, (w, _) in zip(names, pick, strict=True)},
               [((*at, a, axes[a].index((w, t))), t)
                for a, (w, t) in zip(names, pick, strict=True) if t is not None],
               word_at={a: (*at, a, axes[a].index(p)) for a, p in zip(names, pick, strict=True)})
        for pick in itertools.product(*axes.values())
    ]
    kept = _exclude(at, matrix.get("exclude", []), axes, combos, error)
    if kept is None or not _include(at, matrix.get("include", []), axes, kept, error):
        return []
    combos = kept
    template = matrix.get("name")
    if template is not None and not isinstance(template, str):
        error((*at, "name"), "matrix.name must be a string: a template of {matrix.AXIS}s")
        return []
    out: list[tuple[str, dict[str, Any], Expanded]] = []
    for combo in combos:
        exp = Expanded(entry, tuple(combo.words.items()), word_at=combo.word_at)
        image = {k: copy.deepcopy(v) for k, v in body.items() if k != "matrix"}
        if not _apply(image, exp, combo, error):
            continue
        if template is None:
            name = "-".join([entry, *combo.words.values()])
        else:
            name = _fill(template, combo.words, (*at, "name"), error) or ""
            if not name:
                continue
        if not re.fullmatch(NAME, name):
            error((*at, "name") if template is not None else at,
                  f"[{exp.label}] expands to the image name {name!r}: names use lowercase "
                  "letters, digits, '-', '_' and '.', starting with a letter or digit")
            continue
        out.append((name, _filled(image, combo.words, exp, error), exp))
    return out


def _matches(table: dict[str, Any], words: dict[str, str]) -> bool:
    return all(words.get(a) == w for a, w in table.items() if a in words)


def _exclude(at: Path, excludes: Any, axes: dict[str, Any], combos: list[_Combo],
             error: ErrorFn) -> list[_Combo] | None:
    if not isinstance(excludes, list):
        error((*at, "exclude"), "exclude must be an array of { AXIS = \"word\", ... } tables")
        return None
    for i, ex in enumerate(excludes):
        where = (*at, "exclude", i)
        bad = [k for k, v in ex.items() if k not in axes or v not in [w for w, _ in axes[k]]] \
            if isinstance(ex, dict) and ex else None
        if bad is None:
            error(where, "an exclude is a table of one or more axes and their words")
            return None
        if bad:
            error(where, f"exclude names {', '.join(f'{k}={ex[k]!r}' for k in bad)}, which "
                  "is not an axis and one of its words")
            return None
        kept = [c for c in combos if not _matches(ex, c.words)]
        if len(kept) == len(combos):
            error(where, "this exclude matches no image (an earlier one removed them): "
                  "remove it")
            return None
        combos = kept
    return combos


def _include(at: Path, includes: Any, axes: dict[str, Any], combos: list[_Combo],
             error: ErrorFn) -> bool:
    if not isinstance(includes, list):
        error((*at, "include"), "include must be an array of tables")
        return False
    for i, inc in enumerate(includes):
        where = (*at, "include", i)
        if not isinstance(inc, dict) or not any(k in axes for k in inc):
            error(where, "an include is a table that names the word of one or more axes "
                  f"({', '.join(axes)}), then the image fields it sets")
            return False
        picks = {k: v for k, v in inc.items() if k in axes}
        fields = {k: v for k, v in inc.items() if k not in axes}
        if not _unknown_keys(fields, where, error):
            return False
        if not all(isinstance(v, str) and re.fullmatch(AXIS_WORD, v) for v in picks.values()):
            error(where, "an include gives each axis a word (letters, digits and . _ -)")
            return False
        matched = [c for c in combos if _matches(picks, c.words)]
        for c in matched:
            c.includes.append((where, fields))
        if matched:
            continue
        if set(picks) != set(axes):
            error(where, f"this include matches no image, and names no word of "
                  f"{', '.join(a for a in axes if a not in picks)} to add one: give a word "
                  "for every axis")
            return False
        known = {a: dict(axes[a]) for a in axes}
        tables = [((*at, a, [w for w, _ in axes[a]].index(picks[a])), known[a][picks[a]])
                  for a in axes if known[a].get(picks[a]) is not None]
        word_at = {a: where for a in axes}  # its words are the include's
        combos.append(_Combo({a: picks[a] for a in axes}, tables, [(where, fields)], word_at))
    return True


def _apply(image: dict[str, Any], exp: Expanded, combo: _Combo, error: ErrorFn) -> bool:
    """Set the axis tables' keys, then the includes', on ``image``; False on a conflict."""
    ok = True
    for layer in (combo.tables, combo.includes):
        set_here: dict[tuple[str, ...], Path] = {}
        for where, fields in layer:
            for key, value in fields.items():
                subs = [(key, s) for s in value] if key in MERGED and isinstance(value, dict) \
                    else [(key,)]
                for sub in subs:
                    if sub in set_here or (len(sub) == 2 and (key,) in set_here):
                        first = set_here.get(sub) or set_here[(key,)]
                        error((*where, *sub), f"[{exp.label}]: {'.'.join(sub)} is set by "
                              f"both {_fmt(first)} and {_fmt(where)}: set it in one place "
                              "(an include for the images that need it)")
                        ok = False
                    set_here[sub] = where
                    exp.sources[sub] = where
                if key in MERGED and isinstance(value, dict):  # (an empty table adds nothing)
                    had = image.get(key)
                    image[key] = {**(had if isinstance(had, dict) else {}),
                                  **copy.deepcopy(value)}
                else:
                    image[key] = copy.deepcopy(value)
    return ok


def _fmt(path: Path) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _fill(text: str, words: dict[str, str], at: Path, error: ErrorFn) -> str | None:
    unknown = [m for m in PLACEHOLDER.findall(text) if m not in words]
    if unknown:
        error(at, f"{{matrix.{unknown[0]}}}: no axis {unknown[0]!r} (axes: "
              f"{', '.join(words)})")
        return None
    return PLACEHOLDER.sub(lambda m: words[m.group(1)], text)


def _filled(node: Any, words: dict[str, str], exp: Expanded, error: ErrorFn,
            at: Path = ()) -> Any:
    """``node`` with each ``{matrix.AXIS}`` of its string values replaced by the word."""
    if isinstance(node, str):
        if "{matrix." not in node:
            return node
        where = exp.source(at)
        filled = _fill(node, words, (*(where or ("images", exp.entry)), *at), error)
        return node if filled is None else filled
    if isinstance(node, dict):
        return {k: _filled(v, words, exp, error, (*at, k)) for k, v in node.items()}
    if isinstance(node, list):
        return [_filled(v, words, exp, error, (*at, i)) for i, v in enumerate(node)]
    return node
