"""`cannery status` output from a hand-made FamilyStatus: the Markdown page, the JSON, the
terminal rows and the summary. Nothing here reads a registry."""

from __future__ import annotations

import datetime as dt
import json

from cannery.verify.status import AliasEntry, Entry, FamilyStatus, ImageStatus
from cannery.verify.status_report import (
    age,
    status_json,
    status_markdown,
    summary,
    table_rows,
)

NOW = dt.datetime(2026, 12, 4, 10, 0, tzinfo=dt.timezone.utc)
INDEX = "sha256:" + "ab" * 32
CHILD = "sha256:" + "cd" * 32


def _entry(image: str, platform: str, registry: str, state: str, detail: str = "",
           moved: tuple[str, ...] = ()) -> Entry:
    return Entry(image, platform, registry, f"q.example/fam/images:{image}-1", state, detail,
                 INDEX, CHILD, "sha256:" + "1" * 64, "sha256:" + "2" * 64, moved,
                 "2026-11-01T00:00:00Z")


def _family() -> FamilyStatus:
    moved = ("base docker.io/library/debian:11: 222222222222 → 333333333333",)
    a = ImageStatus(
        "a", "a-1", ("latest",),
        (_entry("a", "linux/amd64", "quay", "fresh"),
         _entry("a", "linux/amd64", "swr", "stale", "; ".join(moved), moved)),
        (AliasEntry("latest", "a", "quay", "q.example/fam/images:latest", "fresh", "a"),
         AliasEntry("latest", "a", "swr", "s.example/fam/images:latest", "diverged", "b",
                    "names b, not a's index")),
    )
    b = ImageStatus("b", "b-1", (), (
        _entry("b", "linux/arm64", "quay", "missing", "no such tag | really"),))
    return FamilyStatus((a, b), NOW)


def test_markdown_page_has_a_row_per_entry_then_the_aliases() -> None:
    page = status_markdown(_family(), "fam")
    lines = page.splitlines()
    assert lines[0] == "# Image status: fam"
    assert "Checked 2026-12-04 10:00 UTC: 2 image(s): 1 missing, 1 diverged, 1 stale, 2 fresh " \
           "(not all fresh)." in lines
    header = lines.index("| Image | Tag | Platform | Registry | State | Index | Platform digest "
                         "| Inputs locked | Detail |")
    assert lines[header + 1] == "|---|---|---|---|---|---|---|---|---|"
    assert lines[header + 2] == ("| a | a-1 | linux/amd64 | quay | fresh | abababababab | "
                                 "cdcdcdcdcdcd | 2026-11-01 (33 d ago) |   |")
    assert "| stale |" in lines[header + 3] and "debian:11: 222222222222 → 333333333333" \
        in lines[header + 3]
    # a pipe in a detail is escaped: the row keeps its columns
    assert lines[header + 4].endswith("| no such tag \\| really |")
    aliases = lines.index("## Aliases")
    assert lines[aliases + 2] == "| Alias | Owner | Registry | State | Names | Detail |"
    assert lines[aliases + 5] == "| latest | a | swr | diverged | b | names b, not a's index |"
    assert page.endswith("\n") and not page.endswith("\n\n")


def test_markdown_without_aliases_has_no_alias_section() -> None:
    fam = FamilyStatus((ImageStatus("b", "b-1", (), (_entry("b", "linux/arm64", "quay",
                                                                  "fresh"),)),), NOW)
    page = status_markdown(fam, "fam")
    assert "## Aliases" not in page and "1 image(s): 1 fresh (all fresh)." in page


def test_json_names_every_entry_and_its_moved_inputs() -> None:
    doc = status_json(_family())
    json.dumps(doc)  # serializable as it stands
    assert doc["ok"] is False and doc["checked_at"] == "2026-12-04T10:00:00Z"
    assert doc["counts"] == {"missing": 1, "diverged": 1, "stale": 1, "fresh": 2}
    a, b = doc["images"]  # type: ignore[misc]
    assert (a["image"], a["tag"], a["state"], a["aliases"]) == ("a", "a-1", "diverged", ["latest"])
    stale = a["entries"][1]
    assert stale["state"] == "stale" and stale["moved"] == [
        "base docker.io/library/debian:11: 222222222222 → 333333333333"]
    assert stale["inputs"] != stale["planned_inputs"]
    assert stale["age_seconds"] == 33 * 86400 + 10 * 3600
    assert a["alias_entries"][1] == {
        "alias": "latest", "owner": "a", "registry": "swr",
        "reference": "s.example/fam/images:latest", "state": "diverged", "names": "b",
        "detail": "names b, not a's index"}
    assert b["state"] == "missing"


def test_image_state_is_its_worst_entry_and_ok_only_when_all_fresh() -> None:
    fam = _family()
    assert [i.state for i in fam.images] == ["diverged", "missing"]
    assert not fam.ok
    fresh = FamilyStatus((ImageStatus("b", "b-1", (), (_entry("b", "linux/arm64", "quay",
                                                                    "fresh"),)),), NOW)
    assert fresh.ok and summary(fresh) == "1 image(s): 1 fresh (all fresh)"


def test_terminal_rows_name_the_image_once_and_show_the_age() -> None:
    rows = table_rows(_family())
    assert [r[0] for r in rows] == ["a (a-1)", "", "b (b-1)"]
    assert rows[0][1:6] == ("linux/amd64", "quay", "fresh", "abababab", "33 d")


def test_age_in_days_hours_minutes() -> None:
    assert age(None, NOW) == "-"
    assert age("2026-12-04T07:00:00Z", NOW) == "3 h"
    assert age("2026-12-04T09:58:00Z", NOW) == "2 min"
    assert age("2026-12-05T00:00:00Z", NOW) == "0 min"  # a clock behind the lock's
