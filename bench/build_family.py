"""A family's nightly: 8 images (2 toolkit versions x 2 chips x 2 framework pins, one base),
seed-style hand-written Dockerfiles against one cannery catalog, same stack, same run.

    .venv/bin/python bench/build_family.py [--size tiny|moderate|large] [--out DIR]

Generates the build benchmark's stand-in stack (bench/buildbench/stack.py) and a second
toolkit version, serves them from the e2e world (TLS registries, HTTPS files and wheel index,
git smart HTTP; all on 127.0.0.1), and times, once each, for linux/amd64 (arm64 runs under qemu
here): (a) 8 seed-style Dockerfiles, each built with `buildah build --layers` and pushed with
`buildah push`, one after another, as a nightly workflow does; (b) `cannery build --push` of
the family's catalog, one process (its images install their components with uv,
`installer = "uv"`, as the build benchmark's (b)). Rows: the cold build of the family (empty
layer cache, empty repository; the lock written beforehand, untimed), the nightly with nothing
changed, and
the nightly after one framework pin (verl-next, used by 4 of the 8 images) moves to a new
commit. For (b) it checks what the summary says: every image skipped in the no-op, exactly the
4 images of verl-next rebuilt after the bump, and, from the build logs, how many steps each
rebuilt image ran rather than took from the layer cache. Bytes, after the cold build: the 8
images' sizes added up against their distinct blobs (what a registry stores, and a push
uploads once), and how much (b)'s registry grew. Prints a Markdown table and writes
OUT/family.md and OUT/family.png. Not a test: nothing here fails on timing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from buildbench.family import add_toolkits, catalog, members, write_seed_family  # noqa: E402
from buildbench.measure import MANIFEST, cache_bytecode, run, timed  # noqa: E402
from buildbench.stack import SIZES, make_stack  # noqa: E402
from lint_vs_hadolint import machine  # noqa: E402

from tests.e2e.buildenv import BuildWorld, cleanup_local_images, make_world  # noqa: E402
from tests.services.tlsca import make_ca  # noqa: E402

MB = 1 << 20


@dataclass
class FamilyResults:
    size: str
    images: int = 0
    cold_a: float = 0.0
    cold_b: float = 0.0
    noop_a: float = 0.0
    noop_b: list[float] = field(default_factory=list)
    bump_a: float = 0.0
    bump_b: float = 0.0
    rebuilt: list[str] = field(default_factory=list)  # (b)'s images rebuilt after the bump
    expected: list[str] = field(default_factory=list)  # the images that use the bumped pin
    steps_run: dict[str, tuple[int, int, bool]] = field(default_factory=dict)  # see steps_run
    noop_skipped: bool = False
    sum_a: int = 0  # the images' sizes added up (config + layers, compressed)
    sum_b: int = 0
    distinct_a: int = 0  # the distinct blobs among them: what a registry stores
    distinct_b: int = 0
    stored_b: int = 0  # (b)'s registry blob store growth during its cold build
    load_before: float = 0.0
    load_after: float = 0.0
    machine: str = ""
    date: str = ""

    @property
    def noop_b_median(self) -> float:
        return sorted(self.noop_b)[len(self.noop_b) // 2]


def blob_bytes(registry_root: Path) -> int:
    """Bytes of every blob a docker-registry stores (its filesystem driver's blob store;
    manifests are stored there too)."""
    blobs = registry_root / "data" / "docker" / "registry" / "v2" / "blobs"
    return sum(p.stat().st_size for p in blobs.rglob("data")) if blobs.is_dir() else 0


def image_blobs(
    world: BuildWorld, host: str, repo: str, tag: str, auth: bool
) -> dict[str, int]:
    """digest → size of one pushed image's config and compressed layers (an index is followed
    to its one platform manifest)."""
    creds = (world.user, world.password) if auth else None
    accept = ", ".join([MANIFEST, "application/vnd.oci.image.index.v1+json",
                        "application/vnd.oci.image.manifest.v1+json"])
    with httpx.Client(verify=str(world.ca.ca_cert), auth=creds, timeout=60) as client:
        body = client.get(f"https://{host}/v2/{repo}/manifests/{tag}",
                          headers={"Accept": accept}).raise_for_status().json()
        if "manifests" in body:
            (child,) = body["manifests"]
            body = client.get(f"https://{host}/v2/{repo}/manifests/{child['digest']}",
                              headers={"Accept": accept}).raise_for_status().json()
    return {str(b["digest"]): int(b["size"]) for b in [body["config"], *body["layers"]]}


def sizes(world: BuildWorld, host: str, auth: bool) -> tuple[int, int]:
    """(the 8 images' sizes added up, their distinct blobs' sizes added up)."""
    per_image = [image_blobs(world, host, "bench/family", m.name, auth) for m in members()]
    distinct: dict[str, int] = {}
    for blobs in per_image:
        distinct.update(blobs)
    return sum(sum(b.values()) for b in per_image), sum(distinct.values())


def seed_nightly(world: BuildWorld, files: dict[str, Path]) -> float:
    """Every seed-style Dockerfile built with the layer cache and pushed, one after another."""
    certs = ["--cert-dir", str(world.cert_dir)]
    start = time.perf_counter()
    for name, dockerfile in files.items():
        run(["buildah", "build", "--quiet", "--platform", "linux/amd64", "--format", "docker",
             "--layers", *certs, "--network", "host", "-f", str(dockerfile),
             "-t", f"localhost/bench-fam-{name}", str(dockerfile.parent)])
        run(["buildah", "push", "--quiet", *certs, f"localhost/bench-fam-{name}",
             f"docker://{world.registry.host}/bench/family:{name}"])
    return time.perf_counter() - start


def steps_run(log: Path, changed: str) -> tuple[int, int, bool]:
    """(steps run, steps in all, whether exactly the steps from the one naming ``changed`` on
    ran) for the build in a cannery platform log, FROM lines not counted: a step buildah took
    from its layer cache is followed by a `--> Using cache` line."""
    from cannery.builder.progress import parse_step

    text = log.read_text(errors="replace")
    text = text[text.rfind("$ buildah build"):]
    steps: list[tuple[str, bool]] = []  # (instruction, taken from the cache)
    for line in text.splitlines():
        step = parse_step(line)
        if step and not step[2].startswith("FROM"):
            steps.append((step[2], False))
        elif line.startswith("--> Using cache") and steps:
            steps[-1] = (steps[-1][0], True)
    first = next((i for i, (text_, _) in enumerate(steps) if changed in text_), len(steps))
    exact = all(cached == (i < first) for i, (_, cached) in enumerate(steps))
    ran = sum(1 for _, cached in steps if not cached)
    return ran, len(steps), exact and first < len(steps)


def cannery(world: BuildWorld, cat: Path, logs: Path) -> tuple[float, dict]:  # type: ignore[type-arg]
    import json

    took, out = timed([sys.executable, "-m", "cannery", "build", "--catalog", str(cat), "--push",
                       "--network", "host", "--json", "--log-dir", str(logs)], world.env())
    return took, json.loads(out)


def measure(world: BuildWorld, root: Path, size_name: str) -> FamilyResults:
    def say(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    size = SIZES[size_name]
    r = FamilyResults(size=size_name, images=len(members()), load_before=os.getloadavg()[0])
    say("generating the stand-in stack")
    stack = make_stack(world, size, root / "stack", bumps=2)
    add_toolkits(world, size)
    pins = {"stable": stack.framework[0], "next": stack.framework[1]}
    bumped = {**pins, "next": stack.framework[2]}
    files, git = world.files.url, world.git.url
    seed = write_seed_family(root / "seed", stack, files, git, pins)
    cat = root / "catalog" / "catalog.toml"
    cat.parent.mkdir()
    logs = root / "catalog" / "logs"
    cat.write_text(catalog(world, "family", pins))
    say("locking the family (untimed)")
    run([sys.executable, "-m", "cannery", "lock", "--catalog", str(cat)], world.env())

    say("(a) cold build of the family")
    r.cold_a = seed_nightly(world, seed)
    r.sum_a, r.distinct_a = sizes(world, world.registry.host, auth=False)
    say("(b) cold build of the family")
    before = blob_bytes(world.push_registry.root)
    r.cold_b, summary = cannery(world, cat, logs)
    r.stored_b = blob_bytes(world.push_registry.root) - before
    r.sum_b, r.distinct_b = sizes(world, world.push_registry.host, auth=True)

    say("no-op nightlies")
    r.noop_a = seed_nightly(world, seed)
    skipped = True
    for _ in range(3):
        took, summary = cannery(world, cat, logs)
        r.noop_b.append(took)
        skipped &= all(p["skipped"] and not i["tags_moved"]
                       for i in summary["images"] for p in i["platforms"])
    r.noop_skipped = skipped

    say("bump verl-next: (a)")
    seed = write_seed_family(root / "seed", stack, files, git, bumped)
    r.bump_a = seed_nightly(world, seed)
    say("bump verl-next: (b)")
    cat.write_text(catalog(world, "family", bumped))
    r.bump_b, summary = cannery(world, cat, logs)
    r.expected = sorted(m.name for m in members() if m.pin == "next")
    for image in summary["images"]:
        (platform,) = image["platforms"]
        if not platform["skipped"]:
            r.rebuilt.append(image["image"])
            r.steps_run[image["image"]] = steps_run(Path(platform["log"]), stack.framework[2])
    r.rebuilt.sort()
    r.load_after = os.getloadavg()[0]
    return r


def render_markdown(r: FamilyResults) -> str:
    def ratio(b: float, a: float) -> str:
        return f"{b / a:.2f}" if a else "–"

    ran = sorted({(a, t) for a, t, _ in r.steps_run.values()})
    steps = ", ".join(f"{a} of {t}" for a, t in ran) or "–"
    from_changed = bool(r.steps_run) and all(ok for _, _, ok in r.steps_run.values())
    exact = "yes" if r.rebuilt == r.expected else f"no ({', '.join(r.rebuilt) or 'none'})"
    lines = [
        f"machine: {r.machine}",
        f"date: {r.date}",
        f"size: {r.size} (bench/buildbench/stack.py), {r.images} images "
        "(2 toolkit versions x 2 chips x 2 framework pins, one base), linux/amd64 only, one "
        f"run each; load average {r.load_before:.1f} before, {r.load_after:.1f} after",
        "",
        "| seconds, whole family | (a) seed-style, 8 Dockerfiles | (b) cannery, one catalog "
        "| (b) / (a) |",
        "|---|---|---|---|",
        f"| cold build, pushed (empty layer cache and repository) | {r.cold_a:.1f} | "
        f"{r.cold_b:.1f} | {ratio(r.cold_b, r.cold_a)} |",
        f"| nightly, nothing changed | {r.noop_a:.1f} | {r.noop_b_median:.1f} | "
        f"{ratio(r.noop_b_median, r.noop_a)} |",
        f"| nightly after bumping verl-next (4 of 8 images use it) | {r.bump_a:.1f} | "
        f"{r.bump_b:.1f} | {ratio(r.bump_b, r.bump_a)} |",
        "",
        "| after the cold build | (a) seed-style | (b) cannery | (b) / (a) |",
        "|---|---|---|---|",
        f"| sum of the 8 images' sizes, MB (config + compressed layers) | {r.sum_a / MB:.1f} | "
        f"{r.sum_b / MB:.1f} | {ratio(r.sum_b, r.sum_a)} |",
        f"| distinct blobs among them, MB (what a registry stores) | {r.distinct_a / MB:.1f} | "
        f"{r.distinct_b / MB:.1f} | {ratio(r.distinct_b, r.distinct_a)} |",
        f"| distinct / sum | {ratio(r.distinct_a, r.sum_a)} | "
        f"{ratio(r.distinct_b, r.sum_b)} | |",
        f"| (b)'s registry blob store grew by (all cannery uploaded, manifests and indexes "
        f"included), MB | | {r.stored_b / MB:.1f} | |",
        "",
        "| (b) checks | measured | goal | met |",
        "|---|---|---|---|",
        f"| no-op nightly, seconds (median of {len(r.noop_b)}; every image skipped: "
        f"{'yes' if r.noop_skipped else 'NO'}) | {r.noop_b_median:.2f} | < 5 | "
        f"{'yes' if r.noop_b_median < 5 and r.noop_skipped else 'no'} |",
        f"| bump / cold build | {r.bump_b / r.cold_b:.3f} | ≤ 0.15 | "
        f"{'yes' if r.bump_b <= 0.15 * r.cold_b else 'no'} |",
        f"| bump, (b) / (a) | {ratio(r.bump_b, r.bump_a)} | ≤ 1 | "
        f"{'yes' if r.bump_b <= r.bump_a else 'no'} |",
        f"| images rebuilt = the 4 that use verl-next | {len(r.rebuilt)} | 4 | {exact} |",
        f"| steps run per rebuilt image (the rest from the layer cache) | {steps} | "
        f"the bumped step and those after it | {'yes' if from_changed else 'no'} |",
    ]
    return "\n".join(lines) + "\n"


def render_chart(r: FamilyResults, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2),
                                      gridspec_kw={"width_ratios": [3, 1.4]})
    groups = ["cold build", "nightly,\nnothing changed", "nightly after\na pin bump"]
    a = [r.cold_a, r.noop_a, r.bump_a]
    b = [r.cold_b, r.noop_b_median, r.bump_b]
    xs = range(len(groups))
    left.bar([x - 0.2 for x in xs], a, 0.4, label="(a) seed-style, 8 Dockerfiles",
             color="#c0504d")
    left.bar([x + 0.2 for x in xs], b, 0.4, label="(b) cannery, one catalog", color="#4f81bd")
    for x, va, vb in zip(xs, a, b, strict=True):
        left.text(x - 0.2, va, f"{va:.1f}", ha="center", va="bottom", fontsize=8)
        left.text(x + 0.2, vb, f"{vb:.1f}", ha="center", va="bottom", fontsize=8)
    left.set_xticks(list(xs), groups)
    left.set_ylabel("seconds, whole family")
    left.set_title(f"{r.images} images, linux/amd64")
    left.legend()
    labels = ["(a) sum", "(a) distinct", "(b) sum", "(b) pushed"]
    mbs = [r.sum_a / MB, r.distinct_a / MB, r.sum_b / MB, r.stored_b / MB]
    right.bar(labels, mbs, color=["#e6b8b7", "#c0504d", "#b8cce4", "#4f81bd"])
    for x, v in enumerate(mbs):
        right.text(x, v, f"{v:.0f}", ha="center", va="bottom", fontsize=8)
    right.set_ylabel("MB")
    right.set_title("8 images' sizes added up vs stored")
    fig.suptitle(f"a family's nightly: seed-style vs cannery ({r.size} size, {r.date})",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="moderate")
    ap.add_argument("--out", type=Path, default=None,
                    help="where the table and chart go (default: a fresh directory under /tmp; "
                    "the README's copies in bench/results change only when asked)")
    args = ap.parse_args(argv)
    os.environ.setdefault("BUILDAH_ISOLATION", "chroot")
    with tempfile.TemporaryDirectory(prefix="cannery-family-") as tmp:
        root = Path(tmp)
        cache_bytecode()
        world = make_world(root / "world", make_ca(root / "ca"))
        try:
            results = measure(world, root, args.size)
        finally:
            world.stop()
            cleanup_local_images()
    results.machine = machine()
    results.date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    table = render_markdown(results)
    print(table)
    args.out = args.out or Path(tempfile.mkdtemp(prefix="cannery-bench-"))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "family.md").write_text(table)
    render_chart(results, args.out / "family.png")
    print(f"\nwrote {args.out / 'family.md'} and {args.out / 'family.png'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
