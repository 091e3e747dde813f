"""cannery status: every image of the catalog, in every registry it is published to, against
what the current catalog and lock would build; exit 1 unless every entry is fresh."""

from __future__ import annotations

import json
from pathlib import Path

from rich import box
from rich.table import Table
from rich.text import Text

from cannery.builder.jobs import plan_build
from cannery.builder.registries import publish_credentials
from cannery.commands.common import checkout_for, load_with_lock, out, select
from cannery.oci import OCIClient
from cannery.plan import plan
from cannery.render.dockerfile import render_dockerfile
from cannery.tls import ssl_context
from cannery.util.fs import atomic_write
from cannery.verify.status import FamilyStatus, family_status
from cannery.verify.status_report import (
    ALIAS_COLUMNS,
    TABLE_COLUMNS,
    alias_rows,
    status_json,
    status_markdown,
    summary,
    table_rows,
)

_STYLE = {"fresh": "green", "stale": "yellow", "diverged": "red", "missing": "red"}


def status_cmd(
    images: list[str] | None,
    catalog: Path | None,
    lock: Path | None,
    as_json: bool,
    markdown: Path | None,
    ca_cert: Path | None,
    workers: int,
) -> int:
    loaded, lk, _ = load_with_lock(catalog, lock, quiet=as_json)
    specs = plan(loaded.catalog, lk, select(loaded, images))
    # An image that copies the checkout is judged by the commit status runs in, as verify does.
    checkout = checkout_for(specs, None, catalog, quiet=as_json)
    jobs = [plan_build(s, render_dockerfile(s), lk, checkout=checkout) for s in specs]
    with OCIClient(ssl_context(ca_cert), credentials=publish_credentials(jobs)) as client:
        status = family_status(client, jobs, lk, workers)
    if markdown is not None:
        atomic_write(markdown, status_markdown(status, loaded.catalog.catalog.name))
    if as_json:
        out.print_json(json.dumps(status_json(status)))
    else:
        _print_table(status)
    return 0 if status.ok else 1


def _print_table(status: FamilyStatus) -> None:
    # Cells are Text, not markup: a detail quotes what a registry answered. Narrow columns do
    # not wrap; the detail takes what is left of the terminal.
    table = Table(title="images", title_justify="left", box=box.SIMPLE_HEAD)
    for name in TABLE_COLUMNS:
        table.add_column(name, no_wrap=name != "detail", overflow="fold")
    for row in table_rows(status):
        table.add_row(*_cells(row, TABLE_COLUMNS.index("state")))
    out.print(table)
    aliases = alias_rows(status)
    if aliases:
        atable = Table(title="aliases", title_justify="left", box=box.SIMPLE_HEAD)
        for name in ALIAS_COLUMNS:
            atable.add_column(name, no_wrap=name != "detail", overflow="fold")
        for row in aliases:
            atable.add_row(*_cells(row, ALIAS_COLUMNS.index("state")))
        out.print(atable)
    out.print(summary(status), markup=False)


def _cells(row: tuple[str, ...], state: int) -> list[Text]:
    return [Text(c, style=_STYLE[c] if n == state else "") for n, c in enumerate(row)]
