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
from cannery.errors import FatalError

# Commands in the order a user needs them; a command not listed here comes after these.
WORKFLOW = ("catalog", "plan", "lock", "render", "build", "verify", "lint", "schema")


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
render_app = typer.Typer(help="Render files from the catalog.", no_args_is_help=True)
app.add_typer(catalog_app, name="catalog")
app.add_typer(render_app, name="render")

# The shared shape of every command that works on images: IMAGE… positional, then options.
# metavar="" on flags keeps typer from printing a type such as <bool> in help.
ImagesArg = Annotated[
    Optional[list[str]],  # noqa: UP045 - typer needs Optional on 3.10
    typer.Argument(
        help="Images to work on (default: every image in the catalog)",
        metavar="IMAGE",
        show_default=False,
    ),
]
CatalogPathArg = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Argument(
        help="Catalog TOML (default: the embedded catalog)", metavar="[PATH]", show_default=False
    ),
]
CatalogOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option(
        "--catalog", "-c", help="Catalog TOML (default: the embedded catalog)", metavar="PATH"
    ),
]
LockOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option(
        "--lock",
        help="Lock file (default: cannery.lock beside the catalog, or in the current directory)",
        metavar="PATH",
    ),
]
LockedOpt = Annotated[
    bool,
    typer.Option(
        "--locked",
        help="Exit 2, naming each one, if any input is not pinned by the lock (for CI).",
        metavar="",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.", metavar="")]
CaCertOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option(
        "--ca-cert",
        help="Extra CA certificate to trust, added to the system's (env: CANNERY_CA_CERT)",
        metavar="FILE",
    ),
]

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
def catalog_validate(catalog: CatalogPathArg = None) -> None:
    """Validate a catalog: schema, references, compatibility table."""
    from cannery.commands.validate import validate

    raise typer.Exit(validate(catalog))


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
            help="Re-resolve this base, toolkit or component ('all' for every one); repeatable",
            metavar="NAME",
        ),
    ] = None,
    ca_cert: CaCertOpt = None,
) -> None:
    """Resolve tags, branches, URLs and Python dependencies into cannery.lock."""
    from cannery.commands.lock import lock_cmd

    raise typer.Exit(lock_cmd(catalog, lock, update, ca_cert, images))


@render_app.command("dockerfile")
def render_dockerfile(
    images: ImagesArg = None,
    catalog: CatalogOpt = None,
    lock: LockOpt = None,
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Output directory", metavar="DIR")
    ] = Path("dockerfiles"),
    check: Annotated[
        bool,
        typer.Option("--check", help="Write nothing; exit 1 if files on disk differ.", metavar=""),
    ] = False,
    locked: LockedOpt = False,
) -> None:
    """Render one Dockerfile per image, for all of its platforms."""
    from cannery.commands.render import render_dockerfile_cmd

    raise typer.Exit(render_dockerfile_cmd(images, catalog, lock, out, check, locked))


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
