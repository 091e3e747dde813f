"""order: the order of pip installs and uninstalls, where it can change the result (a later
install re-resolves what an earlier one pinned; an uninstall removes only what came before it).

Only steps both sides have are compared; a step out of place is named with what precedes it on
each side (item: ``install torch``, ``uninstall triton``)."""

from __future__ import annotations

from cannery.compare.categories.pip import requirements
from cannery.compare.image import ImageView
from cannery.compare.model import MOVED, Difference, common_order

NAME = "order"


def steps(view: ImageView) -> list[str]:
    """Each requirement's first install and each uninstall, in build order; the requirements
    of one command (resolved together) sorted by name."""
    out: list[str] = []
    group: list[str] = []
    last = None
    for r in requirements(view):
        if r.cmd is not last:
            out += sorted(group)
            group, last = [], r.cmd
        step = f"{r.verb} {r.key.removeprefix('uninstall:')}"
        if step not in out and step not in group:
            group.append(step)
    return out + sorted(group)


def compare(original: ImageView, new: ImageView) -> list[Difference]:
    a, b = steps(original), steps(new)
    common = set(a) & set(b)
    xs = [s for s in a if s in common]
    ys = [s for s in b if s in common]
    kept = common_order(xs, ys)
    out = []
    for step in ys:
        if step in kept:
            continue
        before_a = xs[xs.index(step) - 1] if xs.index(step) else "(first)"
        before_b = ys[ys.index(step) - 1] if ys.index(step) else "(first)"
        out.append(Difference(NAME, step, MOVED, f"after {before_a}", f"after {before_b}"))
    return out
