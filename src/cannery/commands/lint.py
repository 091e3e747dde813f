"""`cannery lint`: argparse, not typer, so a one-file run starts fast (imports are lazy)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from cannery.errors import InputError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Callable

    from cannery.lint.config import LintConfig
    from cannery.lint.engine import Engine
    from cannery.lint.model import Finding, Severity

FORMATS = ("text", "json", "sarif", "github")


class _Help(argparse.RawDescriptionHelpFormatter):
    """Help laid out like the rest of cannery's (click's): `Usage:`, `Arguments:`, `Options:`."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=30, width=88)

    def add_usage(self, usage: str | None, actions: object, groups: object,
                  prefix: str | None = None) -> None:
        super().add_usage(usage, actions, groups, "Usage: ")  # type: ignore[arg-type]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cannery lint",
        usage="%(prog)s [OPTIONS] [PATH]...",
        description="  Lint Dockerfiles and image-build workflows for the defects review finds\n"
        "  in accelerator images.",
        epilog="Exit status: 0 clean (or below --fail-on), 1 a finding at or above --fail-on "
        "(sarif: only with an explicit --fail-on), 2 usage error or unreadable file.",
        formatter_class=_Help,
        add_help=False,
    )
    p._positionals.title = "Arguments"
    p._optionals.title = "Options"
    p.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                   help="Files or directories (default: .)")
    p.add_argument("--format", choices=FORMATS, default=None, metavar="FORMAT",
                   help="text, json, sarif or github (default: text; github when "
                   "GITHUB_ACTIONS=true)")
    p.add_argument("--output", "-o", type=Path, metavar="FILE",
                   help="Write the report to this file")
    p.add_argument("--fail-on", metavar="SEVERITY", help="Lowest severity that fails: info, "
                   "warning (default), error, critical")
    p.add_argument("--min-confidence", choices=("low", "medium", "high"), metavar="LEVEL",
                   help="Least sure findings to report: low, medium (default), high")
    p.add_argument("--select", metavar="RULES",
                   help="Only these rules (comma-separated names or codes)")
    p.add_argument("--ignore", metavar="RULES", help="Skip these rules (comma-separated)")
    p.add_argument("--config", type=Path, metavar="FILE",
                   help="Read options from this TOML file only")
    p.add_argument("--fix", action="store_true", help="Apply safe fixes to the files")
    p.add_argument("--unsafe-fixes", action="store_true", help="With --fix/--diff: unsafe too")
    p.add_argument("--diff", action="store_true", help="Print the fixes as a diff; write nothing")
    p.add_argument("--baseline-commit", metavar="REV", help="Report only findings not "
                   "present at git revision REV (matched by rule, file and message)")
    p.add_argument("--add-suppressions", action="store_true", help="Write a `# cannery: "
                   "ignore=…` line before every current finding, then report what is left "
                   "(files it leaves alone are named on stderr, with the reason)")
    p.add_argument("--explain", metavar="RULE", help="Print a rule's documentation")
    p.add_argument("--list-rules", action="store_true", help="List every rule")
    p.add_argument("--no-color", action="store_true", help="Never colour text output")
    p.add_argument("--help", "-h", action="help", help="Show this message and exit.")
    return p


def _explain(name: str) -> int:
    import difflib

    from cannery.lint.ruleset import REMOVED, RuleSet

    rule = RuleSet.resolve(name)
    if rule is None:
        if name in REMOVED:
            raise InputError(f"rule {name} was removed: {REMOVED[name]}")
        close = difflib.get_close_matches(name, RuleSet.names(), n=1)
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
    from cannery.lint.ruleset import RULES

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
    overridden = _overrides(args)
    fmt = args.format or ("github" if os.environ.get("GITHUB_ACTIONS") == "true" else "text")
    files, roots = _discover(args.paths or [Path(".")])
    # a workflow is linked to the Dockerfiles it builds wherever they are in this run
    peers = tuple(str(p) for p, k in files if k == "dockerfile")
    engine_for = _engines(args.config, overridden, peers)
    res = _Results()
    for path, kind in files:
        _lint_file(args, engine_for(path), path, kind, roots[path], res)
    if args.baseline_commit:
        from cannery.lint.baseline import new_only

        res.findings = new_only(res.findings, files, args.baseline_commit,
                                lambda p, t, k: engine_for(p).lint_text(str(p), t, k))
    if res.writes:
        from cannery.util.fs import atomic_write

        for path, text in res.writes.items():
            atomic_write(path, text)
    if args.diff:
        sys.stdout.write("".join(res.diffs))
        return 1 if res.diffs else 0
    return _report(fmt, args, res, len(files))


