"""The catalog's shape, as the workflow sees it: groups of images that need the same secrets,
and the legs a run builds, in chunks GitHub accepts as a matrix.

The rendered workflow has one build and one merge call job per group, and `cannery ci plan`
fills each group's legs at run time: both read the groups from here, so they agree as long as
`cannery render --check` passes (it runs first)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cannery.catalog.models import Catalog
from cannery.plan import ImageSpec
from cannery.render.workflow.common import arch, registry_names, registry_secrets

# GitHub refuses a matrix of more than 256 jobs.
CHUNK = 256


@dataclass(frozen=True, order=True)
class Group:
    """Images whose legs share a call job: built in the same wave (an image built FROM
    another of the catalog after it), published to the same registries, needing the same
    build secrets."""

    wave: int
    registries: tuple[str, ...]  # catalog registry names, the one built into first
    secrets: tuple[str, ...]  # build secrets (url_secret), sorted

    def build_secrets(self, cat: Catalog) -> list[str]:
        """What the build call job passes: the first registry's login and the build
        secrets (a leg pushes to that registry only)."""
        return [*registry_secrets(cat, self.registries[:1]), *self.secrets]

    def merge_secrets(self, cat: Catalog) -> list[str]:
        """What the merge call job passes: every registry's login (mirrors are copied)."""
        return registry_secrets(cat, self.registries)

    def describe(self) -> str:
        words = [f"wave {self.wave}", "registries " + ", ".join(self.registries)]
        if self.secrets:
            words.append("build secrets " + ", ".join(self.secrets))
        return "; ".join(words)


def wave(specs_by_name: dict[str, ImageSpec], spec: ImageSpec) -> int:
    """0 for an image not built FROM another catalog image; else its parent's wave + 1."""
    depth = 0
    seen = {spec.name}
    parent = spec.built_on
    while parent is not None and parent in specs_by_name and parent not in seen:
        depth += 1
        seen.add(parent)
        parent = specs_by_name[parent].built_on
    return depth


def group_of(cat: Catalog, by_name: dict[str, ImageSpec], spec: ImageSpec) -> Group:
    return Group(wave(by_name, spec), registry_names(cat, spec), tuple(sorted(spec.secrets)))


def groups(cat: Catalog, specs: Sequence[ImageSpec]) -> list[Group]:
    """Every group of the catalog, in a stable order (its index names the call jobs)."""
    by_name = {s.name: s for s in specs}
    return sorted({group_of(cat, by_name, s) for s in specs})


def chunks(items: Sequence[dict[str, object]]) -> dict[str, object]:
    """``items`` as a call job's matrix reads them: ``count``, ``chunks`` (the indices, its
    matrix) and ``legs`` (a list of at most CHUNK items per index)."""
    parts = [list(items[i:i + CHUNK]) for i in range(0, len(items), CHUNK)]
    return {"count": len(items), "chunks": list(range(len(parts))), "legs": parts}


def pr_legs(cat: Catalog, spec: ImageSpec) -> list[dict[str, object]]:
    return [{"image": spec.name, "platform": p, "arch": arch(p), "runner": cat.ci.runners[p]}
            for p in spec.platforms]


def has_pr_build(spec: ImageSpec) -> bool:
    """A pull request builds an image unless it needs build secrets (a pull request gets
    none) or is built FROM a catalog image not yet locked (nothing to build it on)."""
    unpinned_parent = spec.built_on is not None and spec.base_digest is None
    return not spec.secrets and not unpinned_parent


def build_legs(
    cat: Catalog, spec: ImageSpec, selected: set[str], parents: set[str],
) -> list[dict[str, object]]:
    """One leg per platform. ``parent``: the catalog image it is built FROM (empty: none);
    ``parent_built``: that image is built in this run, so the leg waits for its merge and
    builds on the index it pushed (else on the lock's digest of it)."""
    parent = spec.built_on if spec.built_on in parents else None
    return [
        {**leg, "parent": parent or "", "parent_built": parent in selected}
        for leg in pr_legs(cat, spec)
    ]


def merge_entry(
    cat: Catalog, spec: ImageSpec, selected: set[str], parents: set[str], bases: set[str],
) -> dict[str, object]:
    """One merge: the image, where it goes, its platforms; ``base``: another image of the
    catalog is built FROM it (the merge hands on the index digest it pushed)."""
    parent = spec.built_on if spec.built_on in parents else None
    return {
        "image": spec.name,
        "reference": spec.reference,
        "repository": spec.repository,
        "registry": registry_names(cat, spec)[0],
        "platforms": list(spec.platforms),
        "mirrors": len(spec.registries) > 1,
        "parent": parent or "",
        "parent_built": parent in selected,
        "base": spec.name in bases,
    }
