"""Inline expectations in fixture files.

`# expect: rule-a, rule-b` names the findings expected on the nearest line above it that is not
itself an expectation (repeat a name for two findings on one line); `# expect@N: rule` names
line N. Every other line must be clean: the test compares the sets exactly.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

MARK = re.compile(r"#\s*expect(?:@(\d+))?:\s*([\w\-, ]+)")


def expected(path: Path) -> Counter[tuple[int, str]]:
    out: Counter[tuple[int, str]] = Counter()
    last = 0
    for no, line in enumerate(path.read_text().split("\n"), start=1):
        m = MARK.search(line)
        if not m:
            last = no
            continue
        target = int(m.group(1)) if m.group(1) else last
        for rule in (r.strip() for r in m.group(2).split(",")):
            if rule and rule != "clean":
                out[(target, rule)] += 1
    return out