class _Results:
    """What linting the files gave: the findings and the texts they were found in, fixes to
    show (--diff) or write, each file's --fail-on, and the files --add-suppressions left
    alone, with the reason. (A plain class: see lint/facts/script.py.)"""

    __slots__ = ("diffs", "failed_on", "findings", "skipped", "sources", "writes")

    def __init__(self) -> None:
        self.sources: dict[str, str] = {}
        self.findings: list[Finding] = []
        self.diffs: list[str] = []
        self.writes: dict[Path, str] = {}
        self.failed_on: dict[str, Severity] = {}
        self.skipped: list[str] = []


def _overrides(args: argparse.Namespace) -> Callable[[LintConfig], LintConfig]:
    """The command line's options over a config file's (--select, --ignore, --min-confidence,
    --fail-on), each checked here, before any file is read."""
    from cannery.lint.config import rule_list
    from cannery.lint.model import Confidence, Severity

    select = rule_list(args.select.split(","), "--select") if args.select else None
    ignore = rule_list(args.ignore.split(","), "--ignore") if args.ignore else ()
    fail_on = None
    if args.fail_on is not None:
        try:
            fail_on = Severity.parse(args.fail_on)
        except ValueError as exc:
            raise InputError(f"--fail-on: {exc}") from None

    def overridden(cfg: LintConfig) -> LintConfig:
        if select is not None:
            cfg = cfg.replace(select=select)
        if ignore:
            cfg = cfg.replace(ignore=cfg.ignore + ignore)
        if args.min_confidence is not None:
            cfg = cfg.replace(min_confidence=Confidence.parse(args.min_confidence))
        return cfg.replace(fail_on=fail_on) if fail_on is not None else cfg

    return overridden


def _discover(paths: list[Path]) -> tuple[list[tuple[Path, str]], dict[Path, Path]]:
    """The files to lint under ``paths``, with their kinds, and the folder each may be read in:
    the repository holding the path it was found under (or that directory itself, outside a
    git repository); see lint/files.py."""
    from cannery.lint.engine import discover
    from cannery.lint.files import repository

    files: list[tuple[Path, str]] = []
    roots: dict[Path, Path] = {}
    for arg in paths:
        named = discover([arg])
        root = repository(arg if arg.is_dir() else arg.absolute().parent)
        roots.update((p, root) for p, _ in named)
        files += named
    return files, roots


def _engines(config: Path | None, overridden: Callable[[LintConfig], LintConfig],
             peers: tuple[str, ...]) -> Callable[[Path], Engine]:
    """The engine for a file: options come from the config nearest it (or ``config`` for all
    of them), under the command line's; folders with the same config share one engine."""
    from cannery.lint.config import load_config
    from cannery.lint.engine import Engine

    engines: dict[Path, Engine] = {}

    def engine_for(path: Path) -> Engine:
        folder = path.resolve().parent
        if folder not in engines:
            cfg = overridden(load_config(folder, config))
            same = next((e for e in engines.values() if e.config.source == cfg.source), None)
            engines[folder] = same if same is not None and config is None else Engine(cfg)
            engines[folder].peers = peers
        return engines[folder]

    return engine_for


