"""SARIF 2.1.0 output (validated against the OASIS schema in the tests)."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

from cannery import __version__
from cannery.lint.model import Finding, Severity

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

LEVEL = {Severity.INFO: "note", Severity.WARNING: "warning", Severity.ERROR: "error",
         Severity.CRITICAL: "error"}
SARIF_SCHEMA = ("https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/"
                "sarif-schema-2.1.0.json")
SECURITY = {"tls-verification-disabled", "unverified-download", "pipe-to-shell",
            "secret-in-arg-or-env", "secret-in-argv", "unpinned-git-ref",
            "unpinned-pip-requirement", "persisted-package-index"}
# CVSS-like scores GitHub maps to critical (>= 9), high (>= 7), medium (>= 4), low
SECURITY_SEVERITY = {Severity.CRITICAL: "9.5", Severity.ERROR: "7.5", Severity.WARNING: "5.0",
                     Severity.INFO: "2.0"}


def first_sentence(doc: str) -> str:
    """The first sentence of a rule's "What it does" section, on one line."""
    body = doc.split("## What it does", 1)[-1].split("\n## ", 1)[0]
    text = " ".join(body.split())
    m = re.match(r"(.+?[.!?])(\s|$)", text)
    return m.group(1) if m else text


def _uri(path: str) -> str:
    p = Path(path)
    return p.as_posix() if not p.is_absolute() else p.as_uri()


FINGERPRINT = "canneryFinding/v1"


def fingerprints(findings: list[Finding]) -> list[str]:
    """A stable key per finding for code scanning's `partialFingerprints`: the baseline's
    identity (rule, file, message with line numbers taken out), hashed, plus its occurrence
    among equal ones, so moving code does not make an alert new."""
    import hashlib

    from cannery.lint.baseline import fingerprint

    seen: dict[str, int] = {}
    out = []
    for f in findings:
        digest = hashlib.sha256("\0".join(fingerprint(f)).encode()).hexdigest()[:32]
        seen[digest] = seen.get(digest, 0) + 1
        out.append(f"{digest}:{seen[digest]}")
    return out


def render(findings: list[Finding]) -> str:
    from cannery.lint.ruleset import RULES

    rules = []
    index = {}
    for i, r in enumerate(RULES):
        index[r.name] = i
        doc = inspect.cleandoc(r.__doc__ or "") or r.name
        props: dict[str, Any] = {"tags": ["security"] if r.name in SECURITY else ["quality"]}
        props["precision"] = "high"
        if r.name in SECURITY:  # GitHub code scanning ranks security alerts by this
            props["security-severity"] = SECURITY_SEVERITY[r.severity]
        rules.append({
            "id": r.code,
            "name": r.name,
            "shortDescription": {"text": first_sentence(doc) or r.name},
            "fullDescription": {"text": doc},
            "help": {"text": doc, "markdown": doc},
            "defaultConfiguration": {"level": LEVEL[r.severity]},
            "properties": props,
        })
    results = []
    keys = fingerprints(findings)
    for f, key in zip(findings, keys, strict=True):
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
            "partialFingerprints": {FINGERPRINT: key},
            "properties": {"severity": str(f.severity), "confidence": str(f.confidence)},
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
