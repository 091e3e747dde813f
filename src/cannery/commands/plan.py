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
        "tags": list(spec.tags),
        "tag_fields": dict(spec.tag_fields),
        "base": {"image": spec.base_image, "digest": spec.base_digest,
                 "catalog_image": spec.built_on},
        "toolkit": {
            "version": spec.toolkit.version,
            "provided": spec.toolkit.provided,
            "install": spec.toolkit.install,
            "downloads": [asdict(d) for d in spec.toolkit.downloads],
        } if spec.toolkit else None,
        "soc": spec.soc,
        "family": spec.family,
        "python": spec.python,
        "python_install": {
            "version": spec.python_install.version,
            "install": spec.python_install.install,
            "downloads": [asdict(d) for d in spec.python_install.downloads],
        } if spec.python_install else None,
        "stages": [st.name for st in spec.stages],
        "platforms": list(spec.platforms),
        "components": [
            {
                "name": c.name,
                "kind": "git" if c.git else "pip" if c.pip else "path" if c.path else "wheel",
                "version": c.version,
                "pin": c.label_version,
                "locked": not ((c.git and not c.git.commit) or any(not w.sha256 for w in c.wheels))
                and (spec.python_pinned or not c.pip),
                **({"job_limit": c.jobs_limit} if c.jobs_limit else {}),
            }
            for c in spec.components
        ],
        "unlocked": spec.unlocked(),
        "unpinned": spec.unpinned(),
        "python_locked": {a: list(r) for a, r in spec.python_locked},
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
        table.add_column("source", overflow="fold")
        table.add_column("ref", overflow="fold")
        table.add_column("pinned to", no_wrap=True)
        image, _, tag = spec.base_image.rpartition(":")
        unpinned = "UNLOCKED" if spec.built_on is None else f"built first (image {spec.built_on})"
        table.add_row("base", image, tag, _short(spec.base_digest) or unpinned)
        tk = spec.toolkit
        if tk is None:
            table.add_row("toolkit", "none", "", "")
        elif not tk.in_image:
            table.add_row("toolkit", "the host's, mounted at run time", tk.version, "")
        elif tk.install:
            locked = all(d.sha256 for d in tk.downloads)
            pinned = f"sha256 ×{len(tk.downloads)}" if locked else "UNLOCKED"
            table.add_row("toolkit", f"CANN installers ({len(tk.downloads)})", tk.version, pinned)
        else:
            table.add_row("toolkit", "in the base image", tk.version, "")
        if spec.soc is not None:
            table.add_row("soc", f"{spec.family}, chip {spec.chip}", spec.soc, "")
        py = spec.python_install
        if py is not None and py.install == "source":
            locked = all(d.sha256 for d in py.downloads)
            table.add_row("python", "source tarball (builder stage)", py.version,
                          "sha256" if locked else "UNLOCKED")
        elif py is not None:
            table.add_row("python", "distribution packages", py.version, "")
        for st in spec.stages:
            table.add_row(f"stage {st.name}", st.base_image if st.own_base else "the base",
                          ", ".join(st.outputs),
                          "" if not st.own_base else (_short(st.base_digest) or "UNLOCKED"))
        table.add_row("platforms", ", ".join(spec.platforms), "", "")
        for c in spec.components:
            name = c.name + (f" (jobs≤{c.jobs_limit})" if c.jobs_limit else "")
            if c.git:
                source = c.git.url.removeprefix("https://").removesuffix(".git")
                ref = c.version or ("(commit)" if c.git.ref == c.git.commit else c.git.ref)
                pin = _short(c.git.commit) or "UNLOCKED"
            elif c.pip:
                source, ref = "pip", " ".join(c.pip)
                pin = "sha256 (lock)" if spec.python_pinned else "UNPINNED"
            elif c.path is not None:
                source, ref, pin = f"checkout ({c.path})", c.version or "", "commit at build"
            else:
                source, ref = "wheel", c.version or ""
                pin = "sha256" if all(w.sha256 for w in c.wheels) else "UNLOCKED"
            table.add_row(name, source, ref, pin)
        if spec.python_pinned:
            n = ", ".join(f"{a} {len(r)}" for a, r in spec.python_locked)
            table.add_row("python deps", "cannery.lock", f"{n} packages", "sha256 each")
        elif spec.pip_tools or spec.components:  # an image with no Python package has none
            table.add_row("python deps", "resolved at build time", "", "UNPINNED")
        fields = " ".join(f"{f}={v}" for f, v in spec.tag_fields)
        table.add_row("tags", "\n".join(spec.tags), fields, "")
        out.print(table)
    return 0


def _short(digest: str | None) -> str:
    """A digest or commit, shortened for a table (full values are in --json)."""
    if not digest:
        return ""
    return digest[:19] if digest.startswith("sha256:") else digest[:12]
