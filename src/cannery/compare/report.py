"""Text and JSON output of a comparison. Formatters only read the differences.

The JSON document (``"schema": "cannery.compare/1"``; a field is only ever added under it):
``images``: one entry per compared pair, ``{image, kind (dockerfile|workflow|file), original,
new, differences}``; each difference ``{category, item, change (added|removed|changed|moved),
original, new (the values shown; null on the side that lacks it), note, arches (empty: every
architecture compared), accepted, why}``. ``unused_accepted``: entries of the accepted list
that matched nothing. ``summary``: ``{differences, accepted, failing}``; the exit status is 1
when ``failing`` is not 0.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from cannery.compare.accepted import Accepted
from cannery.compare.model import ADDED, CHANGED, MOVED, REMOVED, Difference

SCHEMA = "cannery.compare/1"
SYMBOL = {REMOVED: "-", ADDED: "+", CHANGED: "~", MOVED: ">"}


@dataclass
class Compared:
    """One compared pair: an image (two Dockerfiles), a workflow, or a file on one side only."""

    image: str
    kind: str  # dockerfile | workflow | file
    original: str
    new: str
    differences: list[Difference] = field(default_factory=list)


def failing(results: list[Compared]) -> int:
    return sum(1 for r in results for d in r.differences if not d.accepted)


def _describe(d: Difference) -> str:
    if d.change == REMOVED:
        text = f"{d.original} (original only)"
    elif d.change == ADDED:
        text = f"{d.new} (new only)"
    else:
        text = f"{d.original}  ->  {d.new}"
    if d.note:
        text += f" [{d.note}]"
    if d.arches:
        text += f" [{', '.join(d.arches)} only]"
    return text


def text(results: list[Compared], accepted: list[Accepted]) -> str:
    lines: list[str] = []
    for r in results:
        lines.append(f"{r.image} ({r.kind}): {r.original}  ->  {r.new}")
        if not r.differences:
            lines.append("  no differences")
        category = None
        for d in r.differences:
            if d.category != category:
                category = d.category
                lines.append(f"  {category}")
            lines.append(f"    {SYMBOL.get(d.change, '?')} {d.item}: {_describe(d)}")
            if d.accepted:
                lines.append(f"        accepted: {d.why}")
        lines.append("")
    total = sum(len(r.differences) for r in results)
    bad = failing(results)
    lines.append(f"{total} difference(s): {bad} not accepted, {total - bad} accepted")
    for entry in accepted:
        if not entry.used:
            lines.append(f"note: {entry.where} ({entry.image} / {entry.category} / "
                         f"{entry.item}) matches no difference")
    return "\n".join(lines) + "\n"


def as_json(results: list[Compared], accepted: list[Accepted]) -> str:
    total = sum(len(r.differences) for r in results)
    bad = failing(results)
    doc = {
        "schema": SCHEMA,
        "images": [{"image": r.image, "kind": r.kind, "original": r.original, "new": r.new,
                    "differences": [d.as_json() for d in r.differences]} for r in results],
        "unused_accepted": [{"image": e.image, "category": e.category, "item": e.item,
                             "where": e.where} for e in accepted if not e.used],
        "summary": {"differences": total, "accepted": total - bad, "failing": bad},
    }
    return json.dumps(doc, indent=2) + "\n"
