"""The `cannery ci` commands' command line (cli.py registers ``ci_app``); the work is in
cannery.commands.ci, imported when a command runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

ci_app = typer.Typer(help="What the rendered GitHub Actions workflow runs.",
                     no_args_is_help=True)


def _text(flag: str, help: str) -> object:
    return typer.Option(flag, help=help, metavar="TEXT")


@ci_app.command("plan")
def ci_plan(
    event: Annotated[str, _text("--event", "The event's name (github.event_name)")],
    catalog: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer on 3.10
        "--catalog", "-c", help="Catalog TOML (default: the embedded catalog)",
        metavar="PATH")] = None,
    lock: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        "--lock", help="Lock file (default: cannery.lock beside the catalog)",
        metavar="PATH")] = None,
    ref: Annotated[str, _text("--ref", "The run's ref (GITHUB_REF)")] = "",
    before: Annotated[str, _text("--before", "A push's before SHA (github.event.before)")] = "",
    # (not `images`: every command's `images` is its positional IMAGE… arguments)
    wanted: Annotated[str, _text("--images", "A manual run's input images (words)")] = "",
    tags: Annotated[str, _text("--tags", "A manual run's input tags (words)")] = "",
    changed: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        "--changed", help="The changed paths, one a line (default: ask git)",
        metavar="FILE")] = None,
) -> None:
    """Print what this event builds as $GITHUB_OUTPUT lines: the images, the pull-request
    legs, each group's build legs and merges, in chunks of at most 256 (JSON)."""
    from cannery.commands.ci import Event, ci_plan_cmd
    from cannery.errors import InputError

    paths = None
    if changed is not None:
        try:
            paths = [p for p in changed.read_text(encoding="utf-8").splitlines() if p]
        except OSError as e:
            raise InputError(f"{changed}: {e.strerror}") from None
    raise typer.Exit(ci_plan_cmd(catalog, lock, Event(event, ref, before, wanted, tags, paths)))
