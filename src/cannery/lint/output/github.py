"""GitHub Actions workflow commands: one ::error/::warning/::notice line per finding."""

from __future__ import annotations

from cannery.lint.model import Confidence, Finding, Severity

COMMAND = {Severity.INFO: "notice", Severity.WARNING: "warning", Severity.ERROR: "error",
           Severity.CRITICAL: "error"}


def _escape(text: str, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


def render(findings: list[Finding]) -> str:
    lines = []
    for f in findings:
        s = f.span
        props = (f"file={_escape(s.path, True)},line={s.line},col={s.column},"
                 f"endLine={s.end_line},title={_escape(f.rule + ' (' + f.code + ')', True)}")
        sure = "" if f.confidence == Confidence.HIGH else f" ({f.confidence} confidence)"
        msg = f.message + sure + (f" — {f.hint}" if f.hint else "")
        lines.append(f"::{COMMAND[f.severity]} {props}::{_escape(msg)}")
    return "\n".join(lines) + ("\n" if lines else "")
