"""Inline expectations in fixture files.

`# expect: rule-a, rule-b` names the findings expected on the nearest line above it that is not
itself an expectation (repeat a name for two findings on one line); `# expect@N: rule` names
line N. A finding has the rule's default severity unless the marker says `rule:level`
(`secret-in-argv:info`), and is of high confidence unless the marker names another
(`empty-path-element:low`, `rule:info:medium`). Every other line must be clean: the test
compares the sets exactly, severities and confidences included.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

MARK = re.compile(r"#\s*expect(?:@(\d+))?:\s*([\w\-,: ]+)")


CONFIDENCES = ("low", "medium", "high")


def expected(path: Path) -> Counter[tuple[int, str]]:
    """(line, rule) of every expected finding."""
    return Counter((line, rule) for (line, rule, _, _), n in with_severity(path).items()
                   for _ in range(n))


def with_severity(path: Path) -> Counter[tuple[int, str, str, str]]:
    """(line, rule, severity, confidence) of every expected finding; default severities
    filled in, and high confidence."""
    from cannery.lint.ruleset import RuleSet

    out: Counter[tuple[int, str, str, str]] = Counter()
    last = 0
    for no, line in enumerate(path.read_text().split("\n"), start=1):
        m = MARK.search(line)
        if not m:
            last = no
            continue
        target = int(m.group(1)) if m.group(1) else last
        for item in (r.strip() for r in m.group(2).split(",")):
            if not item or item == "clean":
                continue
            rule, *marks = item.split(":")
            sure = next((m for m in marks if m in CONFIDENCES), "high")
            level = next((m for m in marks if m not in CONFIDENCES), "")
            cls = RuleSet.resolve(rule)
            out[(target, rule, level or (str(cls.severity) if cls else "?"), sure)] += 1
    return out
