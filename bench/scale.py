"""What a family's size costs: catalog load, plan and render of every file, for 8 to 1,024
images, side by side in one run.

    .venv/bin/python bench/scale.py [--sizes 8 64 512 1024] [--registry-sizes 8 64 512]
        [--repeat 3] [--out FILE] [--chart FILE]

Each catalog is one image on a base that ships its CANN, and N−1 ``extends`` children that
differ only in their recipe (the shape of a family's variants), with a complete lock (made
here: no network). Times are in-process medians of ``--repeat`` runs: load (parse and
validate), plan (every image), and render (the Dockerfiles, the workflow, the bake file and
the docs, each planned as `cannery render` plans them). The table gives each phase's seconds,
the cost per image, the workflow's size and jobs, and render's ratio to the smallest size.

Then, for each of ``--registry-sizes`` (none: skipped), against two real local registries
(Debian's docker-registry on 127.0.0.1, a primary and a mirror): every image x 2 platforms
pushed first as a build would have pushed it (tiny synthetic layers; the inputs labels,
index, tags and per-platform tags written by cannery's own plan_build and publish code) and
one untimed nightly (which attaches the provenance a build attaches), then, alternated, each a
fresh process: the no-op nightly (`cannery build --locked --push` over every
image) and `cannery status` over both registries. The bench exits 1 if the nightly built or
moved anything or status found an entry not fresh. Not a test: nothing here fails on timing.
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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from lint_vs_hadolint import machine  # noqa: E402

from cannery.builder.jobs import INPUTS_LABEL, ImageJob, plan_build  # noqa: E402
from cannery.builder.registries import protect_platform, publish_everywhere  # noqa: E402
from cannery.catalog.models import Catalog  # noqa: E402
from cannery.commands.render import KINDS, Context, render_kind  # noqa: E402
from cannery.lock import BaseEntry, Lock  # noqa: E402
from cannery.lock.file import dump_lock  # noqa: E402
from cannery.oci import Descriptor, OCIClient, Reference, push_image_dir  # noqa: E402
from cannery.oci.publish import LOCK_EPOCH  # noqa: E402
from cannery.plan import plan  # noqa: E402
from cannery.render.checks import load_checked  # noqa: E402
from cannery.render.dockerfile import render_dockerfile  # noqa: E402
from cannery.tls import ssl_context  # noqa: E402
from tests.catalogs import ci_entries, tiny  # noqa: E402
from tests.services.registry import LocalRegistry, labelled_layout  # noqa: E402

BASE = "quay.io/ascend/cann:9.1.0-910b-ubuntu22.04-py3.11"


def catalog_text(n: int) -> str:
    text = tiny("scale", "quay.io/ascend/scale", BASE, "9.1.0-{chip}-{recipe}")
    text = text.replace('tag = "9.1.0-{chip}-{recipe}"', 'tag = "9.1.0-{chip}-{recipe}"\n'
                        'recipe = "r0"')
    children = "".join(f'\n[images.v{i}]\nextends = "one"\nrecipe = "r{i}"\n'
                       for i in range(1, n))
    return text + children


def scale_lock(cat: Catalog) -> Lock:
    """A complete lock for ``catalog_text``'s catalogs (made here: no network)."""
    return Lock(bases={BASE: BaseEntry(digest="sha256:" + "1" * 64,
                                       resolved_at="2026-12-01T00:00:00Z",
                                       os_id="ubuntu", os_version="22.04")},
                ci=ci_entries(cat))  # type: ignore[arg-type]


