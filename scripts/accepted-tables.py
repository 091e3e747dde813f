"""Rewrite each example README's accepted-differences table from its compare-accepted.toml.

    python scripts/accepted-tables.py     # then review: git diff examples
"""

from __future__ import annotations

import sys
from pathlib import Path

from cannery.commands.compare import category_names
from cannery.compare.accepted import FILE_NAME, accepted_table, load_accepted, with_table

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    status = 0
    for listed in sorted((ROOT / "examples").glob(f"*/{FILE_NAME}")):
        readme = listed.parent / "README.md"
        text = readme.read_text(encoding="utf-8")
        new = with_table(text, accepted_table(load_accepted(listed, category_names())))
        if new is None:
            print(f"{readme}: no accepted-differences block (add the two markers)", file=sys.stderr)
            status = 2
        elif new != text:
            readme.write_text(new, encoding="utf-8")
            print(f"wrote {readme.relative_to(ROOT)}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
