"""The build benchmark (bench/build_vs_seed.py) at its tiny size, once, so it keeps working: real
buildah, real registries, the generated stand-in stack. Checks what it reports, not how fast
anything is (timings here say nothing: the machine is shared and the size is tiny). About 70 s on
an idle 2-core machine, over two minutes under load; the timeout leaves room for that."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e

if shutil.which("buildah") is None:  # CI installs it (scripts/test.sh); a dev box may not have it
    if os.environ.get("CI"):
        raise RuntimeError("buildah is not installed: scripts/test.sh installs it")
    pytest.skip("buildah is not installed (run scripts/test.sh)", allow_module_level=True)

NUMBER = r"\d+\.\d+"


def _bench(script: str, out: Path, *args: str, timeout: int) -> str:
    """Run ``bench/SCRIPT`` at its tiny size, writing to ``out``; its stdout."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), "--size", "tiny", *args, "--out", str(out)],
        capture_output=True, text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL,
        env={**os.environ, "BUILDAH_ISOLATION": "chroot"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_benchmark_runs_at_tiny_size(tmp_path: Path) -> None:
    # --base HEAD: the bump is timed a third way, with cannery exported from git
    stdout = _bench("build_vs_seed.py", tmp_path, "--runs", "1", "--base", "HEAD", timeout=400)
    table = (tmp_path / "build.md").read_text()
    assert stdout.strip() == table.strip()
    assert "size: tiny" in table and "linux/amd64 only" in table
    for row in ("cold build, pushed", "rebuild after a framework bump, pushed",
                'same bump, (b) with installer = "pip"', "the same bumps' CPU time",
                "same bump, (b) with cannery at HEAD (before)"):
        timed = rf"{NUMBER} ± {NUMBER}"
        pattern = rf"\| {re.escape(row)}[^|]* \| {timed} \| {timed} \| {NUMBER} \|"
        assert re.search(pattern, table), row
    assert re.search(rf"\| no-op build \(inputs unchanged\) \| – \| {NUMBER} ± {NUMBER} \|", table)
    assert re.search(rf"\| compile step alone \(1 job vs \d+\) \| {NUMBER}", table)
    layers = re.search(r"\| layers \| (\d+) \| (\d+) \|", table)
    assert layers and int(layers[1]) > 1 and int(layers[2]) > 1
    sizes = re.search(rf"\| compressed MB \| ({NUMBER}) \| ({NUMBER}) \|", table)
    assert sizes and float(sizes[1]) > 0 and float(sizes[2]) > 0
    # Every goal of the issue is reported, each with a verdict.
    assert len(re.findall(r"\| (yes|no) \|", table)) == 8
    assert re.search(rf"framework bump, \(b\) this tree / \(b\) at HEAD, same run: {NUMBER}", table)
    assert (tmp_path / "build.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_family_benchmark_runs_at_tiny_size(tmp_path: Path) -> None:
    """bench/build_family.py at its tiny size: 8 images both ways, real buildah and registries.
    Checks what cannery did (the no-op skipped every image, the bump rebuilt exactly the 4 that
    use the bumped pin, each from its changed step), never how fast."""
    stdout = _bench("build_family.py", tmp_path, timeout=900)
    table = (tmp_path / "family.md").read_text()
    assert stdout.strip() == table.strip()
    assert "size: tiny" in table and "8 images" in table
    for row in ("cold build, pushed", "nightly, nothing changed", "nightly after bumping"):
        pattern = rf"\| {re.escape(row)}[^|]* \| {NUMBER} \| {NUMBER} \| {NUMBER} \|"
        assert re.search(pattern, table), row
    assert "every image skipped: yes" in table
    assert re.search(r"\| images rebuilt = the 4 that use verl-next \| 4 \| 4 \| yes \|", table)
    steps = re.search(r"\| steps run per rebuilt image[^|]* \| (\d+) of (\d+) \|[^|]*\| yes \|",
                      table)
    assert steps and 0 < int(steps[1]) < int(steps[2])
    sums = re.search(rf"\| distinct / sum \| ({NUMBER}) \| ({NUMBER}) \|", table)
    assert sums and float(sums[2]) < 1.0  # the images share their base and toolkit layers
    assert (tmp_path / "family.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_first_lock_benchmark_runs_at_tiny_size(tmp_path: Path) -> None:
    """bench/first_lock.py at its tiny size, once each way: the family's first lock and render
    both one at a time and side by side, on loopback and behind the slow link. Checks that
    both ways write the same lock, never how fast."""
    stdout = _bench("first_lock.py", tmp_path, "--runs", "1", timeout=600)
    table = (tmp_path / "first_lock.md").read_text()
    assert stdout.strip() == table.strip()
    assert "8-image family" in table and "size tiny" in table
    for row in ("loopback", "remote"):
        assert re.search(rf"\| {row} \| {NUMBER} s \| {NUMBER} s \| {NUMBER}x \|", table), row
    assert "The same lock both ways (times aside): yes." in table


def test_scale_benchmark_registry_rows_at_tiny_size(tmp_path: Path) -> None:
    """bench/scale.py's no-op nightly and status rows at 2 images: two real local registries,
    every image pushed as a build would have; the bench itself checks that the nightly skipped
    every platform and moved no tag, and that status found every entry fresh."""
    out = tmp_path / "scale.md"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "scale.py"), "--sizes", "2", "--registry-sizes",
         "2", "--repeat", "1", "--out", str(out), "--chart", str(tmp_path / "scale.png")],
        capture_output=True, text=True, timeout=300, check=False, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = out.read_text()
    assert proc.stdout.strip() == table.strip()
    row = rf"\| 2 \| 4 \| {NUMBER} \| {NUMBER} \| {NUMBER} \| {NUMBER} \| 8 \|"
    assert re.search(row, table), table
    assert (tmp_path / "scale.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
