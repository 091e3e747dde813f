"""A no-op `cannery build` against a full build of the same inputs, side by side in one run.

    .venv/bin/python bench/build_noop.py [--full 2] [--noop 5]

Sets up the e2e world (stand-in base, installers, git host, wheel index, TLS registries with
auth; see tests/e2e/buildenv.py), then times, as a user runs it (a fresh `cannery build --push`
process): a full build of both platforms from scratch (`--force`: no layer cache, linux/arm64
under qemu), and a rebuild with nothing changed (every platform skipped, no tag moved). Medians
of the runs; the table gives seconds and the ratio no-op / full. Needs what scripts/test.sh
installs. Not a test: nothing here fails on timing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from lint_vs_hadolint import machine  # noqa: E402

from tests.e2e.buildenv import cleanup_local_images, make_world  # noqa: E402
from tests.services.tlsca import make_ca  # noqa: E402


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, dict]:  # type: ignore[type-arg]
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"build failed:\n{proc.stderr[-3000:]}")
    return took, json.loads(proc.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", type=int, default=2, help="full builds to time")
    ap.add_argument("--noop", type=int, default=5, help="no-op builds to time")
    args = ap.parse_args()
    os.environ.setdefault("BUILDAH_ISOLATION", "chroot")
    with tempfile.TemporaryDirectory(prefix="cannery-bench-") as tmp:
        root = Path(tmp)
        world = make_world(root / "world", make_ca(root / "ca"))
        try:
            catalog = world.catalog(root / "catalog")
            base = [sys.executable, "-m", "cannery", "build", "--catalog", str(catalog),
                    "--push", "--network", "host", "--json", "--log-dir", str(root / "logs")]
            env = world.env()
            timed(base, env)  # lock, and warm the base image pull; not timed
            full = []
            for _ in range(args.full):
                took, summary = timed([*base, "--force"], env)
                full.append(took)
            noop = []
            for _ in range(args.noop):
                took, summary = timed(base, env)
                image = summary["images"][0]
                assert all(p["skipped"] for p in image["platforms"]) and not image["tags_moved"]
                noop.append(took)
        finally:
            world.stop()
            cleanup_local_images()
    fm, nm = statistics.median(full), statistics.median(noop)
    print(f"machine: {machine()}")
    print(f"date: {time.strftime('%Y-%m-%d')}\n")
    print("| build (linux/amd64 + linux/arm64, pushed) | runs | median s | min s | max s |")
    print("|---|---|---|---|---|")
    print(f"| full, from scratch (`--force`) | {len(full)} | {fm:.2f} | {min(full):.2f} | "
          f"{max(full):.2f} |")
    print(f"| no-op, inputs unchanged | {len(noop)} | {nm:.2f} | {min(noop):.2f} | "
          f"{max(noop):.2f} |")
    print(f"\nno-op / full = {nm / fm:.3f}  (full / no-op = {fm / nm:.0f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
