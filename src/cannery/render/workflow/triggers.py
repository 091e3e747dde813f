"""The main workflow's triggers (``on:``): manual runs, branch pushes, release tags and
published releases, pull requests, the schedule."""

from __future__ import annotations

from collections.abc import Sequence

from cannery.catalog.models import Catalog
from cannery.plan import ImageSpec
from cannery.render.workflow.common import REUSABLE, checkout_dirs, reusable_path
from cannery.render.workflow.lock_update import lock_update_paths_file
from cannery.render.yamltext import Note


def _dispatch(cat: Catalog) -> dict[str, object]:
    """A manual run's inputs: the images, force, and (``dispatch_tags``) more tags."""
    ci = cat.ci
    return {
        "inputs": {
            "images": {
                "description": "Images to build, separated by spaces (empty: every image)",
                "type": "string",
                "required": False,
                "default": "",
            },
            "force": {
                "description": "Rebuild platforms whose inputs are unchanged and already pushed",
                "type": "boolean",
                "required": False,
                "default": False,
            },
            **({"tags": {
                "description": "More tags for each image this run publishes, separated by "
                "spaces (letters, digits, _ . -)",
                "type": "string",
                "required": False,
                "default": "",
            }} if ci.dispatch_tags else {}),
        }
    }


def triggers(cat: Catalog, specs: Sequence[ImageSpec], catalog_file: str | None,
             lock_file: str) -> dict[object, object]:
    """The ``on:`` table. A push or pull request starts the workflow only when it touches a
    file the images are built from (or the rendered files, which `render --check` checks)."""
    ci = cat.ci
    paths = [p for p in (catalog_file, lock_file) if p]
    paths += [f"{ci.dockerfiles}/**", ci.bake, ci.docs, ci.workflow,
              *(reusable_path(cat, k) for k in REUSABLE)]
    if ci.install_action is None:  # the pins CI installs cannery from: `render --check` them
        paths.append(ci.requirements)
    if ci.schedule and ci.lock_update:  # the lock update's boundary: a change to it is checked
        paths.append(lock_update_paths_file(cat))
    dirs = sorted({d for s in specs for d in checkout_dirs(s)})
    if dirs:
        paths += [".dockerignore", *(f"{d}/**" for d in dirs)]
    # An image that copies the whole checkout is touched by any change: no paths filter.
    filtered = {"paths": paths} if "." not in dirs else {}

    dispatch = _dispatch(cat)
    # branches = []: no branch push builds (releases, the schedule and manual runs only); an
    # empty `branches:` list is not a valid filter, so the key is left out instead.
    # branch_pushes = false: `branches` filter pull requests only; no branch push publishes.
    branch_pushes = bool(ci.branches) and ci.branch_pushes
    # build_branches: pushed to, they build as a pull request does and never publish
    branches = [*(ci.branches if branch_pushes else []), *ci.build_branches]
    push: dict[str, object] = {"branches": list(dict.fromkeys(branches))} if branches else {}
    if ci.release_tags:
        push["tags"] = list(ci.release_tags)
    if branches:
        push.update(filtered)  # GitHub does not check paths for tag pushes
    on: dict[object, object] = {"workflow_dispatch": dispatch}
    if ci.release_tags:
        on[Note(("Branch pushes build what they touch; a" if branch_pushes else "A")
                + " release tag (paths are not checked for tags)\nbuilds and publishes every "
                "image: its tag, then its aliases.")] = None
    if push:
        on["push"] = push
    if ci.releases:
        on[Note("A published release builds and publishes every image from its tag.")] = None
        on["release"] = {"types": ["published"]}
    if ci.pull_requests:
        note = "Builds what the pull request touches, pushes nothing, reads no secret."
        if ci.pr_label:
            note += f"\nOnly while it carries the label {ci.pr_label!r} (adding it starts one)."
        on[Note(note)] = None
        # with no branches named, pull requests into any branch
        # a label gate: adding the label is an event of its own
        types = {"types": ["opened", "synchronize", "reopened", "labeled"]} if ci.pr_label else {}
        on["pull_request"] = types | (
            {"branches": list(ci.branches)} if ci.branches else {}) | filtered
    if ci.schedule:
        note = "Unchanged inputs are skipped: the build is a no-op when nothing moved."
        if ci.lock_update:
            note += ("\nThe lock-update job re-resolves moving references into a pull "
                     "request.")
        on[Note(note)] = None
        on["schedule"] = [{"cron": ci.schedule}]
    return on
