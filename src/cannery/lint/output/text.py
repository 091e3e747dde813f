"""Human output: grouped by file, the source line with a caret, colour on a terminal."""

from __future__ import annotations

from cannery.lint.model import Confidence, Finding, Severity

COLOURS = {Severity.INFO: "36", Severity.WARNING: "33", Severity.ERROR: "31",
           Severity.CRITICAL: "1;31"}


def render(findings: list[Finding], sources: dict[str, str], colour: bool) -> str:
    def c(code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if colour else text

    out: list[str] = []
    by_file: dict[str, list[Finding]] = {}
    for f in findings:
        by_file.setdefault(f.span.path, []).append(f)
    for path, items in by_file.items():
        lines = sources.get(path, "").split("\n")
        out.append(c("1", path))
        for f in items:
            s = f.span
            sev = c(COLOURS[f.severity], str(f.severity))
            # confidence is named only when below high, so sure findings read as before
            sure = "" if f.confidence == Confidence.HIGH else f" ({f.confidence} confidence)"
            out.append(f"  {s.line}:{s.column}: {sev}[{c('1', f.rule)}]{sure} {f.message}")
            if 0 < s.line <= len(lines):
                src = lines[s.line - 1].replace("\t", " ")
                if len(src) > 200:
                    src = src[:200] + "…"
                rest = len(src) - s.column + 1
                width = (s.end_column - s.column) if s.end_line == s.line else rest
                width = max(1, min(width, max(1, len(src) - s.column + 1)))
                gutter = f"{s.line:>5} | "
                out.append(c("2", gutter) + src)
                out.append(" " * (len(gutter) + s.column - 1) + c(COLOURS[f.severity], "^" * width))
            if f.hint:
                out.append(f"        = hint: {f.hint}" + (" (fixable with --fix)"
                                                         if f.fix and f.fix.safe else ""))
        out.append("")
    return "\n".join(out)


def summary(findings: list[Finding], files: int) -> str:
    if not findings:
        return f"{files} file(s) checked: no findings"
    counts: dict[Severity, int] = {}
    for f in findings:
        counts[f.severity] = counts.get(f.severity, 0) + 1
    parts = [f"{n} {s}" for s, n in sorted(counts.items(), reverse=True)]
    fixable = sum(1 for f in findings if f.fix and f.fix.safe)
    tail = f"; {fixable} fixable with --fix" if fixable else ""
    return f"{files} file(s) checked: {len(findings)} finding(s) ({', '.join(parts)}){tail}"
