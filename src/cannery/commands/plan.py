from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.table import Table

from cannery.commands.common import load_with_lock, out, select
from cannery.plan import ImageSpec, plan


def _summary(spec: ImageSpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "reference": spec.reference,
        "tag": spec.tag,
        "base": {"image": spec.base_image, "digest": spec.base_digest},
        "toolkit": {
            "version": spec.toolkit.version,
            "install": spec.toolkit.install,
            "downloads": [asdict(d) for d in spec.toolkit.downloads],
        },
        "soc": spec.soc,
        "family": spec.family,
        "python": spec.python,
        "platforms": list(spec.platforms),
        "components": [
            {
                "name": c.name,
                "kind": "git" if c.git else ("pip" if c.pip else "wheel"),
                "version": c.version,
                "pin": c.label_version,
                "locked": not ((c.git and not c.git.commit) or any(not w.sha256 for w in c.wheels)),
                **({"job_limit": c.jobs_limit} if c.jobs_limit else {}),
            }
            for c in spec.components
        ],
        "unlocked": spec.unlocked(),
        "inputs": spec.inputs_digest(),
    }


def plan_cmd(
    catalog: Path | None, lock: Path | None, as_json: bool, images: list[str] | None = None
) -> int:
    loaded, lk, _ = load_with_lock(catalog, lock, quiet=as_json)
    specs = plan(loaded.catalog, lk, select(loaded, images))
    if as_json:
        print(
            json.dumps(
                {"catalog": loaded.path, "images": [_summary(s) for s in specs]},
                indent=2,
                sort_keys=False,
            )
        )
        return 0
    for spec in specs:
        table = Table(
            title=f"{spec.name} → {spec.reference}",
            title_justify="left",
            show_header=True,
            header_style="bold",
        )
        table.add_column("input", no_wrap=True)
        table.add_column("value", overflow="fold")
        table.add_column("locked")
        table.add_row("base", spec.base_image, spec.base_digest[:19] if spec.base_digest else "no")
        tk = spec.toolkit
        tk_locked = all(d.sha256 for d in tk.downloads)
        table.add_row(
            "toolkit",
            f"CANN {tk.version}" + ("" if tk.install else " (in base)"),
            "yes" if tk_locked else "no",
        )
        table.add_row("soc", f"{spec.soc} ({spec.family}, chip {spec.chip})", "")
        table.add_row("platforms", ", ".join(spec.platforms), "")
        for c in spec.components:
            value = c.label_version
            if c.git:
                value = f"{c.git.url} {c.git.ref}"
            limit = f" (jobs≤{c.jobs_limit})" if c.jobs_limit else ""
            locked = "yes"
            if c.git and not c.git.commit:
                locked = "no"
            elif c.git and c.git.commit and c.git.commit != c.git.ref:
                locked = c.git.commit[:12]
            table.add_row(c.name + limit, value, locked)
        out.print(table)
    return 0
