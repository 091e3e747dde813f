"""The cannery command line. Each FatalError kind maps to its exit status; no tracebacks
unless --debug."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from cannery import __version__
from cannery.errors import FatalError

app = typer.Typer(
    name="cannery",
    help="Build, lock and lint container images for accelerator ML stacks (Ascend CANN first).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
catalog_app = typer.Typer(help="Inspect and check a catalog.", no_args_is_help=True)
render_app = typer.Typer(
    help="Render files from the catalog: with no kind, every kind (Dockerfiles, the CI "
    "workflow, docker-bake.json, the tags doc), at the paths of the catalog's ci table.",
    invoke_without_command=True,
)
app.add_typer(catalog_app, name="catalog")
app.add_typer(render_app, name="render")

CatalogArg = Annotated[
    Optional[Path],  # noqa: UP045 - typer needs Optional on 3.10
    typer.Argument(help="Catalog TOML (default: the embedded catalog)", show_default=False),
]
CatalogOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option("--catalog", "-c", help="Catalog TOML (default: the embedded catalog)"),
]
LockOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option("--lock", help="Lock file (default: cannery.lock beside the catalog, or ./)"),
]

_debug = False


def _print_version(value: bool) -> None:
    if value:
        print(f"cannery {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks and commands.")] = False,
    version: Annotated[
        bool,
        typer.Option("--version", help="Print the version.", is_eager=True,
                     callback=_print_version),
    ] = False,
) -> None:
    global _debug
    _debug = debug
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING, format="%(name)s: %(message)s"
    )


@catalog_app.command("validate")
def catalog_validate(catalog: CatalogArg = None) -> None:
    """Validate a catalog: schema, references, compatibility table."""
    from cannery.commands.validate import validate

    raise typer.Exit(validate(catalog))


@app.command("plan")
def plan(
    catalog: CatalogArg = None,
    lock: LockOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    image: Annotated[Optional[list[str]], typer.Option("--image", "-i")] = None,  # noqa: UP045
) -> None:
    """Show the fully resolved images: tag, base, toolkit, SoC, platforms, pinned components."""
    from cannery.commands.plan import plan_cmd

    raise typer.Exit(plan_cmd(catalog, lock, as_json, image))


CheckOpt = Annotated[
    bool, typer.Option("--check", help="Write nothing; exit 1 listing files that differ.")
]
OutFileOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option("--out", "-o", help="Output file (default: the catalog's ci table)"),
]


@render_app.callback()
def render_all(
    ctx: typer.Context, catalog: CatalogOpt = None, lock: LockOpt = None, check: CheckOpt = False
) -> None:
    """Render every kind (or the one named) from the catalog."""
    if ctx.invoked_subcommand is None:
        from cannery.commands.render import render_cmd

        raise typer.Exit(render_cmd([], catalog, lock, check))


@render_app.command("dockerfile")
def render_dockerfile(
    images: Annotated[Optional[list[str]], typer.Argument(help="Images (default: all)")] = None,  # noqa: UP045
    catalog: CatalogOpt = None,
    lock: LockOpt = None,
    out: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--out", "-o", help="Output directory (default: the catalog's [ci] "
                     "dockerfiles, beside the catalog; ./dockerfiles for the embedded one)"),
    ] = None,
    check: CheckOpt = False,
) -> None:
    """Render one Dockerfile per image, for all of its platforms."""
    from cannery.commands.render import render_dockerfile_cmd

    raise typer.Exit(render_dockerfile_cmd(images, catalog, lock, out, check))


def _render_one(kind: str, catalog: Path | None, lock: Path | None, out: Path | None,
                check: bool) -> None:
    from cannery.commands.render import render_cmd

    raise typer.Exit(render_cmd([kind], catalog, lock, check, out))


@render_app.command("workflow")
def render_workflow(
    catalog: CatalogOpt = None, lock: LockOpt = None, out: OutFileOpt = None,
    check: CheckOpt = False,
) -> None:
    """Render the GitHub Actions workflow that builds, merges and verifies every image."""
    _render_one("workflow", catalog, lock, out, check)


@render_app.command("bake")
def render_bake(
    catalog: CatalogOpt = None, lock: LockOpt = None, out: OutFileOpt = None,
    check: CheckOpt = False,
) -> None:
    """Render docker-bake.json: a target per image and per (image, platform)."""
    _render_one("bake", catalog, lock, out, check)


@render_app.command("docs")
def render_docs(
    catalog: CatalogOpt = None, lock: LockOpt = None, out: OutFileOpt = None,
    check: CheckOpt = False,
) -> None:
    """Render the supported-tags Markdown table."""
    _render_one("docs", catalog, lock, out, check)


@render_app.command("refresh-actions")
def render_refresh_actions(
    data: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--data", help="Pins file (default: the one inside this package)"),
    ] = None,
    base: Annotated[
        str, typer.Option("--base", help="Where action repositories live")
    ] = "https://github.com",
    major: Annotated[
        bool, typer.Option("--major", help="Allow a new major version")
    ] = False,
) -> None:
    """Re-pin the actions rendered files use to the newest release tag's commit (needs network)."""
    from cannery.commands.render import refresh_actions_cmd

    raise typer.Exit(refresh_actions_cmd(data, base, major))


