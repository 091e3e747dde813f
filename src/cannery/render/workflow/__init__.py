"""Catalog → the GitHub Actions workflows that build every image on native runners: a main
workflow and three reusable ones beside it, all of a size that does not grow with the number
of images (GitHub refuses a workflow file over 500 KB and a matrix over 256 jobs).

Shape, and why:
- every job that runs cannery installs it first, and the build and merge jobs then hand it the
  registry secrets: from the requirements file rendered beside the workflow (the lock's pins of
  ``[ci] install``, every package with its hashes) with ``pip --require-hashes --no-deps``, or
  through ``[ci] install_action``, an action pinned by a full commit SHA; with neither, nothing
  is rendered;
- a first job, ``check``, runs `cannery render --check`, so a hand edit or a stale rendered
  file fails before anything builds, and then `cannery ci plan` (cannery.commands.ci, which
  describes the outputs), which works out which images the event touches and writes, as the
  job's outputs, the pull-request legs, and per group the build legs and the merges, in
  chunks of at most 256;
- the images are data: the main workflow names none. Per group of images (groups.py: the same
  wave of ``image:`` bases, registries and build secrets; the groups follow the catalog's
  shape, not its size), one build call job and one merge call job, each with a matrix over
  its chunk indices, run the reusable workflows ``<workflow>-build.yml`` and
  ``<workflow>-merge.yml`` and pass them only that group's secrets; one ``pr`` call job runs
  ``<workflow>-pr.yml`` and passes none (legs.py, merge.py say what each leg does);
- a later wave's build (images built FROM another of the catalog) runs after the previous
  wave's merges; each merge of such a parent uploads the index digest it pushed, and a child
  leg builds on it (``--base-digest``), or on the lock's digest when its parent is not built
  in this run;
- with a schedule (and ``lock_update``), the ``lock-update`` jobs (lock_update.py), which
  read the paths a lock update may change from a list rendered beside the workflow
  (``lock_update_paths_file``; `cannery render` writes it with the requirements file).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence

from cannery import __version__
from cannery.catalog.models import REL_PATH, Catalog
from cannery.errors import InputError
from cannery.plan import ImageSpec
from cannery.pydeps import cannery_requirement
from cannery.render.actions import Pin
from cannery.render.workflow.check import build_call, check_job, merge_call, pr_call
from cannery.render.workflow.common import (
    LOCK_BRANCH,
    PUBLISH_IF,
    image_inputs,
    install_command,
    requirements_text,
    reusable_path,
)
from cannery.render.workflow.groups import groups
from cannery.render.workflow.legs import build_workflow, pr_workflow
from cannery.render.workflow.lock_update import (
    lock_update_jobs,
    lock_update_paths,
    lock_update_paths_file,
    lock_update_paths_text,
)
from cannery.render.workflow.merge import merge_workflow
from cannery.render.workflow.triggers import triggers
from cannery.render.yamltext import Gap, Note, dump

__all__ = [
    "LOCK_BRANCH", "PUBLISH_IF", "image_inputs", "inline_calls", "install_command",
    "lock_update_paths", "lock_update_paths_file", "lock_update_paths_text",
    "render_workflow", "render_workflows", "requirements_text",
]

HEADER = (
    "check: `cannery render --check`, then `cannery ci plan`: the images this event builds\n"
    "(a pull request or a branch push, those whose rendered Dockerfile, every locked input,\n"
    "or copied checkout directory changed, with the images built FROM them; a release tag\n"
    "and the schedule, all; a manual run, the images it names), as JSON outputs: the legs\n"
    "(image x platform) and the merges, in chunks of at most 256 per group.\n"
    "No image is named here: the call jobs below run the reusable workflows beside this one\n"
    "over those chunks, one build and one merge call job per group of images that need the\n"
    "same secrets (registries, build secrets) and build in the same wave (an image built\n"
    "FROM another of the catalog after it), each passed only its group's secrets.\n"
    "Pull requests (pr): each platform on its native runner is built from the pull\n"
    "request's checkout into an OCI layout and verified from it; nothing is pushed, no\n"
    "registry is logged in to, no secret is passed, so a fork's pull request runs the same.\n"
    "Pushes, tags, the schedule and manual runs: each leg pushes its platform by digest\n"
    "(`cannery build --platform P --push --digest-dir`, no tag moves) with a registry cache\n"
    "of its own image and platform, and uploads the descriptor; each image's merge runs\n"
    "only when every leg of that image uploaded one: `cannery build --merge-only` checks\n"
    "that every platform of the catalog is present, pushes the index by digest and only then\n"
    "moves the tag, then the aliases, so no tag names a partial index; `cannery verify` then\n"
    "checks the pushed image. The merge attaches cannery's provenance as OCI referrers and,\n"
    "in a public repository, signs it keyless (actions/attest: Sigstore, GitHub OIDC).\n"
    "Registry credentials reach cannery as environment variables, never as arguments;\n"
    "cannery gives BuildKit its login in a temporary docker config, so no leg runs\n"
    "`docker login` (the merge's login step is for actions/attest's push)."
)


def _validate(cat: Catalog, catalog_file: str | None, lock_file: str,
              ci_pins: str | None) -> str:
    """The catalog's ``--catalog`` words for run: lines, or InputError."""
    if catalog_file is not None and not REL_PATH.match(catalog_file):
        # The name lands in run: lines, where GitHub expands ${{ }} before any shell quoting.
        raise InputError(f"{catalog_file}: rename the catalog to letters, digits, '.', '_', "
                         "'-' so the workflow can name it")
    if cat.ci.install_action is None and ci_pins is None:
        raise InputError(
            f"{catalog_file or 'the embedded catalog'}: [ci] install: "
            f"{cannery_requirement(cat)} has no hashes in {lock_file} for Python "
            f"{cat.ci.python} on every runner's platform: run `cannery lock` (CI installs "
            "cannery only with --require-hashes, or through install_action pinned by a full "
            "commit SHA)"
        )
    return f" --catalog {shlex.quote(catalog_file)}" if catalog_file else ""


