r"""Inline and file-level suppressions, and the report of those that suppress nothing.

    # cannery: ignore=rule-a,rule-b     the next instruction (Dockerfile) or line (workflow;
                                        with the lines a trailing `\` continues it onto)
    # cannery: ignore-file=rule-a        the whole file ("ignore-file" alone: every rule)

At the end of a line, `cmd  # cannery: ignore=rule` covers that line, except after a
trailing `\` (or with one at the end of the comment): there the comment would end the shell
continuation, so it is not honoured and is reported as misplaced.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right

from cannery.lint.model import Finding, Severity, Span

DIRECTIVE = re.compile(r"#\s*cannery:\s*(ignore-file|ignore)\b\s*(?:=\s*([\w\-, ]+))?")


class Directive:
    __slots__ = ("column", "first", "last", "line", "misplaced", "rules", "scope", "used")

    def __init__(self, line: int, column: int, scope: str, rules: tuple[str, ...], first: int,
                 last: int, used: set[str] | None = None, misplaced: bool = False) -> None:
        self.line = line
        self.column = column
        self.scope = scope  # ignore | ignore-file
        self.rules = rules  # empty: all (file scope only)
        self.first = first  # lines it covers
        self.last = last
        self.used: set[str] = set() if used is None else used
        self.misplaced = misplaced  # at the end of a line continued with `\`: not honoured


def directives(lines: list[str], ranges: list[tuple[int, int]]) -> list[Directive]:
    """``ranges``: (first, last) line of each instruction (Dockerfile); empty for workflows."""
    out = []
    starts = [a for a, _ in ranges]  # instructions are in file order, and never overlap
    for no, text in enumerate(lines, start=1):
        if "cannery" not in text:
            continue
        m = DIRECTIVE.search(text)
        if not m:
            continue
        rules = tuple(r.strip() for r in (m.group(2) or "").split(",") if r.strip())
        if m.group(1) == "ignore-file":
            first, last = 1, len(lines)
        elif text.strip().startswith("#"):
            at = bisect_left(starts, no)  # ranges[at - 1] starts before this line
            inside = ranges[at - 1] if at > 0 and no <= ranges[at - 1][1] else None
            after = bisect_right(starts, no)
            nxt = ranges[after] if after < len(ranges) else None
            if inside is not None:  # a comment line inside a continued RUN: the rest of it
                first, last = no + 1, inside[1]
            else:
                first, last = nxt if nxt else (no + 1, no + 1)
            while not ranges and last < len(lines) and lines[last - 1].rstrip().endswith("\\"):
                last += 1  # a shell command continued over several lines of a `run:`
        else:  # trailing comment: this line
            first = last = no
            code = text[: m.start()].rstrip()
            if code.endswith("\\") or text.rstrip().endswith("\\"):
                out.append(Directive(no, m.start() + 1, m.group(1), rules, 0, -1,
                                     misplaced=True))
                continue
        out.append(Directive(no, m.start() + 1, m.group(1), rules, first, last))
    return out


def _current_name(rule: str) -> str:
    """A code or renamed rule as its current name; an unknown name as written."""
    from cannery.lint.ruleset import RuleSet

    found = RuleSet.resolve(rule)
    return found.name if found is not None else rule


def apply(findings: list[Finding], found: list[Directive], path: str) -> list[Finding]:
    """Drop suppressed findings; add unused-suppression findings for the leftovers."""
    from cannery.lint.ruleset import RuleSet

    known = set(RuleSet.names())
    for d in found:
        d.rules = tuple(_current_name(r) for r in d.rules)
    # line → the directives covering it, grouped by the lines they cover (directives stacked
    # before one instruction share them), each group in file order: a finding looks only at
    # its own line (looking at every directive for every finding was quadratic)
    spans: dict[tuple[int, int], list[tuple[int, Directive]]] = {}
    for order, d in enumerate(found):
        spans.setdefault((d.first, d.last), []).append((order, d))
    by_line: dict[int, list[list[tuple[int, Directive]]]] = {}
    for (first, last), group in spans.items():
        for line in range(first, last + 1):
            by_line.setdefault(line, []).append(group)
    kept = []
    for f in findings:
        hit: Directive | None = None
        best = len(found)
        for group in by_line.get(f.span.line, ()):
            for order, d in group:
                if order >= best:
                    break
                if not d.rules or f.rule in d.rules:
                    hit, best = d, order  # the first in file order, as one pass would find
                    break
        if hit is None:
            kept.append(f)
        else:
            hit.used.add(f.rule)
    for d in found:
        if d.misplaced:
            kept.append(_unused(path, d, "suppression at the end of a line continued with "
                                "`\\` is not honoured: the comment ends the shell continuation",
                                hint="move it to a line of its own before the command"))
            continue
        unknown = [r for r in d.rules if r not in known]
        unused = [r for r in d.rules if r in known and r not in d.used]
        if unknown:
            kept.append(_unused(path, d, f"unknown rule {', '.join(unknown)} in suppression"))
        if unused or (not d.rules and not d.used):
            what = ", ".join(unused) if unused else "every rule"
            kept.append(_unused(path, d, f"suppression of {what} matches no finding"))
    return kept


def _unused(path: str, d: Directive, message: str, hint: str = "remove the comment"
            ) -> Finding:
    return Finding("unused-suppression", "CX002", Severity.INFO, message,
                   Span(path, d.line, d.column), hint=hint)


def add_directives(text: str, findings: list[Finding], ranges: list[tuple[int, int]]) -> str:
    r"""``text`` with a `# cannery: ignore=…` line before each place a finding is reported:
    before its instruction in a Dockerfile (``ranges``), before its line in a workflow (moved
    up past shell continuation lines, where a comment line would end the command). Never at
    the end of a line: after a trailing `\` that would end the continuation."""
    lines = text.split("\n")
    starts = [a for a, _ in ranges]
    at: dict[int, set[str]] = {}  # 1-based line to insert before → rules
    for f in findings:
        if f.rule in ("parse-error", "unused-suppression", "internal-error", "skipped-file"):
            continue
        line = f.span.line
        if ranges:
            i = bisect_right(starts, line) - 1  # the instruction holding the line, if any
            line = ranges[i][0] if i >= 0 and line <= ranges[i][1] else line
        else:
            while line > 1 and lines[line - 2].rstrip().endswith("\\"):
                line -= 1
        at.setdefault(line, set()).add(f.rule)
    for line in sorted(at, reverse=True):
        target = lines[line - 1] if line - 1 < len(lines) else ""
        indent = target[: len(target) - len(target.lstrip())]
        rules = set(at[line])
        prev = lines[line - 2] if line >= 2 else ""
        m = DIRECTIVE.search(prev)
        if m and m.group(1) == "ignore" and prev.strip().startswith("#"):
            rules.update(r.strip() for r in (m.group(2) or "").split(",") if r.strip())
            lines[line - 2] = f"{indent}# cannery: ignore={','.join(sorted(rules))}"
        else:
            lines.insert(line - 1, f"{indent}# cannery: ignore={','.join(sorted(rules))}")
    return "\n".join(lines)
