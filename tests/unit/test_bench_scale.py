"""bench/scale.py at a tiny size, so it keeps working: it reports a row per size with the
rendered workflow's size and jobs (how fast anything is says nothing here)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_scale_bench_reports_each_size(tmp_path: Path) -> None:
    out = tmp_path / "scale.md"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "scale.py"), "--sizes", "2", "4", "--repeat", "1",
         "--registry-sizes", "--out", str(out)],  # no registry rows: e2e has them
        capture_output=True, text=True, timeout=300, check=False, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = re.findall(r"^\| (\d+) \|.*\| (\d+) KB \(under 500 KB\) \| (\d+) \| (\d+) \|$",
                      out.read_text(), re.M)
    assert [(int(n), int(jobs), int(files)) for n, _, jobs, files in rows] == [
        (2, 4, 12), (4, 4, 14)]  # check, pr, build-0, merge-0 at any size; a file per image
