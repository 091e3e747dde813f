"""Findings per rule on real files, and a random sample to judge by hand.

    .venv/bin/python bench/lint_precision.py DIR_OR_FILE... [--sample 30] [--seed 1]

Point it at a checkout of a public project (e.g. its `docker/` and `.github/` folders). It
prints a table of findings per rule and severity, then a seeded random sample of findings
with their source line, so a person can mark each one right or wrong and compute precision.
Not a test: the numbers depend on the files given.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("paths", nargs="+", type=Path)
    p.add_argument("--sample", type=int, default=30, help="findings to print (default 30)")
    p.add_argument("--seed", type=int, default=1, help="random seed for the sample")
    args = p.parse_args()

    from cannery.lint.config import load_config
    from cannery.lint.engine import Engine, discover, read

    files = discover(args.paths)
    # as `cannery lint` does: workflows see the Dockerfiles linted with them
    peers = tuple(str(p) for p, k in files if k == "dockerfile")
    findings = []
    for path, kind in files:
        engine = Engine(load_config(path.resolve().parent), peers=peers)
        findings += engine.lint_text(str(path), read(path), kind)
    by_rule = Counter((f.rule, str(f.severity)) for f in findings)
    print(f"{len(files)} files, {len(findings)} findings\n")
    print(f"| {'rule':<30} | {'severity':<8} | {'count':>5} |")
    print(f"|{'-' * 32}|{'-' * 10}|{'-' * 7}|")
    for (rule, sev), n in sorted(by_rule.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"| {rule:<30} | {sev:<8} | {n:>5} |")
    sample = random.Random(args.seed).sample(findings, min(args.sample, len(findings)))
    print(f"\nsample of {len(sample)} (seed {args.seed}):")
    for i, f in enumerate(sorted(sample, key=lambda f: f.sort_key), start=1):
        lines = Path(f.span.path).read_text(errors="replace").split("\n")
        src = lines[f.span.line - 1].strip() if f.span.line <= len(lines) else ""
        print(f"{i:>3}. {f.span.path}:{f.span.line}:{f.span.column} {f.rule} [{f.severity}]"
              f"\n     {f.message}\n     > {src[:160]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
