"""`cannery ci plan`: what one GitHub Actions event builds, as the ``check`` job's outputs.

The rendered workflow (cannery.render.workflow) names no image; this command, run by its
``check`` job after `cannery render --check`, reads the catalog and the lock and the event and
prints ``name=value`` lines for ``$GITHUB_OUTPUT``, each value one line of compact JSON:

- ``images``: the images this event builds, a JSON list of names in catalog order;
- ``publish``: ``true`` or ``false``: false on a pull request and on a push to a branch that
  matches ``[ci] build_branches`` (those build as a pull request does, push nothing);
- ``pr``: the pull-request legs (on a pull request, or a push that does not publish; else
  none), as a *chunked list* (below); a leg is ``{"image", "platform", "arch", "runner"}``;
  images that need build secrets, or are built FROM a catalog image that is not locked yet,
  have no pull-request legs;
- ``build_<i>`` and ``merge_<i>`` for each group ``i`` (0, 1, …: the groups of
  cannery.render.workflow.groups, in that order; the main workflow has call jobs
  ``build-<i>`` and ``merge-<i>`` for each, ``merge-<i>`` after ``build-<i>``, and a group of
  wave w > 0 builds after every merge of wave w - 1): when the event publishes, that group's
  build legs ``{"image", "platform", "arch", "runner", "parent", "parent_built"}`` and merges
  ``{"image", "reference", "repository", "registry", "platforms", "mirrors", "parent",
  "parent_built", "base"}``, each a chunked list; else empty ones. ``parent``: the catalog
  image it is built FROM ("" for none); ``parent_built``: that image is in ``images``, so the
  leg builds on the index its merge pushed (artifact ``base-digest-<parent>``, uploaded by the
  merge whose ``base`` is true), else on the lock's digest of it.

A *chunked list* is ``{"count": N, "chunks": [0, 1, …], "legs": [[…], […]]}``: N items in
chunks of at most 256 (GitHub's matrix limit), in catalog order, an image's platforms in
catalog order. A call job runs when ``count > 0``, with a matrix over ``chunks``, and hands
``legs[chunk]`` to the reusable workflow, whose matrix is that list.

The job graph of the main workflow (render/workflow/check.py renders it):
- ``check``: `cannery render --check`, then this command (outputs as above);
- ``pr`` (with ``[ci] pull_requests``): needs check; if the event is a pull request (with
  ``pr_label``: carrying it) or, with ``build_branches``, a push whose ``publish`` is false, and
  ``pr.count > 0``; calls ``<workflow>-pr.yml`` with ``legs``, no secret;
- ``build-<i>``: needs check, and for a wave w > 0 every ``merge-<j>`` of wave w - 1; if not a
  pull request, not a fork (and ``publish == 'true'`` with build_branches) and
  ``build_<i>.count > 0``; a wave > 0 adds ``!cancelled() && needs.check.result ==
  'success'``, so it runs after its parents' merges whatever their result; calls
  ``<workflow>-build.yml`` with ``legs`` and ``force``, and the secrets
  ``Group.build_secrets`` names (the first registry's login, the build secrets);
- ``merge-<i>``: needs check and ``build-<i>``; if ``!cancelled()``, not a pull request, not a
  fork, ``build-<i>`` not skipped and ``merge_<i>.count > 0``; calls ``<workflow>-merge.yml``
  with ``legs`` (and ``tags`` with dispatch_tags) and every registry's login of the group;
- ``lock-update`` and ``lock-update-pr`` on the schedule (with ``lock_update``).
Each call job's matrix is ``chunk`` over ``chunks``; its ``legs`` input is
``toJSON(legs[matrix.chunk])``. Artifacts: a build leg uploads ``digest-<image>-<arch>``; a
merge downloads ``digest-<image>-*``, refuses (fails, merges nothing) when a platform's
descriptor is missing, and, when ``base``, uploads ``base-digest-<image>`` (a file
``digest``); a leg or merge whose ``parent_built`` is true downloads
``base-digest-<parent>`` first (failing when it is absent).

Which images an event builds (``images``), as the old rendered script did:
- ``pull_request``: those whose inputs the pull request's merge commit changed against its
  first parent (`git diff HEAD^1 HEAD`); a ``push`` to a branch: those the push changed
  (`git diff BEFORE HEAD`; every image when BEFORE is not a commit of the checkout). An
  image's inputs (render.workflow.common.image_inputs): its rendered Dockerfile, the
  workflow files, and for an image that copies the checkout, ``.dockerignore`` and the
  directories it copies ("." is the whole checkout); an image built FROM another of the
  catalog has its ancestors' inputs too. A directory matches every path below it.
- a tag push, a published release, the schedule: every image. With release tags (or
  releases) and a catalog version, a tag must be that version or ``v`` + it, else exit 2.
- ``workflow_dispatch``: the images named in ``--images`` (words; an unknown name is exit
  2), or every image when none is named. ``--tags`` (with ``dispatch_tags``): every word an
  image tag, and at most one selected image per repository (a tag names one index), else
  exit 2.
``--changed FILE`` gives the changed paths (one a line) instead of asking git.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cannery.catalog.image_bases import ancestors
from cannery.catalog.models import IMAGE_TAG, Catalog
from cannery.errors import FatalError, InputError
from cannery.plan import ImageSpec
from cannery.render.workflow.common import image_inputs
from cannery.render.workflow.groups import (
    build_legs,
    chunks,
    group_of,
    groups,
    has_pr_build,
    merge_entry,
    pr_legs,
)

NAME = re.compile(r"[a-z0-9][a-z0-9_.-]*")
EVERY = None  # changed paths unknown: every image


@dataclass(frozen=True)
class Event:
    """What GitHub says of the run: the event's name, the ref, the push's before SHA, a manual
    run's inputs; ``changed``: the changed paths, when given rather than asked of git."""

    name: str
    ref: str = ""
    before: str = ""
    images: str = ""
    tags: str = ""
    changed: list[str] | None = field(default=None)