def _check_max_parallel(cat: Catalog, specs: Sequence[ImageSpec],
                        catalog_file: str | None) -> None:
    """``max_parallel`` bounds the legs of one image. The constant-size workflow can say 1
    (a concurrency group per image: one leg running, the other waiting, so at most two) or
    no bound at all; any other value below an image's platform count is refused."""
    bound = cat.ci.max_parallel
    for spec in specs:
        count = len(spec.platforms)
        if bound is None or bound >= count or (bound == 1 and count == 2):
            continue
        raise InputError(
            f"{catalog_file or 'the embedded catalog'}: [ci] max_parallel: {bound} legs at "
            f"once of image {spec.name}'s {count} platforms cannot be said in the generated "
            "workflow: use 1 (for images of at most two platforms) or at least the number of "
            "platforms"
        )


def _header(cat: Catalog, text: str) -> str:
    return (
        f"Generated by cannery {__version__.split('+')[0]} from catalog {cat.catalog.name!r}.\n"
        "Do not edit: change the catalog, then run `cannery render`.\n\n" + text
    )


def render_workflow(
    cat: Catalog,
    specs: Sequence[ImageSpec],
    pins: dict[str, Pin],
    *,
    catalog_file: str | None,
    lock_file: str,
    ci_pins: str | None,
) -> str:
    """The main workflow's text. ``catalog_file`` is the catalog's path from the repository
    root (None: the embedded catalog); ``lock_file`` likewise for the lock, which cannery
    finds beside the catalog by itself. ``ci_pins``: the lock's pins of ``[ci] install``
    (``pydeps.ci_requirements``), None when it has none for this catalog; then, unless an
    ``install_action`` pinned by commit installs cannery, nothing is written (InputError):
    every job that installs cannery hands it the registry secrets."""
    cat_args = _validate(cat, catalog_file, lock_file, ci_pins)
    _check_max_parallel(cat, specs, catalog_file)
    shape = groups(cat, specs)
    jobs: dict[object, object] = {"check": check_job(cat, pins, cat_args, shape)}
    if cat.ci.pull_requests:
        jobs[Gap(len(jobs))] = None
        jobs["pr"] = pr_call(cat)
    for i, group in enumerate(shape):
        jobs[Gap(len(jobs))] = None
        jobs[Note(f"group {i}: {group.describe()}")] = None
        jobs[f"build-{i}"] = build_call(cat, i, group, shape)
        jobs[f"merge-{i}"] = merge_call(cat, i, group)
    if cat.ci.schedule and cat.ci.lock_update:
        for jid, job in lock_update_jobs(cat, specs, pins, cat_args, lock_file,
                                         catalog_file):
            jobs[Gap(len(jobs))] = None
            jobs[jid] = job
    doc: dict[object, object] = {
        "name": f"cannery images ({cat.catalog.name})",
        Gap(): None,
        "on": triggers(cat, specs, catalog_file, lock_file),
        Gap(1): None,
        Note("Each job asks for what it needs; nothing is granted by default."): None,
        "permissions": {},
        Gap(2): None,
        "jobs": jobs,
    }
    return dump(doc, _header(cat, HEADER))  # type: ignore[arg-type]


