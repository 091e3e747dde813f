"""What must be pinned: the moving references a catalog's images need, and how far a lock is
from holding them (what a build adds or drops)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from cannery.catalog.inputs import (
    file_downloads,
    python_source_url,
    stage_bases,
    toolkit_downloads,
    wheel_urls,
)
from cannery.catalog.platforms import arches_of
from cannery.lock.file import Lock, git_key
from cannery.pydeps import python_requests
from cannery.util.patterns import COMMIT

if TYPE_CHECKING:
    from cannery.catalog.models import Catalog


@dataclass(frozen=True)
class Input:
    """One moving reference of the catalog, and the catalog piece that owns it."""

    kind: str  # base | git | url
    key: str
    owner: str
    url: str = ""
    ref: str = ""


def required_inputs(cat: Catalog, images: list[str] | None = None) -> list[Input]:
    """The moving references of ``images`` (default: every image), each once, sorted."""
    out: dict[tuple[str, str], Input] = {}
    for iname in images or list(cat.images):
        img = cat.images[iname]
        base = cat.bases[img.base]
        out[("base", base.image)] = Input("base", base.image, img.base)
        for _pkg, _arch, url in toolkit_downloads(cat, iname):
            out[("url", url)] = Input("url", url, img.toolkit or iname, url=url)
        for _name, _arch, url in file_downloads(cat, iname):
            out[("url", url)] = Input("url", url, iname, url=url)
        # A builder stage's base, and the Python source tarball (checked like an installer).
        for bname in stage_bases(cat, iname):
            out[("base", cat.bases[bname].image)] = Input("base", cat.bases[bname].image, bname)
        py_url = python_source_url(cat, iname)
        if py_url is not None:
            out[("url", py_url)] = Input("url", py_url, iname, url=py_url)
        for cname in img.components:
            comp = cat.components[cname]
            if comp.git and comp.ref and not COMMIT.match(comp.ref):
                key = git_key(comp.git, comp.ref)
                out[("git", key)] = Input("git", key, cname, url=comp.git, ref=comp.ref)
            if comp.wheel:
                for _arch, url in wheel_urls(comp.wheel, arches_of(img.platforms)):
                    out[("url", url)] = Input("url", url, cname, url=url)
    return sorted(out.values(), key=lambda i: (i.kind, i.key))


def _entries(lock: Lock) -> set[tuple[str, str]]:
    return (
        {("base", k) for k in lock.bases}
        | {("git", k) for k in lock.git}
        | {("url", k) for k in lock.urls}
    )


def lock_changes(
    cat: Catalog, lock: Lock, images: list[str] | None = None
) -> tuple[list[Input], list[str]]:
    """Inputs of ``images`` missing from the lock, and lock entries no image needs any more."""
    have = _entries(lock)
    missing = [i for i in required_inputs(cat, images) if (i.kind, i.key) not in have]
    wanted = {(i.kind, i.key) for i in required_inputs(cat)}
    stale = sorted(f"{k} {key}" for k, key in have - wanted)
    return missing, stale


def _python_unpinned(cat: Catalog, lock: Lock, image: str) -> bool:
    """``image`` installs Python packages, and the lock lacks their pins for some platform
    (an entry is missing, or was resolved from other inputs): ``plan``'s ``unpinned()``, read
    from the catalog and the lock alone (the lock does not import the planner)."""
    img = cat.images[image]
    comps = [cat.components[c] for c in img.components]
    installs = bool(img.pip_tools) or any(
        c.pip or c.wheel or (c.git and (c.install != "none" or c.requirements)) for c in comps
    )
    if not installs:
        return False
    commits = {(e.url, e.ref): e.commit for e in lock.git.values()}
    fixed = [c for c in comps if c.git and c.ref and COMMIT.match(c.ref)]
    commits.update({(str(c.git), str(c.ref)): str(c.ref) for c in fixed})
    requests = python_requests(cat, image, commits)
    if not requests:
        return True
    return any(
        (entry := lock.python.get(r.key)) is None or entry.inputs != r.digest() for r in requests
    )
