"""Compare two Dockerfiles' final images, category by category, for each architecture."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from cannery.compare.categories import (
    base,
    copies,
    downloads,
    env,
    git,
    labels,
    order,
    packages,
    pip,
    runs,
    settings,
)
from cannery.compare.image import ARCHES, ImageView
from cannery.compare.model import Difference
from cannery.lint.facts.dockerfile import DockerfileFacts

# The registry: every category compared, in the order output lists them.
CATEGORIES: tuple[ModuleType, ...] = (base, packages, pip, downloads, git, copies, env, settings,
                                      labels, order, runs)


def category_names() -> list[str]:
    return [c.NAME for c in CATEGORIES]


def compare_facts(original: DockerfileFacts, new: DockerfileFacts,
                  arches: tuple[str, ...] = ARCHES,
                  categories: tuple[ModuleType, ...] = CATEGORIES) -> list[Difference]:
    """Every difference, once: one found for some architectures only lists them."""
    found: dict[tuple[object, ...], Difference] = {}
    for arch in arches:
        a, b = ImageView(original.path, original, arch), ImageView(new.path, new, arch)
        for category in categories:
            run: Callable[[ImageView, ImageView], list[Difference]] = category.compare
            for d in run(a, b):
                got = found.setdefault(d.key(), d)
                if arch not in got.arches:
                    got.arches.append(arch)
    out = list(found.values())
    for d in out:
        if sorted(d.arches) == sorted(arches):
            d.arches = []
    rank = {c.NAME: i for i, c in enumerate(categories)}
    out.sort(key=lambda d: rank.get(d.category, len(rank)))
    return out