def _lint_file(args: argparse.Namespace, engine: Engine, path: Path, kind: str, root: Path,
               res: _Results) -> None:
    """Lint one file into ``res``: fixed first with --fix or --diff, given an ignore comment
    for each finding with --add-suppressions (and linted again)."""
    from cannery.lint.engine import read
    from cannery.lint.files import Skipped

    name = str(path)
    res.failed_on[name] = engine.config.fail_on
    try:
        text = read(path, root)
    except Skipped as exc:  # a FIFO, a device, a link out of the repository, too large
        res.findings.extend(engine.skipped(name, exc.reason))
        return
    if args.fix or args.diff:
        new, _ = engine.fix_text(name, text, kind, unsafe=args.unsafe_fixes)
        if new != text:
            import difflib

            if args.diff:
                res.diffs.append("".join(difflib.unified_diff(
                    text.splitlines(True), new.splitlines(True), f"a/{name}", f"b/{name}")))
            else:
                res.writes[path] = new
                text = new
    res.sources[name] = text
    found = engine.lint_text(name, text, kind)
    if args.add_suppressions and found:
        marked, why = _suppressed(engine, name, text, kind, found)
        if marked is not None:
            res.writes[path] = marked
            res.sources[name] = marked
            found = engine.lint_text(name, marked, kind)
        else:
            res.skipped.append(f"{name}: {why}")
    res.findings.extend(found)


def _report(fmt: str, args: argparse.Namespace, res: _Results, files: int) -> int:
    """Write the report (to --output or stdout), the skipped files and the text summary on
    stderr; the exit status: 1 when a finding is at or above its file's --fail-on (for sarif,
    only with an explicit --fail-on), else 0."""
    from cannery.lint.model import Severity

    report = _format(fmt, res.findings, res.sources, files, args)
    if args.output:
        from cannery.util.fs import atomic_write

        atomic_write(args.output, report)
    else:
        sys.stdout.write(report)
    for line in res.skipped:  # on stderr in every format, so a SARIF or JSON report stays clean
        print(f"cannery: --add-suppressions skipped {line}", file=sys.stderr)
    if fmt == "text" and not args.output:
        from cannery.lint.output.text import summary

        done = "added suppressions to" if args.add_suppressions else "fixed"
        extra = f"; {done} {len(res.writes)} file(s)" if res.writes else ""
        print(summary(res.findings, files) + extra, file=sys.stderr)
    if fmt == "sarif" and args.fail_on is None:
        return 0
    return 1 if any(f.severity >= res.failed_on.get(f.span.path, Severity.WARNING)
                    for f in res.findings) else 0


def _suppressed(engine, name: str, text: str, kind: str, found: list  # type: ignore[no-untyped-def,type-arg]
                ) -> tuple[str | None, str]:
    """``text`` with an ignore comment for each finding, or None and the reason it was left
    alone: nothing a comment can suppress, or comments that would break the file or change
    what it means."""
    from cannery.lint import suppress
    from cannery.lint.facts.dockerfile import parse_dockerfile

    if any(f.rule == "parse-error" for f in found):
        return None, "it does not parse (parse-error); fix that first"
    ranges: list[tuple[int, int]] = []
    if kind == "dockerfile":
        facts = parse_dockerfile(name, text, engine.config.base_image_shells)
        ranges = [(i.line, i.end_line) for i in facts.instructions]
    new = suppress.add_directives(text, found, ranges)
    if new == text:
        rules = sorted({f.rule for f in found})
        return None, (f"only {', '.join(rules)} findings, which a comment cannot suppress "
                      "(remove or fix the comments they name)")
    if any(f.rule == "parse-error" for f in engine.lint_text(name, new, kind)):
        return None, "a comment line there would break the file (it would no longer parse)"
    if kind == "workflow" and not _same_yaml(text, new):
        return None, ("a comment line there would change a YAML value (a folded `>` block, a "
                      "multi-line plain or quoted scalar); suppress those findings by hand")
    return new, ""


def _same_yaml(old: str, new: str) -> bool:
    """Whether two workflow texts load to the same data, once the added comment lines are
    taken out of block scalars (where they are shell comments, harmless)."""
    import re

    import yaml

    def norm(value: object) -> object:
        if isinstance(value, str):
            return re.sub(r"(?m)^[ \t]*# cannery: ignore=.*\n?", "", value)
        if isinstance(value, list):
            return [norm(v) for v in value]
        if isinstance(value, dict):
            return {k: norm(v) for k, v in value.items()}
        return value

    try:
        return bool(norm(yaml.safe_load(old)) == norm(yaml.safe_load(new)))
    except yaml.YAMLError:
        return False


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
