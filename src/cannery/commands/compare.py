"""`cannery compare`: what a migration changes, for the reviewer of its pull request.

Two forms:
- ``cannery compare ORIGINAL NEW``: two Dockerfiles, two workflow files (.yml/.yaml), or two
  directories (their Dockerfiles and .github/workflows files, paired by relative path);
- ``cannery compare --catalog C --original DIR [IMAGE…]``: each catalog image that names its
  ``original`` Dockerfile (and ``[ci] original``, the workflow) against what the catalog
  renders, in memory; nothing is written.

Differences listed in the accepted file (default: compare-accepted.toml beside the catalog) are
shown with their reason and do not fail. Exit 0: no difference outside it; 1: some; 2: bad
input.
"""

from __future__ import annotations

from pathlib import Path

from cannery.commands.common import out
from cannery.compare.accepted import FILE_NAME, Accepted, apply, load_accepted
from cannery.compare.report import Compared, as_json, failing, text
from cannery.errors import InputError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cannery.compare.workflow import WorkflowView
    from cannery.lint.facts.dockerfile import DockerfileFacts

WORKFLOW_SUFFIXES = (".yml", ".yaml")


def category_names() -> list[str]:
    from cannery.compare import dockerfile, workflow

    return [*dockerfile.category_names(), *workflow.category_names(), "files"]


def _read(path: Path) -> str:
    """The text of a Dockerfile or workflow to compare: a regular file (a FIFO or a device such
    as /dev/zero is refused, not waited on or read without end) of at most lint's MAX_BYTES."""
    from cannery.lint.files import MAX_BYTES
    from cannery.util.bounded import read_regular_file

    try:
        data = read_regular_file(path, limit=MAX_BYTES)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None


def _dockerfile(label: str, text: str) -> DockerfileFacts:
    from cannery.lint.facts import ParseFailure
    from cannery.lint.facts.dockerfile import parse_dockerfile

    try:
        facts = parse_dockerfile(label, text, {})
    except ParseFailure as exc:
        raise InputError(f"{label}:{exc.line}: {exc.message}") from None
    if not facts.stages:
        raise InputError(f"{label}: no FROM: not a Dockerfile")
    return facts


def _workflow(label: str, text: str, published_tags: list[str] | None = None,
              published_registries: list[str] | None = None) -> WorkflowView:
    from cannery.compare.workflow import load_view
    from cannery.lint.facts import ParseFailure
    from cannery.lint.facts.workflow import parse_workflow

    try:
        facts = parse_workflow(label, text)
    except ParseFailure as exc:
        raise InputError(f"{label}:{exc.line}: {exc.message}") from None
    view = load_view(label, text, facts, published_tags=published_tags,
                     published_registries=published_registries)
    if not view.events:
        raise InputError(f"{label}: no `on:` triggers: not a GitHub Actions workflow")
    return view


def compare_dockerfile_texts(image: str, original: tuple[str, str], new: tuple[str, str],
                             arches: tuple[str, ...] = ()) -> Compared:
    """Compare (label, text) pairs of two Dockerfiles, as built for ``arches`` (TARGETARCH
    values; default: amd64 and arm64)."""
    from cannery.compare.dockerfile import compare_facts
    from cannery.compare.image import ARCHES

    a = _dockerfile(*original)
    b = _dockerfile(*new)
    return Compared(image, "dockerfile", original[0], new[0],
                    compare_facts(a, b, arches or ARCHES))


def compare_workflow_texts(image: str, original: tuple[str, str], new: tuple[str, str],
                           published_tags: list[str] | None = None,
                           published_registries: list[str] | None = None) -> Compared:
    """Compare (label, text) pairs of two workflows; ``published_*``: what the new side's
    `cannery build --push` publishes (from the catalog)."""
    from cannery.compare.workflow import compare_workflows

    a = _workflow(*original)
    b = _workflow(*new, published_tags=published_tags,
                  published_registries=published_registries)
    return Compared(image, "workflow", original[0], new[0], compare_workflows(a, b))


def _is_workflow(path: Path) -> bool:
    return path.suffix in WORKFLOW_SUFFIXES


def _is_dockerfile(path: Path) -> bool:
    name = path.name.lower()
    return name.startswith("dockerfile") or name.endswith((".dockerfile", ".containerfile")) \
        or name.startswith("containerfile")


