"""The cannery command line. Each FatalError kind maps to its exit status; no tracebacks
unless --debug."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperGroup

from cannery import __version__
from cannery.cli.build import build
from cannery.cli.options import (
    CaCertOpt,
    CatalogOpt,
    CatalogPathArg,
    ImagesArg,
    JsonOpt,
    LockedOpt,
    LockOpt,
    flag,
)
from cannery.cli.verify import verify
from cannery.commands.ci_cli import ci_app
from cannery.errors import FatalError

# Commands in the order a user needs them; a command not listed here comes after these.
WORKFLOW = ("catalog", "plan", "lock", "render", "ci", "build", "verify", "status", "copy",
            "size", "host-check", "lint", "compare", "schema")


class _WorkflowOrder(TyperGroup):
    def list_commands(self, ctx: Any) -> list[str]:
        names = list(self.commands)
        rank = {name: i for i, name in enumerate(WORKFLOW)}
        return sorted(names, key=lambda n: (rank.get(n, len(WORKFLOW)), names.index(n)))


app = typer.Typer(
    name="cannery",
    help="Plan, lock, render, build and verify container images for accelerator ML stacks "
    "(Ascend CANN first) from one catalog, and lint hand-written Dockerfiles and workflows.",
    cls=_WorkflowOrder,
    rich_markup_mode=None,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
catalog_app = typer.Typer(help="Inspect and check a catalog.", no_args_is_help=True)
render_app = typer.Typer(help="Render files from the catalog.")
app.add_typer(catalog_app, name="catalog")
app.add_typer(render_app, name="render")
app.add_typer(ci_app, name="ci")

_debug = False


def _print_version(value: bool) -> None:
    if value:
        print(f"cannery {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show tracebacks and commands.", metavar="")
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print the version.",
            is_eager=True,
            callback=_print_version,
            metavar="",
        ),
    ] = False,
) -> None:
    global _debug
    _debug = debug
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING, format="%(name)s: %(message)s"
    )


@catalog_app.command("validate")
def catalog_validate(path: CatalogPathArg = None, catalog: CatalogOpt = None) -> None:
    """Validate a catalog: schema, references, compatibility table."""
    from cannery.commands.validate import validate

    raise typer.Exit(validate(catalog, path))


@app.command("plan")
def plan(
    images: ImagesArg = None,
    catalog: CatalogOpt = None,
    lock: LockOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the fully resolved images: tag, base, toolkit, SoC, platforms, pinned components."""
    from cannery.commands.plan import plan_cmd

    raise typer.Exit(plan_cmd(catalog, lock, as_json, images))


@app.command("lock")
def lock(
    images: ImagesArg = None,
    catalog: CatalogOpt = None,
    lock: LockOpt = None,
    update: Annotated[
        Optional[list[str]],  # noqa: UP045
        typer.Option(
            "--update",
            help="Re-resolve this base, toolkit, component or image ('python': the Python pins, "
            "'all': everything; a resolved commit prefix stays); repeatable",
            metavar="NAME",
        ),
    ] = None,
    ca_cert: CaCertOpt = None,
) -> None:
    """Resolve tags, branches, URLs and Python dependencies into cannery.lock."""
    from cannery.commands.lock import lock_cmd

    raise typer.Exit(lock_cmd(catalog, lock, update, ca_cert, images))


CheckOpt = Annotated[
    bool,
    typer.Option("--check", help="Write nothing; exit 1 listing files that differ.", metavar=""),
]
OutFileOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option(
        "--out", "-o", help="Output file (default: the catalog's [ci] table)", metavar="FILE"
    ),
]


@render_app.callback(invoke_without_command=True)
def render_all(
    ctx: typer.Context,
    catalog: CatalogOpt = None,
    lock: LockOpt = None,
    check: CheckOpt = False,
    locked: LockedOpt = False,
) -> None:
    """Render every kind (or the one named) from the catalog."""
    if ctx.invoked_subcommand is None:
        from cannery.commands.render import render_cmd

        raise typer.Exit(render_cmd([], catalog, lock, check, locked=locked))