@app.command("lock")
def lock(
    catalog: CatalogArg = None,
    lock: LockOpt = None,
    update: Annotated[
        Optional[list[str]],  # noqa: UP045
        typer.Option(
            "--update", help="Re-resolve this base/toolkit/component ('all' for every one)"
        ),
    ] = None,
    ca_cert: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--ca-cert", help="Extra CA certificate to trust (env: CANNERY_CA_CERT)"),
    ] = None,
) -> None:
    """Resolve every moving reference (tags, branches, URLs) into cannery.lock."""
    from cannery.commands.lock import lock_cmd

    raise typer.Exit(lock_cmd(catalog, lock, update, ca_cert))


CaCertOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option("--ca-cert", help="Extra CA certificate to trust (env: CANNERY_CA_CERT)"),
]


@app.command("build")
def build(
    images: Annotated[Optional[list[str]], typer.Argument(help="Images (default: all)")] = None,  # noqa: UP045
    catalog: CatalogOpt = None,
    lock: LockOpt = None,
    platform: Annotated[
        Optional[list[str]],  # noqa: UP045
        typer.Option("--platform", help="Build only this platform (repeatable); no tag moves"),
    ] = None,
    backend: Annotated[
        str, typer.Option("--backend", help="buildah (daemonless) or buildx (BuildKit)")
    ] = "buildah",
    push: Annotated[
        bool, typer.Option("--push", help="Push to the catalog's registry, by digest, then tag")
    ] = False,
    output: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            "--output",
            help="oci:DIR: write a multi-arch OCI image layout, no registry "
            "(default without --push: oci:cannery-images)",
        ),
    ] = None,
    tag_suffix: Annotated[str, typer.Option("--tag-suffix", help="Appended to each tag")] = "",
    builder: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--builder", help="buildx builder (remote or Kubernetes BuildKit)"),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Rebuild platforms whose inputs are unchanged")
    ] = False,
    locked: Annotated[
        bool, typer.Option("--locked", help="Fail if cannery.lock would change (for CI)")
    ] = False,
    frozen: Annotated[
        bool, typer.Option("--frozen", help="Never resolve: unlocked inputs are an error")
    ] = False,
    ca_cert: CaCertOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary")] = False,
    digest_dir: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(
            "--digest-dir",
            help="Write each pushed platform's descriptor here and move no tag "
            "(with --merge-only: read them, merge, tag)",
        ),
    ] = None,
    merge_only: Annotated[
        bool,
        typer.Option("--merge-only", help="Merge descriptors from --digest-dir and tag"),
    ] = False,
    network: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--network", help="Network mode for RUN steps (e.g. host)"),
    ] = None,
    log_dir: Annotated[
        Path, typer.Option("--log-dir", help="One build log per image and platform")
    ] = Path(".cannery/logs"),
) -> None:
    """Build each platform, push it by digest, merge one index, then move the tag."""
    from cannery.commands.build import BuildRequest, build_cmd

    raise typer.Exit(
        build_cmd(
            BuildRequest(
                images=images,
                catalog=catalog,
                lock=lock,
                platforms=platform,
                backend=backend,
                push=push,
                output=output,
                tag_suffix=tag_suffix,
                builder=builder,
                force=force,
                locked=locked,
                frozen=frozen,
                ca_cert=ca_cert,
                as_json=as_json,
                digest_dir=digest_dir,
                merge_only=merge_only,
                network=network,
                log_dir=log_dir,
            )
        )
    )


@app.command("verify")
def verify(
    ref: Annotated[str, typer.Argument(help="Pushed image: REGISTRY/REPO:TAG or @DIGEST")],
    catalog: CatalogOpt = None,
    lock: LockOpt = None,
    image: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--image", help="Catalog image to check against (default: by tag)"),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the checks as JSON")] = False,
    ca_cert: CaCertOpt = None,
    runtime: Annotated[
        bool,
        typer.Option("--runtime/--no-runtime", help="Run the in-container checks (buildah)"),
    ] = True,
) -> None:
    """Check a pushed image: platforms, config env, labels, then env and imports at runtime."""
    from cannery.commands.verify import verify_cmd

    raise typer.Exit(verify_cmd(ref, catalog, lock, image, as_json, ca_cert, runtime))


@app.command(
    "lint",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True,
                      "help_option_names": []},
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


def main(argv: list[str] | None = None) -> None:
    try:
        rc = app(args=argv, standalone_mode=False)
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
        print(
            f"cannery: internal error: {type(exc).__name__}: {exc} (rerun with --debug)",
            file=sys.stderr,
        )
        sys.exit(3)
    sys.exit(rc if isinstance(rc, int) else 0)
