"""Where a framework bump's time goes in `cannery build --push`, phase by phase.

    .venv/bin/python bench/profile_bump.py [--size tiny|moderate] [--bumps 2]

Generates the build benchmark's stand-in stack (bench/buildbench), builds it once (untimed,
writes the lock and the layer cache), then bumps the framework's pin and runs `cannery build
--push` in this process with each phase timed: Python start-up and imports, resolving the lock,
rendering, reading the registry (what is already there), the `buildah build`, waiting for the
re-lock (its Python pins resolve beside the build when it starts from the earlier ones), the
export of the image for the upload, the upload, and merging and tagging; the re-lock split
into its git and uv commands (beside the build, so not part of the total's sum), the build into
its instructions (cached or built, from buildah's STEP lines).
Beside it, alternating, the seed-style Dockerfile's bump as build_vs_seed.py times it (`buildah
build --layers`, then `buildah push`), its build split the same way. Prints one table of
medians. Not a test: nothing here fails on timing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from buildbench.measure import (  # noqa: E402
    cache_bytecode,
    cannery_build,
    run,
    seed_authfile,
    seed_build,
)
from buildbench.recipes import catalog, seed_dockerfile  # noqa: E402
from buildbench.stack import SIZES, make_stack  # noqa: E402
from lint_vs_hadolint import machine  # noqa: E402

from tests.e2e.buildenv import cleanup_local_images, make_world  # noqa: E402
from tests.services.tlsca import make_ca  # noqa: E402

PHASES = ("start-up", "resolve", "render", "registry read", "build", "wait for the re-lock",
          "inspect", "export", "upload", "protect (per-platform tag)", "merge + tag")


class Clock:
    def __init__(self) -> None:
        self.took: dict[str, float] = defaultdict(float)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.took[name] += time.perf_counter() - start

    def wrap(self, module: Any, attr: str, name: str | Callable[..., str]) -> None:
        inner = getattr(module, attr)

        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.phase(name(*args) if callable(name) else name):
                return inner(*args, **kwargs)

        setattr(module, attr, timed)


class BuildSteps:
    """Splits the `buildah build` time by instruction: buildah prints a STEP line where each
    one starts and "Using cache" when the layer cache had it; COMMIT starts the final commit.
    Each step's time (cache look-up, or run and commit) goes to its kind: "RUN (cached)",
    "LABEL (built)", ..."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.start = time.perf_counter()
        self.kind = "start-up and FROM"
        self.cached = False

    def _add(self) -> None:
        now = time.perf_counter()
        state = "" if self.kind == "start-up and FROM" else (
            " (cached)" if self.cached else " (built)")
        self.clock.took[f"build: {self.kind}{state}"] += now - self.start
        self.start = now

    def line(self, line: str) -> None:
        match = re.match(r"(?:\[\d+/\d+\] )?STEP \d+/\d+: (\w+)", line)
        if match or line.startswith("COMMIT"):
            self._add()
            self.kind = match.group(1) if match else "final commit"
            self.cached = False
        elif "Using cache" in line:
            self.cached = True

    def close(self) -> None:
        self._add()


def instrumented_build(catalog_path: Path, env: dict[str, str], clock: Clock) -> None:
    """`cannery build --push` in this process, each phase on ``clock``."""
    from cannery import pydeps
    from cannery.builder import execute, merge
    from cannery.commands import build as build_mod
    from cannery.commands.build import BuildRequest, build_cmd
    from cannery.lock import PendingLock

    clock.wrap(build_mod, "ensure_locked", "resolve")
    # the git trees the Python set is read from, and uv's resolution: in resolve, or beside
    # the build when it starts from the earlier pins (cannery.lock.PendingLock)
    clock.wrap(pydeps, "run", lambda argv, *a, **k: "re-lock: " + (
        "uv pip compile" if argv[1:3] == ["pip", "compile"] else f"{Path(argv[0]).name} "
        + next(x for x in argv[1:] if not x.startswith("-"))))
    clock.wrap(PendingLock, "settle", "wait for the re-lock")
    clock.wrap(build_mod, "render_dockerfile", "render")
    # what the tag points at, the skip decision: read ahead beside the lock, waited for here
    clock.wrap(execute, "_probe", "registry read")
    inner_stream = getattr(execute, "stream")  # noqa: B009 (wrapped below, timed)

    def stream(argv: list[str], log_path: Path, on_line: Callable[[str], None], **kw: Any) -> Any:
        if argv[1] != "build":
            with clock.phase("export" if argv[1] == "push" else "inspect"):
                return inner_stream(argv, log_path, on_line, **kw)
        steps = BuildSteps(clock)

        def each(line: str) -> None:
            steps.line(line)
            on_line(line)

        with clock.phase("build"):
            try:
                return inner_stream(argv, log_path, each, **kw)
            finally:
                steps.close()

    setattr(execute, "stream", stream)  # noqa: B010 (a stand-in, timed)
    clock.wrap(execute, "push_image_dir", "upload")
    clock.wrap(execute, "protect_platform", "protect (per-platform tag)")
    clock.wrap(merge, "publish_everywhere", "merge + tag")  # called from merge.publish_merged
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        req = BuildRequest(
            images=None, catalog=catalog_path, lock=None, platforms=None, backend="buildah",
            push=True, output=None, tag_suffix="", builder=None, force=False, locked=False,
            frozen=False, ca_cert=None, as_json=True, digest_dir=None, merge_only=False,
            network="host", log_dir=catalog_path.parent / "logs",
        )
        with contextlib.redirect_stdout(open(os.devnull, "w")):
            rc = build_cmd(req)
        if rc != 0:
            raise SystemExit(f"build failed ({rc})")
    finally:
        os.environ.clear()
        os.environ.update(saved)


