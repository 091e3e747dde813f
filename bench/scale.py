"""What a family's size costs: catalog load, plan and render of every file, for 8 to 1,024
images, side by side in one run.

    .venv/bin/python bench/scale.py [--sizes 8 64 512 1024] [--repeat 3] [--out FILE]
        [--chart FILE]

Each catalog is one image on a base that ships its CANN, and N−1 ``extends`` children that
differ only in their recipe (the shape of a family's variants), with a complete lock (made
here: no network). Times are in-process medians of ``--repeat`` runs: load (parse and
validate), plan (every image), and render (the Dockerfiles, the workflow, the bake file and
the docs, each planned as `cannery render` plans them). The table gives each phase's seconds,
the cost per image, the workflow's size and jobs, and render's ratio to the smallest size.
Not a test: nothing here fails on timing. The no-op nightly and `cannery status` columns of
issue #29 are not measured yet (see the README).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from lint_vs_hadolint import machine  # noqa: E402

from cannery.commands.render import KINDS, Context, render_kind  # noqa: E402
from cannery.lock import BaseEntry, Lock  # noqa: E402
from cannery.plan import plan  # noqa: E402
from cannery.render.checks import load_checked  # noqa: E402
from tests.catalogs import ci_entries, tiny  # noqa: E402

BASE = "quay.io/ascend/cann:9.1.0-910b-ubuntu22.04-py3.11"


def catalog_text(n: int) -> str:
    text = tiny("scale", "quay.io/ascend/scale", BASE, "9.1.0-{chip}-{recipe}")
    text = text.replace('tag = "9.1.0-{chip}-{recipe}"', 'tag = "9.1.0-{chip}-{recipe}"\n'
                        'recipe = "r0"')
    children = "".join(f'\n[images.v{i}]\nextends = "one"\nrecipe = "r{i}"\n'
                       for i in range(1, n))
    return text + children


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
    lock = Lock(bases={BASE: BaseEntry(digest="sha256:" + "1" * 64,
                                       resolved_at="2026-12-01T00:00:00Z",
                                       os_id="ubuntu", os_version="22.04")},
                ci=ci_entries(cat))  # type: ignore[arg-type]
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
    workflow = files[where / cat.ci.workflow]
    out["workflow_kb"] = len(workflow.encode()) / 1000
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    out["jobs"] = len(yaml.load(workflow, Loader=loader)["jobs"])
    out["files"] = len(files)
    return out


def table(rows: list[dict[str, float]]) -> str:
    first = rows[0]
    lines = [
        "| images | load s | plan s | render s | ms per image (load+plan+render) | render ÷ "
        f"render of {first['images']:.0f} | workflow | jobs in it | files |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        total = r["load"] + r["plan"] + r["render"]
        over = "over GitHub's 500 KB" if r["workflow_kb"] > 500 else "under 500 KB"
        lines.append(
            f"| {r['images']:.0f} | {r['load']:.3f} | {r['plan']:.3f} | {r['render']:.3f} | "
            f"{1000 * total / r['images']:.1f} | {r['render'] / first['render']:.1f}× | "
            f"{r['workflow_kb']:.0f} KB ({over}) | {r['jobs']:.0f} | {r['files']:.0f} |")
    return "\n".join(lines) + "\n"


def chart(rows: list[dict[str, float]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    xs = [r["images"] for r in rows]
    for key, colour in (("load", "#9bbb59"), ("plan", "#4f81bd"), ("render", "#c0504d")):
        left.plot(xs, [r[key] for r in rows], marker="o", label=key, color=colour)
    left.set_xscale("log", base=2)
    left.set_yscale("log")
    left.set_xlabel("images in the catalog")
    left.set_ylabel("seconds (median)")
    left.legend()
    left.set_title("time per phase")
    right.plot(xs, [r["workflow_kb"] for r in rows], marker="o", color="#8064a2")
    right.axhline(500, color="grey", linestyle="--", label="GitHub's 500 KB limit")
    right.set_xscale("log", base=2)
    right.set_yscale("log")
    right.set_xlabel("images in the catalog")
    right.set_ylabel("KB")
    right.set_title("the rendered workflow")
    right.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[8, 64, 512, 1024])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, help="also write the report (Markdown) here")
    ap.add_argument("--chart", type=Path, help="write the chart (PNG) here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="cannery-scale-") as tmp:
        rows = [measure(n, Path(tmp), args.repeat) for n in sorted(args.sizes)]
    report = (f"Machine: {machine()}; medians of {args.repeat} runs, in one process.\n\n"
              + table(rows))
    print(report)
    if args.out:
        args.out.write_text(report)
    if args.chart:
        chart(rows, args.chart)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