@render_app.command("dockerfile")
def render_dockerfile(
    images: ImagesArg = None,
    catalog: CatalogOpt = None,
    lock: LockOpt = None,
    out: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(
            "--out",
            "-o",
            help="Output directory (default: the catalog's [ci] dockerfiles, beside the "
            "catalog; ./dockerfiles for the embedded one)",
            metavar="DIR",
        ),
    ] = None,
    check: CheckOpt = False,
    locked: LockedOpt = False,
) -> None:
    """Render one Dockerfile per image, for all of its platforms."""
    from cannery.commands.render import render_dockerfile_cmd

    raise typer.Exit(render_dockerfile_cmd(images, catalog, lock, out, check, locked))


def _render_one(
    kind: str, catalog: Path | None, lock: Path | None, out: Path | None, check: bool,
    locked: bool,
) -> None:
    from cannery.commands.render import render_cmd

    raise typer.Exit(render_cmd([kind], catalog, lock, check, out, locked=locked))


def _kind_command(kind: str, doc: str) -> None:
    """`cannery render KIND`: the same options for every single-file kind."""

    def command(
        catalog: CatalogOpt = None,
        lock: LockOpt = None,
        out: OutFileOpt = None,
        check: CheckOpt = False,
        locked: LockedOpt = False,
    ) -> None:
        _render_one(kind, catalog, lock, out, check, locked)

    command.__doc__ = doc
    render_app.command(kind)(command)


_kind_command(
    "workflow", "Render the GitHub Actions workflow that builds, merges and verifies every image, "
    "and the three reusable workflows it calls, beside it."
)
_kind_command("bake", "Render docker-bake.json: a target per image and per (image, platform).")


@render_app.command("docs")
def render_docs(
    catalog: CatalogOpt = None,
    lock: LockOpt = None,
    out: OutFileOpt = None,
    check: CheckOpt = False,
    locked: LockedOpt = False,
    from_registry: Annotated[
        bool,
        typer.Option(
            "--from-registry",
            help="Read each image's digest and per-platform compressed size from its first "
            "registry (else the docs leave them out)",
        ),
    ] = False,
    ca_cert: CaCertOpt = None,
) -> None:
    """Render the supported-tags table, and per repository an OVERVIEW.md, the registry
    page's description and Docker Hub's short description (beside it, in overview/)."""
    from cannery.commands.render import render_cmd

    raise typer.Exit(render_cmd(["docs"], catalog, lock, check, out, locked=locked,
                                from_registry=from_registry, ca_cert=ca_cert))


@render_app.command("refresh-actions")
def render_refresh_actions(
    data: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(
            "--data", help="Pins file (default: the one inside this package)", metavar="FILE"
        ),
    ] = None,
    base: Annotated[
        str, typer.Option("--base", help="Where action repositories live", metavar="URL")
    ] = "https://github.com",
    major: Annotated[
        bool, typer.Option("--major", help="Allow a new major version", metavar="")
    ] = False,
) -> None:
    """Re-pin the actions rendered files use to the newest release tag's commit (needs network)."""
    from cannery.commands.render import refresh_actions_cmd

    raise typer.Exit(refresh_actions_cmd(data, base, major))


# Every command is registered in this module, in this order; build and verify keep their many
# options in a module each.
app.command("build")(build)
app.command("verify")(verify)


@app.command("status")
def status(
    images: ImagesArg = None,
    catalog: CatalogOpt = None,
    lock: LockOpt = None,
    as_json: JsonOpt = False,
    markdown: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--markdown", help="Also write the status as a Markdown page (for the "
                     "docs) to FILE", metavar="FILE"),
    ] = None,
    ca_cert: CaCertOpt = None,
    workers: Annotated[
        int,
        typer.Option("--workers", help="Registry reads side by side", metavar="N", min=1,
                     max=32),
    ] = 8,
) -> None:
    """The family at a glance: for every image, platform and registry (mirrors included),
    whether the tag is there, whether digests agree across registries, whether what is pushed
    was built from the current catalog and lock (fresh) or not (stale, naming the inputs that
    moved), how old its inputs are, and where each alias points. Exit 1 unless all fresh."""
    from cannery.commands.status import status_cmd

    raise typer.Exit(status_cmd(images, catalog, lock, as_json, markdown, ca_cert, workers))


