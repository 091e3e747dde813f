"""`--baseline-commit REV`: keep only the findings a change introduced since REV.

Each linted file is also linted as it was at REV (read with `git show`); a finding present
then is dropped now. Findings are matched by rule, file and message, with line numbers in
the message ignored, so edits that only move code do not make old findings new (semgrep's
baseline works the same way). Matching counts duplicates: two identical findings now and one
then leave one.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from cannery.errors import InputError
from cannery.lint.model import Finding

LINE_REF = re.compile(r"\blines? \d+(?:, \d+)*")


def fingerprint(f: Finding) -> tuple[str, str, str]:
    return f.rule, f.span.path, LINE_REF.sub("line N", f.message)


def _git(args: list[str], cwd: Path) -> str:
    from cannery.util.cmd import run

    return run(["git", "-C", str(cwd), *args])


def old_texts(rev: str, paths: list[Path]) -> dict[Path, str]:
    """The text of each of ``paths`` at ``rev`` (files that did not exist then are absent)."""
    from cannery.util.cmd import CommandError

    if rev.startswith("-") or not rev.strip():
        # git would read it as an option
        raise InputError(f"--baseline-commit {rev!r}: not a revision")
    if not paths:
        return {}
    here = paths[0].resolve().parent
    try:
        top = Path(_git(["rev-parse", "--show-toplevel"], here).strip())
        commit = _git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], top).strip()
    except CommandError:
        raise InputError(f"--baseline-commit {rev}: not a commit of the git repository at "
                         f"{here}") from None
    tracked = set(_git(["ls-tree", "-r", "--name-only", commit], top).splitlines())
    out: dict[Path, str] = {}
    for p in paths:
        try:
            rel = p.resolve().relative_to(top).as_posix()
        except ValueError:
            continue  # outside the repository: nothing to compare with
        if rel in tracked:
            out[p] = _git(["show", f"{commit}:{rel}"], top)
    return out


def new_only(findings: list[Finding], files: list[tuple[Path, str]], rev: str,
             lint: Callable[[Path, str, str], list[Finding]]) -> list[Finding]:
    """``findings`` minus those already present at ``rev``; ``lint(path, text, kind)`` lints
    an old text under the file's current name."""
    before: Counter[tuple[str, str, str]] = Counter()
    texts = old_texts(rev, [p for p, _ in files])
    for path, kind in files:
        if path in texts:
            before.update(fingerprint(f) for f in lint(path, texts[path], kind))
    out = []
    for f in findings:
        key = fingerprint(f)
        if before[key] > 0:
            before[key] -= 1
        else:
            out.append(f)
    return out
