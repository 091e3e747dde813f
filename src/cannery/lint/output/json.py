"""JSON output. The schema is findings.schema.json beside this file; its version field changes
only when a field is removed or changes meaning."""

from __future__ import annotations

import json

from cannery.lint.model import Finding

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

VERSION = 1


def finding_dict(f: Finding) -> dict[str, Any]:
    return {
        "rule": f.rule,
        "code": f.code,
        "severity": str(f.severity),
        "confidence": str(f.confidence),
        "path": f.span.path,
        "line": f.span.line,
        "column": f.span.column,
        "end_line": f.span.end_line,
        "end_column": f.span.end_column,
        "message": f.message,
        "hint": f.hint or None,
        "fix": None if f.fix is None else {"description": f.fix.description,
                                           "safe": f.fix.safe},
        "related": [{"path": s.path, "line": s.line, "column": s.column, "message": m}
                    for s, m in f.related],
    }


def render(findings: list[Finding], files: int) -> str:
    doc = {
        "version": VERSION,
        "tool": "cannery",
        "files": files,
        "findings": [finding_dict(f) for f in findings],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