def startup(env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import cannery.cli, cannery.commands.build"],
                   env=env, check=True)
    return time.perf_counter() - start


def seed_bump(world: Any, dockerfile: Path, verl: str, clock: Clock) -> float:
    """(a)'s bump as build_vs_seed.py times it (`buildah build --layers`, `buildah push`), with
    the build split by instruction like (b)'s."""
    certs = ["--cert-dir", str(world.cert_dir)]
    argv = ["buildah", "build", "--platform", "linux/amd64", "--format", "docker", "--layers",
            *certs, "--network", "host", "--build-arg", f"VERL_COMMIT={verl}",
            "-f", str(dockerfile), "-t", "localhost/bench-seed", str(dockerfile.parent)]
    start = time.perf_counter()
    steps = BuildSteps(clock)
    with clock.phase("build"):
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            steps.line(line.rstrip("\n"))
        steps.close()
        if proc.wait() != 0:
            raise SystemExit("the seed-style build failed")
    with clock.phase("upload"):
        run(["buildah", "push", "--quiet", *certs, "--authfile", str(seed_authfile(world)),
             "localhost/bench-seed", f"docker://{world.push_registry.host}/bench/seed:latest"])
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="tiny")
    ap.add_argument("--bumps", type=int, default=2)
    args = ap.parse_args()
    size = SIZES[args.size]
    os.environ.setdefault("BUILDAH_ISOLATION", "chroot")
    runs: list[dict[str, float]] = []
    totals: list[float] = []
    seed_runs: list[dict[str, float]] = []
    seed_totals: list[float] = []
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="cannery-profile-") as tmp:
        root = Path(tmp)
        cache_bytecode()
        world = make_world(root / "world", make_ca(root / "ca"))
        try:
            stack = make_stack(world, size, root / "stack", bumps=args.bumps)
            cat = root / "rendered" / "catalog.toml"
            cat.parent.mkdir()
            seed_file = root / "seed" / "Dockerfile"
            seed_file.parent.mkdir()
            seed_file.write_text(seed_dockerfile(stack, world.files.url, world.git.url,
                                                 stack.framework[0]))

            def write(verl: str) -> Path:
                cat.write_text(catalog(world.base, world.push_registry.host, "rendered",
                                       world.files.url, world.git.url, verl))
                return cat

            # warm, untimed: the lock, the layer caches, the repositories
            seed_build(world, seed_file, "seed", stack.framework[0], no_cache=False)
            cannery_build(world, write(stack.framework[0]), force=False)
            for n in range(args.bumps):  # alternating, as build_vs_seed.py does
                clock = Clock()
                seed_totals.append(seed_bump(world, seed_file, stack.framework[n + 1], clock))
                seed_runs.append(dict(clock.took))
                clock = Clock()
                clock.took["start-up"] = startup(world.env())
                start = time.perf_counter()
                instrumented_build(write(stack.framework[n + 1]), world.env(), clock)
                totals.append(time.perf_counter() - start + clock.took["start-up"])
                runs.append(dict(clock.took))
        finally:
            world.stop()
            cleanup_local_images()
    print(f"machine: {machine()}")
    print(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; size {args.size}; "
          f"{args.bumps} bumps; load average {load:.1f} before, {os.getloadavg()[0]:.1f} after\n")
    print("| phase of a framework bump, median s | (b) cannery | (a) seed-style |")
    print("|---|---|---|")

    def cell(series: list[dict[str, float]], name: str) -> str:
        if not any(name in r for r in series):
            return "–"
        return f"{statistics.median(r.get(name, 0.0) for r in series):.2f}"

    named = set(PHASES)
    keys = {k for r in [*runs, *seed_runs] for k in r}
    for name in [*PHASES, *sorted(keys - named)]:
        # "build: …" and "re-lock: …" are parts of a phase or beside one: not added again
        shown = f"&nbsp;&nbsp;{name}" if ": " in name else name
        print(f"| {shown} | {cell(runs, name)} | {cell(seed_runs, name)} |")
    rest = statistics.median(
        t - sum(v for k, v in r.items() if ": " not in k)
        for t, r in zip(totals, runs, strict=True)
    )
    print(f"| other (plan, checks, summary) | {rest:.2f} | – |")
    print(f"| total | {statistics.median(totals):.2f} | {statistics.median(seed_totals):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
