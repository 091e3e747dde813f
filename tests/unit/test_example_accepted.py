"""Each example's accepted differences are data (compare-accepted.toml beside its catalog), and
its README shows them as a table generated from that list: the two cannot disagree.
Refresh the tables with `python scripts/accepted-tables.py` and review `git diff examples`."""

from __future__ import annotations

from pathlib import Path

import pytest

from cannery.commands.compare import category_names
from cannery.compare.accepted import (
    FILE_NAME,
    TABLE_END,
    TABLE_START,
    Accepted,
    accepted_table,
    load_accepted,
    with_table,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LISTS = sorted(EXAMPLES.glob(f"*/{FILE_NAME}"))


@pytest.mark.parametrize("listed", LISTS, ids=[p.parent.name for p in LISTS])
def test_the_readme_table_is_the_accepted_list(listed: Path) -> None:
    readme = (listed.parent / "README.md").read_text(encoding="utf-8")
    table = accepted_table(load_accepted(listed, category_names()))
    assert with_table(readme, table) == readme, (
        f"{listed.parent.name}/README.md: the accepted-differences table differs from "
        f"{FILE_NAME}: run `python scripts/accepted-tables.py`")


def test_an_entry_missing_from_the_table_is_caught() -> None:
    """The check above compares the whole block: a row left out (or a reason edited by hand)
    makes the README differ from the table rendered from the list."""
    one = Accepted("a2", "packages", "apt:vim", "the image is for running, not editing")
    two = Accepted("*", "runs", "set -o pipefail", "a failing download stops the build")
    readme = "# family\n\n" + accepted_table([one]) + "\nmore\n"
    assert with_table(readme, accepted_table([one])) == readme
    assert with_table(readme, accepted_table([one, two])) != readme
    edited = readme.replace("not editing", "not for editing")
    assert with_table(edited, accepted_table([one])) != edited


def test_a_readme_without_the_block_is_reported() -> None:
    assert with_table("# family\n", accepted_table([])) is None
    table = accepted_table([Accepted("a|b", "env", "PATH", "pipes | escaped")])
    assert table.startswith(TABLE_START) and table.rstrip().endswith(TABLE_END)
    assert "`a\\|b`" in table and "pipes \\| escaped" in table