def _tree(root: Path) -> dict[str, Path]:
    """Relative path → file, for the Dockerfiles and the workflows under ``root``."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file() or ".git" in path.relative_to(root).parts[:-1]:
            continue
        rel = path.relative_to(root).as_posix()
        if _is_dockerfile(path) or (_is_workflow(path) and "/.github/workflows/" in f"/{rel}"):
            found[rel] = path
    return found


def compare_paths(original: Path, new: Path) -> list[Compared]:
    if original.is_dir() != new.is_dir():
        raise InputError(f"{original} and {new}: give two files or two directories")
    if not original.is_dir():
        for p in (original, new):
            if not p.exists():
                raise InputError(f"{p}: no such file")
        pair = ((str(original), _read(original)), (str(new), _read(new)))
        if _is_workflow(original) != _is_workflow(new):
            raise InputError(f"{original} and {new}: one is a workflow (.yml), the other not")
        if _is_workflow(original):
            return [compare_workflow_texts(original.name, *pair)]
        return [compare_dockerfile_texts(original.name, *pair)]
    a, b = _tree(original), _tree(new)
    if not a and not b:
        raise InputError(f"{original} and {new}: no Dockerfile or workflow in either")
    from cannery.compare.model import ADDED, REMOVED, Difference

    results: list[Compared] = []
    for rel in sorted(set(a) | set(b)):
        if rel not in b or rel not in a:
            where = a.get(rel) or b[rel]
            change = REMOVED if rel in a else ADDED
            results.append(Compared(rel, "file", str(a.get(rel, "-")), str(b.get(rel, "-")), [
                Difference("files", rel, change, str(where) if rel in a else None,
                           str(where) if rel in b else None)]))
            continue
        pair = ((str(a[rel]), _read(a[rel])), (str(b[rel]), _read(b[rel])))
        if _is_workflow(a[rel]):
            results.append(compare_workflow_texts(rel, *pair))
        else:
            results.append(compare_dockerfile_texts(rel, *pair))
    return results


def compare_catalog(catalog: Path, original_dir: Path, lock: Path | None,
                    images: list[str] | None) -> list[Compared]:
    from cannery.commands.common import select
    from cannery.commands.render import context
    from cannery.render.dockerfile import render_dockerfile

    if not original_dir.is_dir():
        raise InputError(f"--original {original_dir}: not a directory")
    ctx = context(catalog, lock)
    cat = ctx.loaded.catalog
    names = select(ctx.loaded, images)
    missing = [n for n in names if cat.images[n].original is None]
    if images and missing:
        raise InputError(f"{catalog}: image {missing[0]} names no `original` Dockerfile")
    chosen = [n for n in names if cat.images[n].original is not None]
    if not chosen and cat.ci.original is None:
        raise InputError(f"{catalog}: no image names its `original` Dockerfile (and [ci] no "
                         "`original` workflow): nothing to compare")
    results: list[Compared] = []
    for spec in ctx.specs(chosen) if chosen else []:
        rel = cat.images[spec.name].original
        assert rel is not None
        path = original_dir / rel
        # only the architectures the image is built for: a single-platform image's rendered
        # file has no stage for the other, which would read as a difference of its own
        results.append(compare_dockerfile_texts(
            spec.name, (str(path), _read(path)),
            (f"{spec.name} (rendered from {catalog})", render_dockerfile(spec)), spec.arches))
    if cat.ci.original is not None and not images:
        from cannery.pydeps import ci_requirements
        from cannery.render.actions import load_pins
        from cannery.render.workflow import inline_calls, render_workflows

        specs = ctx.specs()
        files = render_workflows(cat, specs, load_pins(), catalog_file=ctx.catalog_file,
                                 lock_file="cannery.lock",
                                 ci_pins=ci_requirements(cat, ctx.lock.ci))
        # each side with the reusable workflows its call jobs run, read as one pipeline
        rendered = inline_calls(files[cat.ci.workflow], files.get)
        tags = sorted({f"{r.repository}:{t}" for s in specs for r in s.registries
                       for t in s.tags})
        hosts = sorted({r.repository.split("/", 1)[0] for s in specs for r in s.registries})
        path = original_dir / cat.ci.original
        original = inline_calls(_read(path), lambda rel: _called(original_dir, rel))
        results.append(compare_workflow_texts(
            "workflow", (str(path), original),
            (f"{cat.ci.workflow} (rendered from {catalog})", rendered),
            published_tags=tags, published_registries=hosts))
    return results


def _called(root: Path, rel: str) -> str | None:
    """The reusable workflow a call job names (``uses: ./PATH``, from the checkout's root), or
    None when it is not a file of the checkout."""
    path = root / rel
    return _read(path) if ".." not in Path(rel).parts and path.is_file() else None


def compare_cmd(args: list[str], catalog: Path | None, original_dir: Path | None,
                lock: Path | None, accepted_file: Path | None, as_json_output: bool) -> int:
    """``args``: ORIGINAL NEW, or with ``catalog`` the images to compare (default: all)."""
    if catalog is not None:
        if original_dir is None:
            raise InputError("--catalog needs --original DIR (the checkout with the originals)")
        results = compare_catalog(catalog, original_dir, lock, args or None)
        default = catalog.parent / FILE_NAME
        accepted_file = accepted_file or (default if default.is_file() else None)
    else:
        if original_dir is not None:
            raise InputError("--original needs --catalog (or give ORIGINAL and NEW)")
        if len(args) != 2:
            raise InputError("give ORIGINAL and NEW (two files or two directories), or "
                             "--catalog C --original DIR")
        results = compare_paths(Path(args[0]), Path(args[1]))
    accepted: list[Accepted] = []
    if accepted_file is not None:
        accepted = load_accepted(accepted_file, category_names())
    for r in results:
        apply(r.image, r.differences, accepted)
    out.print(as_json(results, accepted) if as_json_output else text(results, accepted),
              markup=False, end="")
    return 1 if failing(results) else 0
