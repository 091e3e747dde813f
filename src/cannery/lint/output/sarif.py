"""SARIF 2.1.0 output (validated against the OASIS schema in the tests)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cannery import __version__
from cannery.lint.model import Finding, Severity

LEVEL = {Severity.INFO: "note", Severity.WARNING: "warning", Severity.ERROR: "error",
         Severity.CRITICAL: "error"}
SARIF_SCHEMA = ("https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/"
                "sarif-schema-2.1.0.json")
SECURITY = {"tls-verification-disabled", "unverified-download", "pipe-to-shell",
            "secret-in-arg-or-env", "secret-in-argv", "unpinned-git-ref"}


def _uri(path: str) -> str:
    p = Path(path)
    return p.as_posix() if not p.is_absolute() else p.as_uri()


def render(findings: list[Finding]) -> str:
    from cannery.lint.registry import RULES

    rules = []
    index = {}
    for i, r in enumerate(RULES):
        index[r.name] = i
        doc = (r.__doc__ or "").strip()
        short = doc.split("\n\n")[0].replace("## What it does", "").strip().split("\n")[0]
        props: dict[str, Any] = {"tags": ["security"] if r.name in SECURITY else ["quality"]}
        props["precision"] = "high"
        rules.append({
            "id": r.code,
            "name": r.name,
            "shortDescription": {"text": short or r.name},
            "fullDescription": {"text": doc or r.name},
            "help": {"text": f"cannery lint --explain {r.name}"},
            "defaultConfiguration": {"level": LEVEL[r.severity]},
            "properties": props,
        })
    results = []
    for f in findings:
        region: dict[str, Any] = {"startLine": f.span.line, "startColumn": f.span.column,
                                  "endLine": max(f.span.end_line, f.span.line)}
        if f.span.end_column > f.span.column or f.span.end_line > f.span.line:
            region["endColumn"] = max(f.span.end_column, 1)
        result: dict[str, Any] = {
            "ruleId": f.code,
            "ruleIndex": index[f.rule],
            "level": LEVEL[f.severity],
            "message": {"text": f.message + (f" ({f.hint})" if f.hint else "")},
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": _uri(f.span.path)},
                "region": region,
            }}],
            "properties": {"severity": str(f.severity)},
        }
        if f.related:
            result["relatedLocations"] = [
                {"id": i, "message": {"text": msg}, "physicalLocation": {
                    "artifactLocation": {"uri": _uri(sp.path)},
                    "region": {"startLine": sp.line, "startColumn": sp.column}}}
                for i, (sp, msg) in enumerate(f.related)]
        results.append(result)
    report = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "cannery",
                "version": __version__,
                "rules": rules,
            }},
            "results": results,
        }],
    }
    return json.dumps(report, indent=2, ensure_ascii=False) + "\n"
