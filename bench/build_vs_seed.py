"""Build speed and image size: a seed-style Dockerfile against cannery's, same stack, same run.

    .venv/bin/python bench/build_vs_seed.py [--size tiny|moderate|large] [--runs 3]
        [--out DIR]

Generates a stand-in stack shaped like the seed's (bench/buildbench/stack.py), serves it from
the e2e world (TLS registries, HTTPS files and wheel index, git smart HTTP; all on 127.0.0.1),
and builds it for linux/amd64 only (arm64 runs under qemu here, 5-10x slower) two ways:
(a) by hand in the seed's structure, built with `buildah build --layers` and pushed (to the
registry (b) pushes to, with the same login: until 2026-12-04 (a) pushed to the anonymous one);
(b) rendered from a catalog and built by `cannery build --push`. Times, each repeated, median
and spread: cold build (no layer cache; each run pushes to a fresh repository, so no blob is
already there); rebuild after bumping the framework's pin; (b)'s no-op build; the compile step
alone at 1 job and at every core; and the floor (that compile plus writing (b)'s layers once).
(b)'s catalog installs its git components with uv (`installer = "uv"`, uv pinned in its
pip_tools); the bump is also timed for the same catalog with pip installing them
(`installer = "pip"`, as before 2026-12-02), side by side. With --base REV, the bump is also
timed with cannery as it was at git revision REV (its sources exported with `git archive`, put
first on PYTHONPATH; the same venv), in the same loop, on a repository and lock of its own and
a framework commit of its own (each side's bump rebuilds its framework step): before and after
a change, in one run.
Sizes: the pushed layers, compressed and unpacked, and their count. Prints a Markdown table,
writes OUT/build.md and OUT/build.png. Not a test: nothing here fails on timing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from buildbench.measure import (  # noqa: E402
    ImageSize,
    cache_bytecode,
    cannery_build,
    children_cpu,
    compile_alone,
    export_revision,
    image_size,
    local_rendered_image,
    pushed_digest,
    seed_build,
    write_layers,
)
from buildbench.recipes import catalog, seed_dockerfile  # noqa: E402
from buildbench.report import Results, render_chart, render_markdown  # noqa: E402
from buildbench.stack import SIZES, make_stack  # noqa: E402
from lint_vs_hadolint import machine  # noqa: E402

from tests.e2e.buildenv import cleanup_local_images, make_world  # noqa: E402
from tests.services.tlsca import make_ca  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="moderate")
    ap.add_argument("--runs", type=int, default=3, help="repeats of each timing (>= 1)")
    ap.add_argument("--out", type=Path, default=None,
                    help="where the table and chart go (default: a fresh directory under /tmp; "
                    "the README's copies in bench/results change only when asked)")
    ap.add_argument("--base", metavar="REV", default=None,
                    help="also time the bump with cannery at this git revision, alternating")
    args = ap.parse_args(argv)
    size = SIZES[args.size]
    runs = max(1, args.runs)
    os.environ.setdefault("BUILDAH_ISOLATION", "chroot")
    with tempfile.TemporaryDirectory(prefix="cannery-bench-") as tmp:
        root = Path(tmp)
        cache_bytecode()
        base = export_revision(args.base, root / "base") if args.base else None
        world = make_world(root / "world", make_ca(root / "ca"))
        try:
            results = measure(world, root, size, args.size, runs, base)
        finally:
            world.stop()
            cleanup_local_images()
    results.base = args.base
    results.machine = machine()
    results.date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    table = render_markdown(results)
    print(table)
    args.out = args.out or Path(tempfile.mkdtemp(prefix="cannery-bench-"))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "build.md").write_text(table)
    render_chart(results, args.out / "build.png")
    print(f"\nwrote {args.out / 'build.md'} and {args.out / 'build.png'}", file=sys.stderr)
    return 0


def measure(world, root: Path, size, size_name: str, runs: int,  # type: ignore[no-untyped-def]
            base: Path | None = None) -> Results:
    def say(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    say("generating the stand-in stack")
    # with a base revision, its bumps go to commits of their own: runs + 1 ... 2 * runs
    stack = make_stack(world, size, root / "stack", bumps=2 * runs if base else runs)
    files, git = world.files.url, world.git.url
    seed_dir = root / "seed"
    seed_dir.mkdir()
    seed_file = seed_dir / "Dockerfile"
    seed_file.write_text(seed_dockerfile(stack, files, git, stack.framework[0]))

    def write_catalog(repo: str, verl: str, installer: str = "uv", side: str = "") -> Path:
        cat_dir = root / (("rendered" if installer == "uv" else f"rendered-{installer}") + side)
        cat_dir.mkdir(exist_ok=True)
        path = cat_dir / "catalog.toml"
        path.write_text(
            catalog(world.base, world.push_registry.host, repo, files, git, verl, installer)
        )
        return path

    r = Results(size=size_name, size_knobs=size, runs=runs, load_before=os.getloadavg()[0])
    # Untimed: pulls the bases, and (b) writes its lock.
    say("warm-up builds (untimed)")
    seed_build(world, seed_file, "seed", stack.framework[0], no_cache=False)
    cannery_build(world, write_catalog("rendered", stack.framework[0]), force=False)
    cannery_build(world, write_catalog("rendered-pip", stack.framework[0], "pip"), force=False)
    if base:
        cannery_build(world, write_catalog("rendered-base", stack.framework[0], side="-base"),
                      force=False, src=base)
    for n in range(runs):
        say(f"cold builds, run {n + 1}/{runs}")
        took, seed_digest = seed_build(world, seed_file, f"seed-cold{n}", stack.framework[0],
                                       no_cache=True)
        r.cold_a.runs.append(took)
        took, summary = cannery_build(world, write_catalog(f"rendered-cold{n}",
                                                           stack.framework[0]), force=True)
        r.cold_b.runs.append(took)
        rendered_digest, rendered_repo = pushed_digest(summary), f"bench/rendered-cold{n}"
    say("image sizes")
    r.size_a = image_size(world, world.push_registry.host, f"bench/seed-cold{runs - 1}",
                          seed_digest, auth=True)
    r.size_b = image_size(world, world.push_registry.host, rendered_repo, rendered_digest,
                          auth=True)
    say("floor: writing (b)'s layers")
    local = local_rendered_image()
    for _ in range(runs):
        r.write_layers.runs.append(write_layers(local))
    # Back to the warm repositories, then one bump of the framework pin per run.
    cannery_build(world, write_catalog("rendered", stack.framework[0]), force=False)
    for n in range(runs):
        bump = stack.framework[n + 1]
        say(f"framework bump {n + 1}/{runs}")
        cpu = children_cpu()
        took, _ = seed_build(world, seed_file, "seed", bump, no_cache=False)
        r.bump_a.runs.append(took)
        r.bump_a_cpu.runs.append(children_cpu() - cpu)
        cpu = children_cpu()
        took, summary = cannery_build(world, write_catalog("rendered", bump), force=False)
        assert not summary["images"][0]["platforms"][0]["skipped"], "a bump must rebuild"
        r.bump_b.runs.append(took)
        r.bump_b_cpu.runs.append(children_cpu() - cpu)
        took, summary = cannery_build(world, write_catalog("rendered-pip", bump, "pip"),
                                      force=False)
        assert not summary["images"][0]["platforms"][0]["skipped"], "a bump must rebuild"
        r.bump_b_pip.runs.append(took)
        if base:
            took, summary = cannery_build(
                world, write_catalog("rendered-base", stack.framework[runs + n + 1], side="-base"),
                force=False, src=base)
            assert not summary["images"][0]["platforms"][0]["skipped"], "a bump must rebuild"
            r.bump_b_base.runs.append(took)
    say("no-op builds")
    for _ in range(max(runs, 5)):
        took, summary = cannery_build(world, write_catalog("rendered", stack.framework[runs]),
                                      force=False)
        image = summary["images"][0]
        assert all(p["skipped"] for p in image["platforms"]) and not image["tags_moved"]
        r.noop_b.runs.append(took)
    cores = os.cpu_count() or 1
    say(f"compile alone at 1 job and at {cores}")
    for _ in range(runs):
        r.compile_1.runs.append(compile_alone(size.units, size.funcs, 1))
        r.compile_all.runs.append(compile_alone(size.units, size.funcs, cores))
    r.cores = cores
    r.load_after = os.getloadavg()[0]
    return r


__all__ = ["ImageSize", "main"]

if __name__ == "__main__":
    sys.exit(main())
