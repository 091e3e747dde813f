"""Building and applying text edits. Fixes must leave a file that still parses."""

from __future__ import annotations

import re
from collections.abc import Iterable

from cannery.lint.facts.dockerfile import DockerfileFacts, Instruction, Pair
from cannery.lint.model import Edit, Finding, Fix


def line_span(facts: DockerfileFacts, first: int, last: int) -> tuple[int, int]:
    """File offsets covering physical lines first..last including the final newline."""
    start = facts.line_offsets[first - 1]
    end = facts.line_offsets[last] if last < len(facts.line_offsets) else len(facts.text)
    return start, end


def delete_lines(facts: DockerfileFacts, first: int, last: int) -> Edit:
    start, end = line_span(facts, first, last)
    return Edit(start, end, "")


def delete_instruction(facts: DockerfileFacts, inst: Instruction) -> Edit:
    return delete_lines(facts, inst.line, inst.end_line)


def replace_pairs(facts: DockerfileFacts, inst: Instruction, keep: list[Pair]) -> Edit:
    text = f"{inst.keyword} " + " ".join(f"{p.key}={p.raw}" for p in keep)
    return Edit(inst.start, inst.end, text)


def insert_before_script(facts: DockerfileFacts, inst: Instruction, text: str) -> Edit:
    first = facts.lines[inst.line - 1]
    m = re.match(r"\s*RUN\s+((?:--\S+\s+)*)", first, re.I)
    col = m.end() if m else len(first)
    at = facts.line_offsets[inst.line - 1] + col
    return Edit(at, at, text)


def _overlap(a: Edit, b: Edit) -> bool:
    if a.start == a.end and b.start == b.end:
        return a.start == b.start
    return a.start < b.end and b.start < a.end


def apply_fixes(text: str, fixes: Iterable[Fix]) -> tuple[str, list[Fix]]:
    """Apply whole fixes whose edits overlap no fix already taken (the rest wait for the next
    round, after re-linting). Returns the new text and the fixes applied."""
    taken: list[Fix] = []
    edits: list[Edit] = []
    seen: set[tuple[Edit, ...]] = set()
    for fix in fixes:
        if fix.edits in seen:
            continue
        seen.add(fix.edits)
        if any(_overlap(e, o) for e in fix.edits for o in edits):
            continue
        taken.append(fix)
        edits.extend(fix.edits)
    for e in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        text = text[: e.start] + e.text + text[e.end :]
    return text, taken


def fixable(findings: Iterable[Finding], unsafe: bool) -> list[Finding]:
    return [f for f in findings if f.fix is not None and (f.fix.safe or unsafe)]
