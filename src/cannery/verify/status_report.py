"""``cannery status`` output: JSON, a Markdown page, and the rows a terminal table shows. They
see only a :class:`~cannery.verify.status.FamilyStatus`; nothing is judged here."""

from __future__ import annotations

import datetime as dt

from cannery import __version__
from cannery.lock import parse_time
from cannery.verify.status import STATES, AliasEntry, Entry, FamilyStatus

COLUMNS = ("image", "tag", "platform", "registry", "state", "index", "platform digest",
           "inputs locked", "detail")
ALIAS_COLUMNS = ("alias", "owner", "registry", "state", "names", "detail")
# A terminal is narrower than a page: the image's tag on its first row only, short digests.
TABLE_COLUMNS = ("image", "platform", "registry", "state", "index", "locked", "detail")


def age(locked_at: str | None, now: dt.datetime) -> str:
    """How long before ``now`` the pushed index's inputs were locked: ``5 d``, ``3 h``."""
    if locked_at is None:
        return "-"
    seconds = max(0, int((now - parse_time(locked_at)).total_seconds()))
    if seconds >= 86400:
        return f"{seconds // 86400} d"
    if seconds >= 3600:
        return f"{seconds // 3600} h"
    return f"{seconds // 60} min"


def _short(digest: str | None, n: int = 12) -> str:
    return digest.partition(":")[2][:n] if digest else "-"


def entry_row(e: Entry, tag: str, now: dt.datetime) -> tuple[str, ...]:
    when = f"{e.locked_at[:10]} ({age(e.locked_at, now)} ago)" if e.locked_at else "-"
    return (e.image, tag, e.platform, e.registry, e.state, _short(e.index_digest),
            _short(e.digest), when, e.detail)


def table_rows(status: FamilyStatus) -> list[tuple[str, ...]]:
    """The terminal's rows: the image and its tag on the first row of each image."""
    out: list[tuple[str, ...]] = []
    for img in status.images:
        for n, e in enumerate(img.entries):
            name = f"{img.image} ({img.tag})" if n == 0 else ""
            out.append((name, e.platform, e.registry, e.state, _short(e.index_digest, 8),
                        age(e.locked_at, status.now), e.detail))
    return out


def alias_row(a: AliasEntry) -> tuple[str, ...]:
    return (a.alias, a.owner, a.registry, a.state, a.points_to or "-", a.detail)


def rows(status: FamilyStatus) -> list[tuple[str, ...]]:
    return [entry_row(e, img.tag, status.now) for img in status.images for e in img.entries]


def alias_rows(status: FamilyStatus) -> list[tuple[str, ...]]:
    return [alias_row(a) for img in status.images for a in img.alias_entries]


def summary(status: FamilyStatus) -> str:
    counts = status.counts
    images = len(status.images)
    parts = ", ".join(f"{counts[s]} {s}" for s in STATES if counts[s])
    verdict = "all fresh" if status.ok else "not all fresh"
    return f"{images} image(s): {parts or 'nothing to check'} ({verdict})"


def status_json(status: FamilyStatus) -> dict[str, object]:
    return {
        "ok": status.ok,
        "checked_at": status.now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "counts": status.counts,
        "images": [
            {
                "image": img.image,
                "tag": img.tag,
                "state": img.state,
                "aliases": list(img.aliases),
                "entries": [
                    {
                        "platform": e.platform,
                        "registry": e.registry,
                        "reference": e.reference,
                        "state": e.state,
                        "detail": e.detail,
                        "index_digest": e.index_digest,
                        "digest": e.digest,
                        "inputs": e.inputs,
                        "planned_inputs": e.planned,
                        "moved": list(e.moved),
                        "inputs_locked_at": e.locked_at,
                        "age_seconds": _seconds(e.locked_at, status.now),
                    }
                    for e in img.entries
                ],
                "alias_entries": [
                    {
                        "alias": a.alias,
                        "owner": a.owner,
                        "registry": a.registry,
                        "reference": a.reference,
                        "state": a.state,
                        "names": a.points_to,
                        "detail": a.detail,
                    }
                    for a in img.alias_entries
                ],
            }
            for img in status.images
        ],
    }


def _seconds(locked_at: str | None, now: dt.datetime) -> int | None:
    if locked_at is None:
        return None
    return max(0, int((now - parse_time(locked_at)).total_seconds()))


def _cell(text: str) -> str:
    """One Markdown table cell: pipes escaped, lines joined."""
    return text.replace("|", "\\|").replace("\n", " ") or " "


def _table(header: tuple[str, ...], body: list[tuple[str, ...]]) -> list[str]:
    lines = ["| " + " | ".join(h.capitalize() for h in header) + " |",
             "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in body]
    return lines


def status_markdown(status: FamilyStatus, title: str) -> str:
    """A docs page: the summary, one row per image × platform × registry, then the aliases."""
    stamp = status.now.strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"# Image status: {title}",
        "",
        f"<!-- Generated by cannery {__version__.split('+')[0]} (`cannery status --markdown`) "
        "from the registries. Do not edit. -->",
        "",
        f"Checked {stamp}: {summary(status)}.",
        "",
        *_table(COLUMNS, rows(status)),
    ]
    aliases = alias_rows(status)
    if aliases:
        lines += ["", "## Aliases", "", *_table(ALIAS_COLUMNS, aliases)]
    return "\n".join(lines) + "\n"
