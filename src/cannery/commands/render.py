"""`cannery render [KIND]`: Dockerfiles, the CI workflow (with the requirements file and, for
the scheduled lock update, the list of the paths it may change, beside it), the bake file, the
tags doc and the per-repository overviews (render/overview.py).

With no kind every kind is rendered. Paths come from the catalog's ``[ci]`` table and are
relative to the catalog's directory (the current directory for the embedded catalog), which is
taken to be the repository root. ``--check`` writes nothing; it exits 1 and lists the files that
differ from what the catalog renders.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cannery.catalog.load import LoadedCatalog
from cannery.commands.common import err, load_with_lock, out, require_locked, select
from cannery.errors import CheckFailed, InputError
from cannery.lock import Lock
from cannery.plan import ImageSpec, plan
from cannery.render import dockerfile_name
from cannery.util.bounded import NotRegularFile, OverLimit, read_regular_file
from cannery.util.fs import atomic_write_many

if TYPE_CHECKING:
    from cannery.render.overview import Pushed

KINDS = ("dockerfile", "workflow", "bake", "docs")
OVERVIEWS = "overview"  # beside the tags doc: a directory per repository


@dataclass(frozen=True)
class Context:
    loaded: LoadedCatalog
    lock: Lock
    root: Path
    catalog_file: str | None  # path from the root; None for the embedded catalog
    # each selection planned once: every kind of file reads the same plan (at 1,024 images,
    # planning again per kind was a quarter of a render)
    _planned: dict[tuple[str, ...], list[ImageSpec]] = field(
        default_factory=dict, compare=False, repr=False)

    def specs(self, images: list[str] | None = None) -> list[ImageSpec]:
        key = tuple(images or ())
        if key not in self._planned:
            self._planned[key] = plan(self.loaded.catalog, self.lock, select(self.loaded, images))
        return list(self._planned[key])

    def dockerfiles(self) -> dict[str, str]:
        d = self.loaded.catalog.ci.dockerfiles
        return {name: f"{d}/{dockerfile_name(name)}" for name in self.loaded.catalog.images}


def context(catalog: Path | None, lock: Path | None) -> Context:
    loaded, lk, _ = load_with_lock(catalog, lock)
    root = catalog.parent if catalog is not None else Path(".")
    return Context(loaded, lk, root, catalog.name if catalog is not None else None)


def render_kind(
    kind: str, ctx: Context, out_path: Path | None, images: list[str] | None = None,
    pushed: Mapping[str, Pushed] | None = None,
) -> dict[Path, str]:
    """The files of one kind: path → text. ``out_path`` overrides the catalog's location.
    ``pushed``: what the registry holds of each image (the docs then give digests and sizes)."""
    cat = ctx.loaded.catalog
    if kind == "dockerfile":
        from cannery.render.dockerfile import render_dockerfile, render_dockerignore

        out_dir = out_path if out_path is not None else ctx.root / cat.ci.dockerfiles
        files = {out_dir / dockerfile_name(s.name): render_dockerfile(s) for s in ctx.specs(images)}
        ignore = render_dockerignore(ctx.specs(), cat.catalog.name)
        if ignore is not None:  # some image is built from the checkout: the context's root
            files[ctx.root / ".dockerignore"] = ignore
        return files
    if kind == "workflow":
        from cannery.pydeps import ci_requirements
        from cannery.render.actions import load_pins
        from cannery.render.workflow import (
            lock_update_paths_file,
            lock_update_paths_text,
            render_workflows,
            requirements_text,
        )

        pins = ci_requirements(cat, ctx.lock.ci)
        texts = render_workflows(
            cat, ctx.specs(), load_pins(), catalog_file=ctx.catalog_file,
            lock_file="cannery.lock", ci_pins=pins,
        )
        # the main workflow, then the reusable ones beside it (out_path: beside that)
        files = {(ctx.root / rel if out_path is None else
                  out_path if rel == cat.ci.workflow else out_path.parent / Path(rel).name): text
                 for rel, text in texts.items()}
        if pins is not None:  # the hashed pins the workflow's jobs install cannery from
            where = (out_path.parent if out_path is not None else ctx.root)
            name = cat.ci.requirements if out_path is None else Path(cat.ci.requirements).name
            files[where / name] = requirements_text(cat, pins)
        if cat.ci.schedule and cat.ci.lock_update:  # what the lock-update jobs may change
            rel = lock_update_paths_file(cat)
            where = out_path.parent / Path(rel).name if out_path is not None else ctx.root / rel
            files[where] = lock_update_paths_text(cat, ctx.specs(), "cannery.lock",
                                                  ctx.catalog_file)
        return files
    if kind == "bake":
        from cannery.render.bake import render_bake

        return {out_path or ctx.root / cat.ci.bake: render_bake(ctx.specs(), ctx.dockerfiles())}
    if kind == "docs":
        from cannery.render.docs import render_docs

        text = render_docs(ctx.specs(), ctx.dockerfiles(), cat.ci.docs, cat.catalog.name)
        tags = out_path or ctx.root / cat.ci.docs
        return {tags: text, **overview_files(ctx, tags.parent / OVERVIEWS, pushed)}
    raise InputError(f"unknown render kind {kind!r} (known: {', '.join(KINDS)})")


def overview_files(
    ctx: Context, where: Path, pushed: Mapping[str, Pushed] | None
) -> dict[Path, str]:
    """Per repository: OVERVIEW.md, description.md (the registry page's full description) and
    short.txt (Docker Hub's short description), in ``where/REPOSITORY``."""
    from cannery.render.overview import (
        by_repository,
        directory_name,
        render_description,
        render_overview,
        render_short,
    )

    catalog_file = ctx.catalog_file or "the embedded catalog"
    files: dict[Path, str] = {}
    for repository, specs in by_repository(ctx.specs()).items():
        directory = where / directory_name(repository)
        overview = directory / "OVERVIEW.md"
        shown = overview.relative_to(ctx.root) if overview.is_relative_to(ctx.root) else overview
        source = specs[0].source.rstrip("/")
        url = (f"{source}/blob/HEAD/{shown.as_posix()}" if source.startswith("https://github.com/")
               else f"{shown.as_posix()} in {source}")
        files[overview] = render_overview(repository, specs, catalog_file, pushed)
        files[directory / "description.md"] = render_description(
            repository, specs, catalog_file, url)
        files[directory / "short.txt"] = render_short(specs)
    return files


def read_pushed(ctx: Context, ca_cert: Path | None) -> dict[str, Pushed]:
    """Each image's index digest and per-platform compressed size, as its first registry holds
    it under its tag (an image not pushed there is left out). Every manifest read is checked
    against its digest by the client."""
    from cannery.oci import Credentials, OCIClient
    from cannery.oci.client import NotFound
    from cannery.oci.manifest import (
        MalformedManifest,
        parse_index,
        parse_manifest,
        platform_string,
    )
    from cannery.oci.reference import Reference
    from cannery.render.overview import Pushed
    from cannery.tls import ssl_context

    out: dict[str, Pushed] = {}
    from cannery.oci.auth import push_host

    creds = Credentials(env_host=push_host([s.repository for s in ctx.specs()]))
    with OCIClient(ssl_context(ca_cert), credentials=creds) as client:
        for spec in ctx.specs():
            ref = Reference.parse(f"{spec.repository}:{spec.tag}")
            try:
                body, index = client.get_manifest(ref)
                children, _ = parse_index(body, str(ref))
                sizes = []
                for child in children:
                    platform = platform_string(child.platform)
                    if platform is None or platform not in spec.platforms:
                        continue  # an attestation, or a platform the catalog no longer lists
                    manifest, _ = client.get_manifest(ref.with_digest(child.digest))
                    config, layers = parse_manifest(manifest, f"{ref}@{child.digest}")
                    sizes.append((platform, config.size + sum(layer.size for layer in layers)))
            except NotFound:
                continue
            except MalformedManifest as exc:
                raise InputError(f"{ref}: {exc}") from None
            out[spec.name] = Pushed(index.digest, tuple(sorted(sizes)))
    return out


def _stale(files: dict[Path, str]) -> list[Path]:
    """The files on disk that differ from their rendering, each shown as a diff (or why it
    cannot be: missing, not a regular file, far larger than the rendering). Read as regular
    files only and within 1 MiB past the rendering's size: a FIFO or a symlink to /dev/zero
    committed in a rendered file's place is a difference, never a hang."""
    stale = []
    for path, text in files.items():
        current: str | None = None
        try:
            current = read_regular_file(path, limit=len(text.encode()) + (1 << 20)).decode()
        except FileNotFoundError:
            problem = "missing"
        except (NotRegularFile, OverLimit) as exc:
            problem = exc.message.removeprefix(f"{path}: ")
        except (OSError, UnicodeDecodeError) as exc:
            problem = f"cannot be read ({exc})"
        if current == text:
            continue
        stale.append(path)
        if current is None:
            err.print(f"{path}: {problem}", markup=False)
            continue
        diff = difflib.unified_diff(
            text.splitlines(True), current.splitlines(True),
            f"{path} (rendered)", f"{path} (on disk)",
        )
        err.print("".join(diff), markup=False, end="")
    return stale


def write_or_check(files: dict[Path, str], check: bool, command: str) -> int:
    if check:
        stale = _stale(files)
        if stale:
            raise CheckFailed(
                f"{len(stale)} file(s) differ from the catalog: "
                + ", ".join(str(p) for p in stale)
                + f"; run `{command}` to rewrite them"
            )
        out.print(f"{len(files)} rendered file(s) up to date", markup=False)
        return 0
    atomic_write_many(files)
    for path in files:
        out.print(f"wrote {path}", markup=False)
    return 0


def render_cmd(
    kinds: list[str],
    catalog: Path | None,
    lock: Path | None,
    check: bool,
    out_path: Path | None = None,
    images: list[str] | None = None,
    locked: bool = False,
    from_registry: bool = False,
    ca_cert: Path | None = None,
) -> int:
    """Render ``kinds`` (all when empty); every file is written, or none. ``locked``: exit 2
    naming each unlocked input instead of rendering a file that fails closed.
    ``from_registry``: the docs give each image's digest and sizes, read from its registry."""
    ctx = context(catalog, lock)
    if locked:
        require_locked(ctx.specs(images))
    pushed = read_pushed(ctx, ca_cert) if from_registry else None
    files: dict[Path, str] = {}
    for kind in kinds or KINDS:
        files.update(render_kind(kind, ctx, out_path, images, pushed))
    shown = "cannery render" + (f" {kinds[0]}" if len(kinds) == 1 else "")
    if catalog is not None:
        shown += f" --catalog {catalog}"
    if from_registry:
        shown += " --from-registry"
    return write_or_check(files, check, shown)


def render_dockerfile_cmd(
    images: list[str] | None, catalog: Path | None, lock: Path | None, out_dir: Path | None,
    check: bool,
    locked: bool = False,
) -> int:
    ctx = context(catalog, lock)
    if locked:
        require_locked(ctx.specs(images))
    files = render_kind("dockerfile", ctx, out_dir, images)
    if check:
        return write_or_check(files, True, "cannery render dockerfile")
    atomic_write_many(files)
    for path, spec in zip(files, ctx.specs(images), strict=False):
        notes = [f"{len(spec.unlocked())} unlocked inputs"] if spec.unlocked() else []
        if spec.unpinned():
            notes.append("Python dependencies unpinned")
        note = f" ({', '.join(notes)})" if notes else ""
        out.print(f"wrote {path}{note}", markup=False)
    return 0


def refresh_actions_cmd(data: Path | None, base: str, allow_major: bool) -> int:
    from cannery.render.actions import data_path, dump_pins, load_pins, refresh
    from cannery.util.fs import atomic_write

    path = data or data_path()
    before = load_pins(path)
    after = refresh(before, base, allow_major)
    for action in sorted(after):
        old, new = before[action], after[action]
        change = "unchanged" if old == new else f"{old.version} {old.sha[:12]} -> "
        if old != new:
            change += f"{new.version} {new.sha[:12]}"
        out.print(f"{action}: {change}", markup=False)
    atomic_write(path, dump_pins(after))
    return 0
