"""`cannery lint`: argparse, not typer, so a one-file run starts fast (imports are lazy)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from cannery.errors import InputError

FORMATS = ("text", "json", "sarif", "github")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cannery lint",
        description="Lint Dockerfiles and image-build workflows for the defects review finds "
        "in accelerator images.",
        epilog="Exit status: 0 clean (or below --fail-on), 1 a finding at or above --fail-on "
        "(sarif: only with an explicit --fail-on), 2 usage error or unreadable file.",
    )
    p.add_argument("paths", nargs="*", type=Path, help="files or directories (default: .)")
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="output format (default: text; github when GITHUB_ACTIONS=true)")
    p.add_argument("--output", "-o", type=Path, help="write the report to this file")
    p.add_argument("--fail-on", help="lowest severity that fails: info, warning (default), "
                   "error, critical")
    p.add_argument("--select", help="only these rules (comma-separated names or codes)")
    p.add_argument("--ignore", help="skip these rules (comma-separated)")
    p.add_argument("--config", type=Path, help="read options from this TOML file only")
    p.add_argument("--fix", action="store_true", help="apply safe fixes to the files")
    p.add_argument("--unsafe-fixes", action="store_true", help="with --fix/--diff: unsafe too")
    p.add_argument("--diff", action="store_true", help="print the fixes as a diff; write nothing")
    p.add_argument("--explain", metavar="RULE", help="print a rule's documentation")
    p.add_argument("--list-rules", action="store_true", help="list every rule")
    p.add_argument("--no-color", action="store_true", help="never colour text output")
    return p


def _explain(name: str) -> int:
    import difflib

    from cannery.lint.registry import REMOVED, Registry

    rule = Registry.resolve(name)
    if rule is None:
        if name in REMOVED:
            raise InputError(f"rule {name} was removed: {REMOVED[name]}")
        close = difflib.get_close_matches(name, Registry.names(), n=1)
        raise InputError(f"unknown rule {name!r}" + (f" (did you mean {close[0]!r}?)"
                                                     if close else ""))
    import inspect

    doc = inspect.cleandoc(rule.__doc__ or "")
    fix = {"none": "no fix", "safe": "safe fix (--fix)", "unsafe": "unsafe fix"}[rule.fix]
    print(f"{rule.name} ({rule.code}) — default severity {rule.severity}, "
          f"{'/'.join(rule.targets)}, {fix}\n")
    print(doc)
    return 0


def _list() -> int:
    from cannery.lint.registry import RULES

    for r in RULES:
        print(f"{r.code}  {r.name:<30} {r.severity!s:<9} {'/'.join(r.targets):<20} "
              f"{'fix' if r.fix == 'safe' else ''}")
    return 0


def run(argv: list[str]) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code in (0, None) else 2
    if args.explain:
        return _explain(args.explain)
    if args.list_rules:
        return _list()

    from dataclasses import replace

    from cannery.lint.config import load_config, rule_list
    from cannery.lint.engine import Engine, discover, read
    from cannery.lint.model import Severity

    cfg = load_config(Path.cwd(), args.config)
    if args.select:
        cfg = replace(cfg, select=rule_list(args.select.split(","), "--select"))
    if args.ignore:
        cfg = replace(cfg, ignore=cfg.ignore + rule_list(args.ignore.split(","), "--ignore"))
    explicit_fail = args.fail_on is not None
    if explicit_fail:
        try:
            cfg = replace(cfg, fail_on=Severity.parse(args.fail_on))
        except ValueError as exc:
            raise InputError(f"--fail-on: {exc}") from None
    fmt = args.format or ("github" if os.environ.get("GITHUB_ACTIONS") == "true" else "text")
    files = discover(args.paths or [Path(".")])
    engine = Engine(cfg)
    sources: dict[str, str] = {}
    findings = []
    diffs: list[str] = []
    writes: dict[Path, str] = {}
    for path, kind in files:
        text = read(path)
        name = str(path)
        if args.fix or args.diff:
            new, _ = engine.fix_text(name, text, kind, unsafe=args.unsafe_fixes)
            if new != text:
                import difflib

                if args.diff:
                    diffs.append("".join(difflib.unified_diff(
                        text.splitlines(True), new.splitlines(True), f"a/{name}", f"b/{name}")))
                else:
                    writes[path] = new
                    text = new
        sources[name] = text
        findings.extend(engine.lint_text(name, text, kind))
    if writes:
        from cannery.util.fs import atomic_write

        for path, text in writes.items():
            atomic_write(path, text)
    if args.diff:
        sys.stdout.write("".join(diffs))
        return 1 if diffs else 0

    report = _format(fmt, findings, sources, len(files), args)
    if args.output:
        from cannery.util.fs import atomic_write

        atomic_write(args.output, report)
    else:
        sys.stdout.write(report)
    if fmt == "text" and not args.output:
        from cannery.lint.output.text import summary

        extra = f"; fixed {len(writes)} file(s)" if writes else ""
        print(summary(findings, len(files)) + extra, file=sys.stderr)
    if fmt == "sarif" and not explicit_fail:
        return 0
    return 1 if any(f.severity >= cfg.fail_on for f in findings) else 0


def _format(fmt: str, findings: list, sources: dict[str, str], files: int,  # type: ignore[type-arg]
            args: argparse.Namespace) -> str:
    if fmt == "json":
        from cannery.lint.output import json as out_json

        return out_json.render(findings, files)
    if fmt == "sarif":
        from cannery.lint.output import sarif

        return sarif.render(findings)
    if fmt == "github":
        from cannery.lint.output import github

        return github.render(findings)
    from cannery.lint.output import text

    colour = not args.no_color and not args.output and sys.stdout.isatty() and (
        "NO_COLOR" not in os.environ)
    return text.render(findings, sources, colour)
