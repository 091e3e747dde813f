"""Accepted differences: a TOML list beside the catalog (compare-accepted.toml) that says, for
each difference a migration keeps on purpose, why. An accepted difference is still shown, but
does not fail the command.

    [[accepted]]
    image = "a2-ubuntu"            # catalog image (or compared file); a glob: "*" is every one
    category = "packages"          # a category `compare` reports
    item = "apt:ca-certificates"   # the item as `compare` prints it; a glob
    change = "added"               # optional: only this change (added|removed|changed|moved)
    why = "the image's TLS downloads need the CA bundle"

Workflow differences use ``image = "workflow"``.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path

from cannery.compare.model import ADDED, CHANGED, MOVED, REMOVED, Difference
from cannery.errors import InputError

FILE_NAME = "compare-accepted.toml"
KEYS = ("image", "category", "item", "change", "why")


@dataclass
class Accepted:
    image: str
    category: str
    item: str
    why: str
    change: str | None = None
    where: str = ""  # file: accepted[N], for messages
    used: bool = False

    def matches(self, image: str, d: Difference) -> bool:
        return (fnmatch.fnmatchcase(image, self.image) and d.category == self.category
                and fnmatch.fnmatchcase(d.item, self.item)
                and (self.change is None or self.change == d.change))


def load_accepted(path: Path, categories: list[str]) -> list[Accepted]:
    """Read ``path`` (a regular file within the catalog's limit, as the catalog is read);
    exit 2 naming the entry and field on anything malformed."""
    from cannery.catalog.load import CATALOG_LIMIT
    from cannery.util import toml
    from cannery.util.bounded import read_regular_file

    try:
        text = read_regular_file(path, limit=CATALOG_LIMIT).decode("utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    try:
        data = toml.loads(text)
    except toml.TOMLDecodeError as exc:
        raise InputError(toml.syntax_error(str(path), text, exc)) from None
    extra = [k for k in data if k != "accepted"]
    if extra:
        raise InputError(f"{path}: unknown table {extra[0]!r} (expected [[accepted]] entries)")
    entries = data.get("accepted", [])
    if not isinstance(entries, list):
        raise InputError(f"{path}: accepted: expected [[accepted]] entries")
    out = []
    for n, entry in enumerate(entries):
        where = f"{path}: accepted[{n}]"
        if not isinstance(entry, dict):
            raise InputError(f"{where}: expected a table")
        for key in entry:
            if key not in KEYS:
                raise InputError(f"{where}: unknown field {key!r} (known: {', '.join(KEYS)})")
        for key in ("image", "category", "item", "why"):
            value = entry.get(key)
            if not isinstance(value, str) or not value.strip():
                raise InputError(f"{where}: {key}: required, a non-empty string")
        if entry["category"] not in categories:
            raise InputError(f"{where}: category: unknown {entry['category']!r} "
                             f"(known: {', '.join(categories)})")
        change = entry.get("change")
        if change is not None and change not in (ADDED, REMOVED, CHANGED, MOVED):
            raise InputError(f"{where}: change: expected added, removed, changed or moved")
        out.append(Accepted(entry["image"], entry["category"], entry["item"],
                            entry["why"].strip(), change, where))
    return out


def apply(image: str, diffs: list[Difference], accepted: list[Accepted]) -> None:
    """Mark each difference an entry accepts with that entry's reason."""
    for d in diffs:
        for entry in accepted:
            if entry.matches(image, d):
                d.why = entry.why
                entry.used = True
                break


# The README of a family shows its accepted list as a table, generated from the list so the two
# cannot disagree (tests/unit/test_example_accepted.py; scripts/accepted-tables.py rewrites it).
TABLE_START = "<!-- cannery: accepted differences, generated from compare-accepted.toml -->"
TABLE_END = "<!-- cannery: end of accepted differences -->"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def accepted_table(entries: list[Accepted]) -> str:
    """The Markdown table of ``entries``, in the list's order, between the two markers."""
    rows = [TABLE_START, "| image | category | item | change | why |", "|---|---|---|---|---|"]
    rows += [f"| `{_cell(e.image)}` | {e.category} | `{_cell(e.item)}` | {e.change or 'any'} "
             f"| {_cell(e.why)} |" for e in entries]
    return "\n".join([*rows, TABLE_END]) + "\n"


def with_table(readme: str, table: str) -> str | None:
    """``readme`` with its generated block replaced by ``table``; None when it has no block."""
    start, end = readme.find(TABLE_START), readme.find(TABLE_END)
    if start < 0 or end < start:
        return None
    return readme[:start] + table + readme[end + len(TABLE_END):].removeprefix("\n")
