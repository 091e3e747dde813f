"""The benchmark's results as a Markdown table (with the goals and a projection to more
cores) and as a bar chart."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from .measure import ImageSize, Series
from .stack import Size

MB = 1 << 20


@dataclass
class Results:
    size: str
    size_knobs: Size
    runs: int
    cold_a: Series = field(default_factory=Series)
    cold_b: Series = field(default_factory=Series)
    bump_a: Series = field(default_factory=Series)
    bump_b: Series = field(default_factory=Series)
    bump_b_pip: Series = field(default_factory=Series)  # (b) with installer = "pip"
    bump_a_cpu: Series = field(default_factory=Series)  # CPU s (user + system) of bump_a
    bump_b_cpu: Series = field(default_factory=Series)
    bump_b_base: Series = field(default_factory=Series)  # (b) with cannery at ``base``
    base: str | None = None  # the git revision of bump_b_base (--base)
    noop_b: Series = field(default_factory=Series)
    compile_1: Series = field(default_factory=Series)
    compile_all: Series = field(default_factory=Series)
    write_layers: Series = field(default_factory=Series)
    size_a: ImageSize | None = None
    size_b: ImageSize | None = None
    cores: int = 1
    load_before: float = 0.0  # 1-minute load average: the machine is shared
    load_after: float = 0.0
    machine: str = ""
    date: str = ""

    @property
    def floor(self) -> float:
        return self.compile_all.median + self.write_layers.median


def _row(name: str, a: Series | None, b: Series | None) -> str:
    def cell(s: Series | None) -> str:
        if not (s and s.runs):
            return "–"
        digits = 2 if s.median < 10 else 1  # a bump's tenths are its margin
        return f"{s.median:.{digits}f} ± {s.spread / 2:.{digits}f}"

    ratio = f"{b.median / a.median:.2f}" if a and b and a.runs and b.runs else "–"
    return f"| {name} | {cell(a)} | {cell(b)} | {ratio} |"


def projected_compile(r: Results, cores: int) -> float:
    """The compile at ``cores`` jobs, from the 1-job time: the units compile in
    ceil(units / cores) rounds of equal units (they are generated alike)."""
    units = r.size_knobs.units
    return r.compile_1.median * math.ceil(units / cores) / units


def project_cold_ratio(r: Results, cores: int) -> float:
    """(b) / (a) cold on a machine with ``cores``: (a)'s compile stays at 1 job (its throttle),
    (b)'s shrinks as ``projected_compile``; everything else (download, install, layer writes,
    push) is taken as not scaling with cores, which favours (a)."""
    b = r.cold_b.median - r.compile_all.median + projected_compile(r, cores)
    return b / r.cold_a.median


def goals(r: Results) -> list[tuple[str, float, float, bool]]:
    assert r.size_a and r.size_b
    out = [
        ("compile step (b) / (a)", r.compile_all.median / r.compile_1.median, 0.6),
        ("cold build (b) / (a)", r.cold_b.median / r.cold_a.median, 0.75),
        ("framework bump (b) / cold (b)", r.bump_b.median / r.cold_b.median, 0.15),
        ("image (b) / (a), compressed", r.size_b.compressed / r.size_a.compressed, 0.9),
        ("no-op (b) / cold (b)", r.noop_b.median / r.cold_b.median, 0.02),
    ]
    out.append(("framework bump (b) / (a)", r.bump_b.median / r.bump_a.median, 1.0))  # issue 16
    met = [(name, v, goal, v <= goal) for name, v, goal in out]
    met.append(("no-op (b), seconds", r.noop_b.median, 5.0, r.noop_b.median < 5.0))
    pip = r.bump_b_pip.median / r.bump_a.median
    met.append(('framework bump, (b) with installer = "pip" / (a)', pip, 1.0, pip <= 1.0))
    return met


def render_markdown(r: Results) -> str:
    assert r.size_a and r.size_b
    k = r.size_knobs
    lines = [
        f"machine: {r.machine}",
        f"date: {r.date}",
        f"size: {r.size} (toolkit {k.toolkit_mb} MB incompressible; extension {k.units} "
        f"translation units x {k.funcs} kernels; history {k.commits} commits x {k.blob_kb} KiB; "
        f"torch wheel {k.torch_mb} MB), linux/amd64 only, {r.runs} runs each "
        f"(median ± half the spread); load average {r.load_before:.1f} before, "
        f"{r.load_after:.1f} after",
        "",
        "| seconds | (a) seed-style | (b) cannery | (b) / (a) |",
        "|---|---|---|---|",
        _row("cold build, pushed (no layer cache)", r.cold_a, r.cold_b),
        _row("rebuild after a framework bump, pushed", r.bump_a, r.bump_b),
        _row('same bump, (b) with installer = "pip" (pip installs the git components)',
             r.bump_a, r.bump_b_pip),
        *([_row("the same bumps' CPU time (user + system, every process but the servers)",
                r.bump_a_cpu, r.bump_b_cpu)] if r.bump_b_cpu.runs else []),
        *([_row(f"same bump, (b) with cannery at {r.base} (before)", r.bump_a, r.bump_b_base)]
          if r.bump_b_base.runs else []),
        _row("no-op build (inputs unchanged)", None, r.noop_b),
        _row(f"compile step alone (1 job vs {r.cores})", r.compile_1, r.compile_all),
        f"| floor: compile at {r.cores} jobs + writing (b)'s layers | | "
        f"{r.floor:.1f} | |",
        "",
        "| image, as pushed | (a) seed-style | (b) cannery | (b) / (a) |",
        "|---|---|---|---|",
        f"| compressed MB | {r.size_a.compressed / MB:.1f} | {r.size_b.compressed / MB:.1f} | "
        f"{r.size_b.compressed / r.size_a.compressed:.2f} |",
        f"| uncompressed MB | {r.size_a.uncompressed / MB:.1f} | "
        f"{r.size_b.uncompressed / MB:.1f} | "
        f"{r.size_b.uncompressed / r.size_a.uncompressed:.2f} |",
        f"| layers | {r.size_a.layers} | {r.size_b.layers} | |",
        "",
        "| goal (issues 8 and 16) | measured | goal | met |",
        "|---|---|---|---|",
    ]
    for name, value, goal, met in goals(r):
        lines.append(f"| {name} | {value:.3f} | ≤ {goal} | {'yes' if met else 'no'} |")
    lines += [
        "",
        "cold (b) / (a) projected to more cores ((b)'s compile taken as the 1-job compile "
        "over ceil(units / cores) rounds, the rest held): "
        + ", ".join(f"{c} cores {project_cold_ratio(r, c):.2f}" for c in (8, 32, 64)),
    ]
    if r.bump_b_base.runs:
        lines += ["", f"framework bump, (b) this tree / (b) at {r.base}, same run: "
                  f"{r.bump_b.median / r.bump_b_base.median:.2f}"]
    return "\n".join(lines) + "\n"


def render_chart(r: Results, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    assert r.size_a and r.size_b
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.4),
                                      gridspec_kw={"width_ratios": [3, 1.2]})
    groups = ["cold build", "framework bump", "bump,\n(b) with pip", "compile step", "no-op"]
    a = [r.cold_a.median, r.bump_a.median, r.bump_a.median, r.compile_1.median, 0.0]
    b = [r.cold_b.median, r.bump_b.median, r.bump_b_pip.median, r.compile_all.median,
         r.noop_b.median]
    xs = range(len(groups))
    left.bar([x - 0.2 for x in xs], a, 0.4, label="(a) seed-style", color="#c0504d")
    left.bar([x + 0.2 for x in xs], b, 0.4, label="(b) cannery", color="#4f81bd")
    left.axhline(r.floor, color="grey", linestyle="--", linewidth=1)
    left.text(len(groups) - 0.6, r.floor, "floor", va="bottom", ha="right", color="grey")
    for x, v in zip(xs, b, strict=True):
        left.text(x + 0.2, v, f"{v:.1f}", ha="center", va="bottom", fontsize=8)
    for x, v in zip(xs, a, strict=True):
        if v:
            left.text(x - 0.2, v, f"{v:.1f}", ha="center", va="bottom", fontsize=8)
    left.set_xticks(list(xs), groups)
    left.set_ylabel("seconds (median)")
    left.set_title(f"Build time, linux/amd64, {r.cores} cores")
    left.legend()
    sizes = [r.size_a.compressed / MB, r.size_b.compressed / MB]
    right.bar(["(a) seed-style", "(b) cannery"], sizes, color=["#c0504d", "#4f81bd"])
    for x, v in enumerate(sizes):
        right.text(x, v, f"{v:.0f}", ha="center", va="bottom", fontsize=8)
    right.set_ylabel("MB, compressed as pushed")
    right.set_title("Image size")
    fig.suptitle(f"seed-style Dockerfile vs cannery ({r.size} size, {r.date})", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