def render_workflows(
    cat: Catalog,
    specs: Sequence[ImageSpec],
    pins: dict[str, Pin],
    *,
    catalog_file: str | None,
    lock_file: str,
    ci_pins: str | None,
) -> dict[str, str]:
    """Every workflow file, by its path from the catalog's directory: the main one
    (``[ci] workflow``) and the reusable ones beside it."""
    main = render_workflow(cat, specs, pins, catalog_file=catalog_file, lock_file=lock_file,
                           ci_pins=ci_pins)
    cat_args = _validate(cat, catalog_file, lock_file, ci_pins)
    called = {
        "build": (build_workflow(cat, specs, pins, cat_args),
                  "The build legs: called by the main workflow's build call jobs."),
        "merge": (merge_workflow(cat, specs, pins, cat_args),
                  "The merges: called by the main workflow's merge call jobs."),
        "pr": (pr_workflow(cat, pins, cat_args),
               "The pull-request legs: called by the main workflow's pr call job."),
    }
    out = {cat.ci.workflow: main}
    for kind, (doc, what) in called.items():
        out[reusable_path(cat, kind)] = dump(doc, _header(cat, what))  # type: ignore[arg-type]
    return out


def inline_calls(text: str, read: Callable[[str], str | None]) -> str:
    """A workflow with each call job of a reusable workflow of the same repository (``uses:
    ./PATH``, its text from ``read(PATH)``; None: the job is left as it is) replaced by the
    called workflow's jobs, each under the call job's ``if`` and ``needs`` (one job keeps the
    call job's id; several are CALL-JOB): the whole pipeline in one document, for `cannery
    compare`. Text with no such call job is returned as it is."""
    import yaml

    doc = yaml.safe_load(text)
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not isinstance(jobs, dict):
        return text
    out: dict[object, object] = {}
    for jid, job in jobs.items():
        uses = job.get("uses") if isinstance(job, dict) else None
        called = read(uses[2:]) if isinstance(uses, str) and uses.startswith("./") else None
        inner = yaml.safe_load(called).get("jobs") if called else None
        if not isinstance(inner, dict) or not isinstance(job, dict):
            out[jid] = job
            continue
        keep = {k: job[k] for k in ("if", "needs") if k in job}
        for cid, cjob in inner.items():
            out[jid if len(inner) == 1 else f"{jid}-{cid}"] = {**cjob, **keep}
    if out == jobs:
        return text
    doc["jobs"] = out
    if True in doc:  # YAML 1.1 reads a bare `on` key as True
        doc["on"] = doc.pop(True)
    class _Literal(yaml.SafeDumper):  # type: ignore[misc]  # (PyYAML has no types here)
        pass

    def block(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        # a script stays a block, as written (lint's shell facts map its columns)
        style = "|" if "\n" in value and not value.endswith((" ", "\t")) else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    _Literal.add_representer(str, block)
    return str(yaml.dump(doc, Dumper=_Literal, sort_keys=False, width=1000))