@app.command("copy")
def copy(
    src: Annotated[
        str, typer.Argument(help="Image to copy: REGISTRY/REPO:TAG or @DIGEST", metavar="SRC")
    ],
    dst: Annotated[
        list[str],
        typer.Argument(
            help="Targets: REGISTRY/REPO[:TAG] (no tag: the source's)", metavar="DST..."
        ),
    ],
    docker_media_types: Annotated[
        bool,
        flag(
            "--docker-media-types",
            "Write Docker manifest lists and v2s2 manifests (for registries such as Huawei "
            "SWR that refuse OCI types); converted manifests get new digests",
        ),
    ] = False,
    force: Annotated[
        bool, flag(
            "--force",
            "Move a target's tag even from an index built from a newer lock than SRC's",
        )
    ] = False,
    ca_cert: CaCertOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Copy every platform of an image (and its referrers) by digest, then tag it."""
    from cannery.commands.copy import copy_cmd

    raise typer.Exit(copy_cmd(src, dst, docker_media_types, ca_cert, as_json, force))


@app.command("size")
def size(
    ref: Annotated[str, typer.Argument(help="Image: REGISTRY/REPO:TAG or @DIGEST", metavar="REF")],
    catalog: CatalogOpt = None,
    lock: LockOpt = None,
    image: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--image", help="The catalog image REF is (default: found by repository "
                     "and tag; none found: layers are named from the image's history)",
                     metavar="NAME"),
    ] = None,
    platform: Annotated[
        Optional[list[str]],  # noqa: UP045
        typer.Option("--platform", help="Only this platform (repeatable)", metavar="OS/ARCH"),
    ] = None,
    top: Annotated[int, typer.Option("--top", help="Biggest paths shown per layer",
                                     metavar="N", min=0)] = 3,
    ca_cert: CaCertOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """How big an image is and why: per platform, each layer with the catalog step that made
    it, its compressed and uncompressed size, its biggest paths and the bytes a later layer
    removes or overwrites; then the catalog's size budget. Reads every layer (nothing is
    unpacked). Exit 1 when over budget."""
    from cannery.commands.size import size_cmd

    raise typer.Exit(size_cmd(ref, catalog, lock, image, platform, top, as_json, ca_cert))


@app.command("host-check")
def host_check(
    images: Annotated[
        list[str],
        typer.Argument(help="Images: REGISTRY/REPO:TAG or @DIGEST", metavar="IMAGE...",
                       show_default=False),
    ],
    root: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--root", help="Read the driver and firmware files under this directory "
                     "(another machine's filesystem) instead of /; npu-smi is not run",
                     metavar="DIR"),
    ] = None,
    chip: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--chip", help="The node's chip (910b, a3, 310p, ...), instead of what "
                     "npu-smi says", metavar="CHIP"),
    ] = None,
    platform: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--platform", help="Which image of an index to read (default: this "
                     "machine's, e.g. linux/arm64)", metavar="OS/ARCH"),
    ] = None,
    ca_cert: CaCertOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Will these images run on this node? Compares each image's needs (its labels: chips,
    oldest driver and firmware) with the node's, reading only the image config from the
    registry. Exit 1 when one cannot run, 2 when the node has no NPU driver."""
    from cannery.commands.host_check import host_check_cmd

    raise typer.Exit(host_check_cmd(images, root, chip, platform, ca_cert, as_json))


@app.command(
    "lint",
    context_settings={
        "allow_extra_args": True,
        "ignore_unknown_options": True,
        "help_option_names": [],
    },
    add_help_option=False,
)
def lint(ctx: typer.Context) -> None:
    """Lint Dockerfiles and image-build workflows (see `cannery lint --help`)."""
    from cannery.commands.lint import run

    raise typer.Exit(run(list(ctx.args)))