def median_time(work: Callable[[], object], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def measure(n: int, root: Path, repeat: int) -> dict[str, float]:
    where = root / f"n{n}"
    where.mkdir()
    path = where / "cannery.toml"
    path.write_text(catalog_text(n))
    loaded = load_checked(path)
    cat = loaded.catalog
    lock = scale_lock(cat)
    ctx = Context(loaded, lock, where, path.name)
    out: dict[str, float] = {"images": n}
    out["load"] = median_time(lambda: load_checked(path), repeat)
    out["plan"] = median_time(lambda: plan(cat, lock), repeat)
    files: dict[Path, str] = {}

    def render() -> None:
        files.clear()
        for kind in KINDS:
            files.update(render_kind(kind, ctx, None))

    out["render"] = median_time(render, repeat)
    # What a user waits for: `cannery render` in a fresh process (start-up, load, plan, lock
    # read) writing every file.
    (where / "cannery.lock").write_text(dump_lock(lock))
    out["command"] = median_time(lambda: render_command(path), repeat)
    workflow = files[where / cat.ci.workflow]
    out["workflow_kb"] = len(workflow.encode()) / 1000
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    out["jobs"] = len(yaml.load(workflow, Loader=loader)["jobs"])
    out["files"] = len(files)
    return out


def render_command(catalog: Path) -> None:
    """``cannery render`` of ``catalog`` as a user runs it: a fresh process, every file
    written beside the catalog."""
    subprocess.run([sys.executable, "-m", "cannery", "render", "--catalog", str(catalog)],
                   cwd=catalog.parent, check=True, capture_output=True,
                   stdin=subprocess.DEVNULL)


def table(rows: list[dict[str, float]]) -> str:
    first = rows[0]
    of = f"{first['images']:.0f}"
    lines = [
        "| images | load s | plan s | render s | ms per image (load+plan+render) | render ÷ "
        f"render of {of} | `cannery render` s | ÷ `cannery render` of {of} | workflow | "
        "jobs in it | files |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        total = r["load"] + r["plan"] + r["render"]
        over = "over GitHub's 500 KB" if r["workflow_kb"] > 500 else "under 500 KB"
        lines.append(
            f"| {r['images']:.0f} | {r['load']:.3f} | {r['plan']:.3f} | {r['render']:.3f} | "
            f"{1000 * total / r['images']:.1f} | {r['render'] / first['render']:.1f}× | "
            f"{r['command']:.2f} | {r['command'] / first['command']:.2f}× | "
            f"{r['workflow_kb']:.0f} KB ({over}) | {r['jobs']:.0f} | {r['files']:.0f} |")
    return "\n".join(lines) + "\n"


def chart(rows: list[dict[str, float]], reg: list[dict[str, float]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3 if reg else 2, figsize=(15 if reg else 10, 4))
    left, right = axes[0], axes[1]
    xs = [r["images"] for r in rows]
    for key, colour in (("load", "#9bbb59"), ("plan", "#4f81bd"), ("render", "#c0504d")):
        left.plot(xs, [r[key] for r in rows], marker="o", label=key, color=colour)
    _log_axes(left, "seconds (median)", "time per phase")
    right.plot(xs, [r["workflow_kb"] for r in rows], marker="o", color="#8064a2")
    right.axhline(500, color="grey", linestyle="--", label="GitHub's 500 KB limit")
    _log_axes(right, "KB", "the rendered workflow")
    if reg:
        third = axes[2]
        rx = [r["images"] for r in reg]
        third.plot(rx, [r["nightly"] for r in reg], marker="o", label="no-op nightly",
                   color="#f79646")
        third.plot(rx, [r["status"] for r in reg], marker="o", label="status, 2 registries",
                   color="#4bacc6")
        third.axhline(30, color="grey", linestyle="--", label="goal at 512: 30 s")
        _log_axes(third, "seconds (median)", "against a registry")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def _log_axes(ax: Any, ylabel: str, title: str) -> None:
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("images in the catalog")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()


# -- The registry rows: a no-op nightly and `cannery status` over a family already pushed --


def registry_catalog(n: int, primary: str, mirror: str) -> str:
    """``catalog_text(n)`` published to ``primary`` and mirrored to ``mirror`` (hosts)."""
    text = catalog_text(n).replace('repository = "quay.io/ascend/scale"',
                                   f'repository = "{primary}/scale/images"')
    text = text.replace('registry = "local"\n', 'registry = "local"\nmirrors = ["mirror"]\n', 1)
    return text + f'\n[registries.mirror]\nrepository = "{mirror}/scale/images"\n'


def _publish(client: OCIClient, job: ImageJob, work: Path) -> None:
    """What a build's legs and merge write for ``job``: each platform by digest, labelled with
    the inputs cannery computed, then the index, tag and alias in every registry."""
    repo = Reference.parse(job.repository)
    children = []
    for pj in job.platforms:
        labels = {INPUTS_LABEL: pj.input_digest}
        if job.spec.base_digest:
            labels["org.opencontainers.image.base.digest"] = job.spec.base_digest
        arch = pj.platform.split("/")[1]
        desc = push_image_dir(client, repo, labelled_layout(work, arch, job.name, labels))
        protect_platform(client, repo, job, pj, desc)
        children.append(Descriptor(desc.media_type, desc.digest, desc.size, pj.os_arch,
                                   {INPUTS_LABEL: pj.input_digest}))
    results = publish_everywhere(client, job, children,
                                 annotations={LOCK_EPOCH: str(job.lock_epoch)},
                                 lock_epoch=job.lock_epoch)
    if any(r.error for r in results):
        raise SystemExit(f"{job.name}: publish failed: {[r.error for r in results]}")


def publish_family(n: int, where: Path, primary: str, mirror: str) -> tuple[Path, Path]:
    """The ``n``-image catalog and its lock under ``where``, every image x 2 platforms pushed
    to both registries as a build would have pushed it (8 side by side: setup, not timed)."""
    where.mkdir(parents=True)
    path = where / "cannery.toml"
    path.write_text(registry_catalog(n, primary, mirror))
    cat = load_checked(path).catalog
    lock = scale_lock(cat)
    (where / "cannery.lock").write_text(dump_lock(lock))
    jobs = [plan_build(spec, render_dockerfile(spec), lock) for spec in plan(cat, lock)]
    with OCIClient(ssl_context(), retry_budget=20, backoff=0.01) as client, \
            ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda job: _publish(client, job, where / "legs"), jobs))
    return path, where / "cannery.lock"


def run_cannery(*argv: str) -> tuple[float, dict]:  # type: ignore[type-arg]
    """``cannery ARGV --json`` as a user runs it (a fresh process): seconds and its JSON."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "cannery", *argv, "--json"],
                          capture_output=True, text=True, check=False,
                          stdin=subprocess.DEVNULL)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"cannery {argv[0]} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return took, json.loads(proc.stdout)


def measure_registry(n: int, root: Path, primary: str, mirror: str,
                     repeat: int) -> dict[str, float]:
    """The no-op nightly (`cannery build --locked --push` over every image, everything
    already pushed) and `cannery status` over both registries: medians of ``repeat`` runs,
    alternated, each checked (every platform skipped and no tag moved; every entry fresh)."""
    catalog, lock = publish_family(n, root / f"reg{n}", primary, mirror)
    common = ("--catalog", str(catalog), "--lock", str(lock))
    # Untimed: a first nightly attaches each platform's provenance (the default --attest),
    # which a build attaches and publish_family does not; the timed runs then find it there.
    run_cannery("build", *common, "--locked", "--push", "--log-dir", str(root / f"logs{n}"))
    nightly, status = [], []
    for _ in range(repeat):
        took, doc = run_cannery("build", *common, "--locked", "--push",
                                "--log-dir", str(root / f"logs{n}"))
        images = doc["images"]
        if len(images) != n or not all(
                p["skipped"] for i in images for p in i["platforms"]) or any(
                i["tags_moved"] for i in images):
            raise SystemExit(f"the no-op nightly of {n} images built or moved something")
        nightly.append(took)
        took, doc = run_cannery("status", *common)
        states = [e["state"] for i in doc["images"] for e in i["entries"]]
        if len(states) != 4 * n or set(states) != {"fresh"}:
            raise SystemExit(f"status of {n} images: not all fresh: {sorted(set(states))}")
        status.append(took)
    return {"images": n, "nightly": statistics.median(nightly),
            "status": statistics.median(status), "entries": 4 * n}


def registry_rows(sizes: list[int], root: Path, repeat: int) -> list[dict[str, float]]:
    """:func:`measure_registry` for each size, against two real local registries."""
    if not sizes:
        return []
    primary = LocalRegistry(_mkdir(root / "primary"))
    mirror = LocalRegistry(_mkdir(root / "mirror"))
    try:
        return [measure_registry(n, root, primary.host, mirror.host, repeat)
                for n in sorted(sizes)]
    finally:
        primary.stop()
        mirror.stop()


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def registry_table(rows: list[dict[str, float]]) -> str:
    lines = [
        "| images | platforms | no-op nightly s | ms per image | status s (2 registries) | "
        "ms per image | entries read |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        n = r["images"]
        lines.append(
            f"| {n:.0f} | {2 * n:.0f} | {r['nightly']:.2f} | {1000 * r['nightly'] / n:.1f} | "
            f"{r['status']:.2f} | {1000 * r['status'] / n:.1f} | {r['entries']:.0f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[8, 64, 512, 1024])
    ap.add_argument("--registry-sizes", type=int, nargs="*", default=[8, 64, 512],
                    help="sizes of the no-op nightly and status rows (none: skip them)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, help="also write the report (Markdown) here")
    ap.add_argument("--chart", type=Path, help="write the chart (PNG) here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="cannery-scale-") as tmp:
        rows = [measure(n, Path(tmp), args.repeat) for n in sorted(args.sizes)]
        load = _load()
        reg = registry_rows(args.registry_sizes, Path(tmp), args.repeat)
        load = f"{load} before, {_load()} after"
    report = (f"Machine: {machine()}; medians of {args.repeat} runs; load average (1 min) "
              f"{load}.\n\nLoad, plan and render, in one process:\n\n" + table(rows))
    if reg:
        report += ("\nA no-op nightly (`cannery build --locked --push` over every image, each "
                   "of its 2 platforms already pushed with the same inputs) and `cannery "
                   "status` (a primary and a mirror), each a fresh process against two local "
                   "registries:\n\n" + registry_table(reg))
    print(report)
    if args.out:
        args.out.write_text(report)
    if args.chart:
        chart(rows, reg, args.chart)
    return 0


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


if __name__ == "__main__":
    raise SystemExit(main())
