"""Start-up of cannery's commands, this tree against a git revision, side by side.

    .venv/bin/python bench/startup.py [--base main] [--runs 15]

Each case is a fresh interpreter: `cannery plan` on the embedded catalog, `cannery build
--help`, and the imports `cannery build --push` makes before its first build (the command
module and the attester). The base revision is exported with `git archive` into a temporary
directory and put first on PYTHONPATH, so both sides run with this venv's packages. Runs
alternate base / this tree, after one untimed warm-up each; bytecode is cached (in a temporary
PYTHONPYCACHEPREFIX, as an installed wheel has it), so compiling the sources is not counted;
with --no-bytecode-cache (PYTHONDONTWRITEBYTECODE=1, as the benchmarks' environment may set)
cannery's own sources are compiled on every run, as an editable install does then.
Prints medians of wall and CPU (user + system) time, the ratio, the machine and the load
before and after. Not a test: nothing here fails on timing.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from lint_vs_hadolint import machine  # noqa: E402

CLI = "import sys; sys.argv = ['cannery'] + sys.argv[1:]; from cannery.entry import main; main()"
CASES = {
    "cannery plan": [CLI, "plan"],
    "cannery build --help": [CLI, "build", "--help"],
    "import build + attester": ["import cannery.commands.build, cannery.attest.attach"],
    # what bench/profile_bump.py times as the bump's start-up
    "import cli + build": ["import cannery.cli, cannery.commands.build"],
}


def _run(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of ``python -c argv...``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", *argv], env=env, cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default="main", help="git revision to compare with")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--no-bytecode-cache", action="store_true",
                    help="compile cannery's sources on every run (PYTHONDONTWRITEBYTECODE=1)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base_src = Path(tmp) / "base"
        base_src.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.base, "src"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base_src)], input=archive, check=True)
        common = {k: v for k, v in os.environ.items()
                  if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
        if args.no_bytecode_cache:
            common["PYTHONDONTWRITEBYTECODE"] = "1"
            caches: dict[str, dict[str, str]] = {args.base: {}, "this tree": {}}
        else:
            caches = {args.base: {"PYTHONPYCACHEPREFIX": f"{tmp}/pyc-base"},
                      "this tree": {"PYTHONPYCACHEPREFIX": f"{tmp}/pyc-this"}}
        sides = {
            args.base: {**common, "PYTHONPATH": str(base_src / "src"), **caches[args.base]},
            "this tree": {**common, "PYTHONPATH": str(ROOT / "src"), **caches["this tree"]},
        }
        cwd = f"{tmp}"
        load_before = os.getloadavg()
        took: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for case, argv in CASES.items():
            for env in sides.values():
                _run(argv, env, cwd)  # warm-up: writes the bytecode cache
            for _ in range(args.runs):
                for side, env in sides.items():
                    took.setdefault((case, side), []).append(_run(argv, env, cwd))
        load_after = os.getloadavg()
    print(f"machine: {machine()}")
    print(f"load average (1/5/15 min) before: {' '.join(f'{x:.2f}' for x in load_before)}; "
          f"after: {' '.join(f'{x:.2f}' for x in load_after)}; {args.runs} runs each, "
          f"medians, ms; bytecode {'not ' if args.no_bytecode_cache else ''}cached\n")
    print(f"| case | {args.base} wall | this wall | ratio | {args.base} CPU | this CPU | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for case in CASES:
        b = took[(case, args.base)]
        t = took[(case, "this tree")]
        bw, tw = (statistics.median(w for w, _ in x) * 1000 for x in (b, t))
        bc, tc = (statistics.median(c for _, c in x) * 1000 for x in (b, t))
        print(f"| {case} | {bw:.0f} | {tw:.0f} | {tw / bw:.2f} | {bc:.0f} | {tc:.0f} | "
              f"{tc / bc:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