@app.command("compare")
def compare(
    paths: Annotated[
        Optional[list[str]],  # noqa: UP045
        typer.Argument(
            help="ORIGINAL NEW: two Dockerfiles, two workflows or two directories; with "
            "--catalog, the images to compare (default: every image naming its original)",
            metavar="ORIGINAL NEW | IMAGE",
            show_default=False,
        ),
    ] = None,
    catalog: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--catalog", "-c", help="Compare what this catalog renders (in memory) "
                     "with each image's `original`", metavar="PATH"),
    ] = None,
    original: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--original", help="With --catalog: the checkout the `original` paths "
                     "are relative to", metavar="DIR"),
    ] = None,
    lock: LockOpt = None,
    accepted: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--accepted", help="Accepted differences (default with --catalog: "
                     "compare-accepted.toml beside it)", metavar="FILE"),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Compare hand-written Dockerfiles or workflows with their replacements, per image and
    category; exit 1 on any difference not accepted."""
    from cannery.commands.compare import compare_cmd

    raise typer.Exit(compare_cmd(list(paths or []), catalog, original, lock, accepted, as_json))


@app.command("schema")
def schema() -> None:
    """Print the catalog's JSON Schema (for editors and check-jsonschema)."""
    from cannery.commands.schema import schema_cmd

    raise typer.Exit(schema_cmd())


def _annotation(line: str) -> str:
    """A GitHub Actions ::error line, located when the message starts with file:line."""
    import re

    m = re.match(r"^(?P<file>[^:\s]+):(?P<line>\d+)(?::\d+)?: (?P<msg>.*)$", line)
    text = (m.group("msg") if m else line).replace("%", "%25").replace("\n", "%0A")
    if m:
        return f"::error file={m.group('file')},line={m.group('line')}::{text}"
    return f"::error::{text}"


def _plain_arguments(cmd: Any) -> None:
    """Arguments show their metavar only: typer would add a type such as <list[str]>."""
    for param in cmd.params:
        if param.param_type_name == "argument" and hasattr(param, "display_type_rich"):
            param.display_type_rich = lambda ctx: None
    for sub in getattr(cmd, "commands", {}).values():
        _plain_arguments(sub)


def command() -> Any:
    """The click command behind the typer app, with help text free of type noise."""
    cmd = typer.main.get_command(app)
    _plain_arguments(cmd)
    return cmd


def _crash_log(argv: list[str]) -> Path | None:
    """Write the traceback of the exception being handled to a crash log (as pre-commit does)."""
    import datetime as dt
    import platform
    import traceback

    from cannery.util.cmd import mask

    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    text = (
        f"cannery {__version__}, Python {platform.python_version()} on {platform.platform()}\n"
        f"argv: {mask(' '.join(argv))}\n\n{traceback.format_exc()}"
    )
    for root in (Path(base) / "cannery", Path(tempfile.gettempdir())):
        path = root / f"cannery-crash-{stamp}-{os.getpid()}.log"
        try:
            root.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError:
            continue
        return path
    return None


def main(argv: list[str] | None = None) -> None:
    try:
        rc = command().main(args=argv, prog_name="cannery", standalone_mode=False)
    except FatalError as exc:
        if _debug:
            raise
        from cannery.commands.common import err

        in_actions = os.environ.get("GITHUB_ACTIONS") == "true"
        for line in exc.message.splitlines():
            prefix = "error: " if not line.startswith(("warning", " ")) else ""
            err.print(f"cannery: {prefix}{line}", markup=False)
            if in_actions:
                print(_annotation(line), file=sys.stderr)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.exit(130)
    except Exception as exc:  # click usage errors and friends
        show = getattr(exc, "show", None)
        if callable(show) and hasattr(exc, "exit_code"):  # click's own usage errors
            show()
            sys.exit(2)
        if _debug:
            raise
        log = _crash_log(argv if argv is not None else sys.argv[1:])
        where = f"; details in {log}" if log else " (rerun with --debug)"
        print(f"cannery: internal error: {type(exc).__name__}: {exc}{where}", file=sys.stderr)
        print("cannery: this is a bug in cannery; please report it with that file", file=sys.stderr)
        sys.exit(3)
    sys.exit(rc if isinstance(rc, int) else 0)