def _git_diff(base: str) -> list[str]:
    try:
        done = subprocess.run(["git", "diff", "--name-only", "-z", base, "HEAD"],
                              capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise FatalError(f"git diff {base} HEAD: {e}") from None
    return [p for p in done.stdout.decode("utf-8", "surrogateescape").split("\0") if p]


def _is_commit(sha: str) -> bool:
    if not re.fullmatch(r"[0-9a-f]{7,64}", sha):
        return False
    done = subprocess.run(["git", "cat-file", "-e", f"{sha}^{{commit}}"], capture_output=True)
    return done.returncode == 0


def changed_paths(event: Event) -> list[str] | None:
    """The paths this event changed; None (EVERY) when it builds every image."""
    if event.name == "pull_request":
        return event.changed if event.changed is not None else _git_diff("HEAD^1")
    if event.name == "push" and event.ref.startswith("refs/heads/"):
        if event.changed is not None:
            return event.changed
        return _git_diff(event.before) if _is_commit(event.before) else EVERY
    return EVERY


def _release_guard(cat: Catalog, event: Event) -> None:
    version = cat.catalog.version
    if not ((cat.ci.release_tags or cat.ci.releases) and version):
        return
    if event.name in ("push", "release") and event.ref.startswith("refs/tags/"):
        tag = event.ref.removeprefix("refs/tags/")
        if tag not in (version, f"v{version}"):
            raise InputError(f"release tag {tag} is not the catalog's version {version} "
                             f"(or v{version}): nothing is built")


def _hit(inputs: Sequence[str], changed: Sequence[str]) -> bool:
    return any(p == "." or f == p or f.startswith(p.rstrip("/") + "/")
               for p in inputs for f in changed)


def affected(cat: Catalog, specs: Sequence[ImageSpec], event: Event) -> list[str]:
    """The images this event builds, in catalog order (see the module's docstring)."""
    by_name = {s.name: s for s in specs}
    wanted = event.images.split()
    for w in wanted:
        if not NAME.fullmatch(w) or w not in by_name:
            raise InputError(f"input images: no image {w} in the catalog "
                             f"(images: {' '.join(by_name)})")
    _release_guard(cat, event)
    if event.name == "workflow_dispatch":
        return [s.name for s in specs if not wanted or s.name in wanted]
    changed = changed_paths(event)
    if changed is EVERY:
        return [s.name for s in specs]
    out = []
    for spec in specs:
        chain = [spec, *(by_name[a] for a in ancestors(cat, spec.name) if a in by_name)]
        if _hit([p for s in chain for p in image_inputs(cat, s)], changed):
            out.append(spec.name)
    return out


def _check_tags(specs: Sequence[ImageSpec], selected: Sequence[str], tags: str) -> None:
    words = tags.split()
    for tag in words:
        if not IMAGE_TAG.fullmatch(tag):
            raise InputError("input tags: a word is not an image tag (letters, digits, _ . -; "
                             "at most 128)")
    if not words:
        return
    owner: dict[str, str] = {}
    for spec in specs:
        if spec.name in selected:
            if spec.repository in owner:
                raise InputError(
                    f"input tags: {owner[spec.repository]} and {spec.name} both publish to "
                    f"{spec.repository}, and a tag names one index: name one of them in input "
                    "images")
            owner[spec.repository] = spec.name


def publishes(cat: Catalog, event: Event) -> bool:
    """False on a pull request and on a push to a branch of ``build_branches`` (GitHub's
    filter syntax: ``*`` anything but '/', ``**`` anything, ``?`` and ``+`` as in a regular
    expression; the patterns are catalog-validated)."""
    if event.name == "pull_request":
        return False
    if event.name != "push" or not event.ref.startswith("refs/heads/"):
        return True
    branch = event.ref.removeprefix("refs/heads/")
    for pattern in cat.ci.build_branches:
        regex = pattern.replace(".", r"\.").replace("**", "\0").replace("*", "[^/]*")
        if re.fullmatch(regex.replace("\0", ".*"), branch):
            return False
    return True


def plan_outputs(cat: Catalog, specs: Sequence[ImageSpec], event: Event) -> dict[str, str]:
    """Every output of the check job, by name (values: compact JSON, or true/false)."""
    selected = affected(cat, specs, event)
    if cat.ci.dispatch_tags:
        _check_tags(specs, selected, event.tags)
    chosen = set(selected)
    publish = publishes(cat, event)
    by_name = {s.name: s for s in specs}
    bases = {s.built_on for s in specs if s.built_on is not None and s.built_on in by_name}
    shape = groups(cat, specs)
    legs: list[list[dict[str, object]]] = [[] for _ in shape]
    merges: list[list[dict[str, object]]] = [[] for _ in shape]
    pr: list[dict[str, object]] = []
    for spec in specs:
        if spec.name not in chosen:
            continue
        if not publish:
            pr += pr_legs(cat, spec) if has_pr_build(spec) else []
            continue
        i = shape.index(group_of(cat, by_name, spec))
        legs[i] += build_legs(cat, spec, chosen, set(by_name))
        merges[i].append(merge_entry(cat, spec, chosen, set(by_name), bases))
    out = {"images": selected, "publish": publish, "pr": chunks(pr)}
    for i in range(len(shape)):
        out[f"build_{i}"] = chunks(legs[i])
        out[f"merge_{i}"] = chunks(merges[i])
    return {k: json.dumps(v, separators=(",", ":")) for k, v in out.items()}


def ci_plan_cmd(catalog: Path | None, lock: Path | None, event: Event) -> int:
    """Print the outputs as ``name=value`` lines (for ``$GITHUB_OUTPUT``)."""
    from cannery.commands.render import context

    ctx = context(catalog, lock)
    for name, value in plan_outputs(ctx.loaded.catalog, ctx.specs(), event).items():
        print(f"{name}={value}")
    return 0
