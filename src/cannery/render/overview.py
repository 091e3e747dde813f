"""Catalog + lock (+ the last push, when read) → per repository an OVERVIEW.md, the full
description registries show beside a repository, and Docker Hub's short description.

Nothing here states a version the lock does not hold: a component's version is its locked
commit, its locked Python pin or its wheel's locked sha256, and an input not locked yet says
so. Digests and sizes are the registry's, read only when asked (``--from-registry``); without
them those columns are left out rather than guessed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cannery import __version__
from cannery.plan import ComponentSpec, ImageSpec
from cannery.render.docs import table_cell
from cannery.util.pynames import requirement_name
from cannery.util.sizes import human_size

# Docker Hub refuses a short description over 100 characters and a full description over
# 25,000 (its API answers 400); quay documents no limit for its description, so it gets the
# same cap as Docker Hub's full description.
SHORT_LIMIT = 100
FULL_LIMIT = 25_000


@dataclass(frozen=True)
class Pushed:
    """What the registry holds for an image's tag: the index digest, and per platform the
    compressed bytes a pull downloads (config and layers)."""

    digest: str
    sizes: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class RepositoryDocs:
    """The files of one repository, relative to the docs directory."""

    directory: str
    overview: str
    description: str
    short: str


def by_repository(specs: Sequence[ImageSpec]) -> dict[str, list[ImageSpec]]:
    """The images of each repository they are first published to, in catalog order."""
    out: dict[str, list[ImageSpec]] = {}
    for spec in specs:
        out.setdefault(spec.repository, []).append(spec)
    return out


def directory_name(repository: str) -> str:
    """A file name for ``repository``: quay.io/ascend/cann → quay.io_ascend_cann."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", repository)


def _python_pin(spec: ImageSpec, package: str) -> str | None:
    """The version the lock pins ``package`` to for the image's first platform, if it does."""
    if not spec.python_locked:
        return None
    wanted = requirement_name(package)
    for line in spec.python_locked[0][1]:
        pin = line.split(" ", 1)[0]
        if requirement_name(pin) == wanted and "==" in pin:
            return pin.split("==", 1)[1]
    return None


def component_version(spec: ImageSpec, comp: ComponentSpec) -> str:
    """What the lock says of ``comp`` in ``spec``: never a version the lock does not hold."""
    if comp.path is not None:
        return f"{comp.name} (this repository's checkout)"
    if comp.git is not None:
        if comp.git.commit is None:
            return f"{comp.name} {comp.git.ref} (not locked)"
        ref = "" if comp.git.ref == comp.git.commit else f" {comp.git.ref}"
        return f"{comp.name}{ref} @ {comp.git.commit[:12]}"
    if comp.pip:
        pins = []
        for spec_text in comp.pip:
            name = requirement_name(spec_text)
            version = _python_pin(spec, name)
            pins.append(f"{name} {version}" if version else f"{name} (not locked)")
        return ", ".join(pins)
    digests = sorted({w.sha256[:12] if w.sha256 else "not locked" for w in comp.wheels})
    return f"{comp.name} (wheel sha256 {', '.join(digests)})"


def _toolkit(spec: ImageSpec) -> str:
    tk = spec.toolkit
    if tk is None:
        return "–"
    if not tk.in_image:
        return f"{tk.version} (the host's)"
    locked = all(d.sha256 for d in tk.downloads)
    return tk.version if locked or not tk.install else f"{tk.version} (installer not locked)"


def _rows(specs: Sequence[ImageSpec], pushed: Mapping[str, Pushed] | None) -> list[str]:
    driver = any(s.host and s.host.driver for s in specs)
    firmware = any(s.host and s.host.firmware for s in specs)
    head = ["Tags", "Chip", "OS", "Architectures", "CANN", "Python", "Components"]
    if driver:
        head.append("Driver ≥")
    if firmware:
        head.append("Firmware ≥")
    if pushed is not None:
        head.append("Compressed size")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in specs:
        cells = [
            "<br>".join(f"`{table_cell(t)}`" for t in s.tags),
            table_cell(f"{s.chip} ({s.soc})" if s.soc else s.chip or "–"),
            table_cell(f"{s.os} {s.os_version}"),
            ", ".join(p.removeprefix("linux/") for p in s.platforms),
            table_cell(_toolkit(s)),
            s.python or "–",
            "<br>".join(table_cell(component_version(s, c)) for c in s.components) or "–",
        ]
        if driver:
            cells.append(table_cell(s.host.driver if s.host and s.host.driver else "–"))
        if firmware:
            cells.append(table_cell(s.host.firmware if s.host and s.host.firmware else "–"))
        if pushed is not None:
            held = pushed.get(s.name)
            cells.append("<br>".join(f"{p.removeprefix('linux/')}: {human_size(n)}"
                                     for p, n in held.sizes) if held else "not pushed")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _generated(catalog_file: str, registry: bool = False) -> str:
    how = "cannery render docs --from-registry" if registry else "cannery render docs"
    source = "its lock and its registry" if registry else "its lock"
    return (f"<!-- Generated by cannery {__version__.split('+')[0]} from {catalog_file} and "
            f"{source}. Do not edit: change the catalog, then run `{how}`. -->")


def _all_locked(specs: Sequence[ImageSpec]) -> bool:
    return not any(s.unlocked() or s.unpinned() for s in specs)


def _locked_sentence(specs: Sequence[ImageSpec]) -> str:
    if _all_locked(specs):
        return ("Every input of every image (the base by digest, commits, installer and wheel "
                "checksums, Python pins with hashes) is locked, and each image's labels record "
                "its toolkit and its components' versions.")
    loose = sum(1 for s in specs if s.unlocked() or s.unpinned())
    return (f"{loose} of these images still have inputs the lock does not hold: the table "
            "says \"not locked\" where a version would be.")


def render_overview(
    repository: str,
    specs: Sequence[ImageSpec],
    catalog_file: str,
    pushed: Mapping[str, Pushed] | None = None,
) -> str:
    first = specs[0]
    mirrors = sorted({t.repository for s in specs for t in s.registries[1:]})
    chips = sorted({s.chip for s in specs if s.chip})
    oses = sorted({f"{s.os} {s.os_version}" for s in specs})
    cann = sorted({s.toolkit.version for s in specs if s.toolkit is not None})
    lines = [
        f"# {repository}",
        "",
        _generated(catalog_file, pushed is not None),
        "",
        f"{len(specs)} image{'s' if len(specs) != 1 else ''} of the `{first.catalog_name}` "
        f"catalog" + (f", CANN {', '.join(cann)}" if cann else "")
        + (f", for {', '.join(chips)}" if chips else "") + f", on {', '.join(oses)}. "
        "Each tag names one multi-architecture index. " + _locked_sentence(specs),
        "",
        "## Pull by digest",
        "",
        "A tag can move; a digest names one image for good. Pull by digest:",
        "",
        "```sh",
    ]
    example = pushed.get(first.name) if pushed else None
    if example is not None:
        lines.append(f"docker pull {repository}@{example.digest}   # {first.tag}")
    else:
        lines += [f"digest=$(skopeo inspect --format '{{{{.Digest}}}}' "
                  f"docker://{repository}:{first.tag})",
                  f"docker pull {repository}@${{digest}}"]
    lines += ["```", ""]
    if mirrors:
        lines += ["The same images, with the same digests, are also published to: "
                  + ", ".join(f"`{m}`" for m in mirrors) + ".", ""]
    if pushed is not None:
        lines += ["## Digests", "", "| Tag | Index digest |", "|---|---|"]
        for s in specs:
            held = pushed.get(s.name)
            digest = f"`{held.digest}`" if held else "not pushed"
            lines.append(f"| `{table_cell(s.tag)}` | {digest} |")
        lines.append("")
    lines += ["## Supported tags", "", *_rows(specs, pushed), ""]
    return "\n".join(lines)


def render_description(
    repository: str, specs: Sequence[ImageSpec], catalog_file: str, overview_url: str
) -> str:
    """The repository page's full description (quay, Docker Hub): the tags table, cut to
    FULL_LIMIT characters with a pointer to the whole overview when it is longer."""
    lines = [f"# {repository}", "", _generated(catalog_file), "",
             f"Every tag, its pinned inputs and how to pull by digest: {overview_url}", ""]
    table = _rows(specs, None)
    kept = lines + table[:2]
    note = f"\n… {{}} more tags: see {overview_url}\n"
    for i, row in enumerate(table[2:]):
        rest = len(table) - 2 - i
        if len("\n".join([*kept, row])) + len(note.format(rest)) > FULL_LIMIT:
            return "\n".join(kept) + note.format(rest)
        kept.append(row)
    return "\n".join(kept) + "\n"


def render_short(specs: Sequence[ImageSpec]) -> str:
    """Docker Hub's short description, at most SHORT_LIMIT characters."""
    cann = sorted({s.toolkit.version for s in specs if s.toolkit is not None})
    chips = sorted({s.chip for s in specs if s.chip})
    text = "Ascend " + (f"CANN {', '.join(cann)} " if cann else "") + "images"
    if chips:
        text += f" for {', '.join(chips)}"
    locked = ", inputs locked" if _all_locked(specs) else ""
    text += f", {len(specs)} tag{'s' if len(specs) != 1 else ''}{locked}"
    if len(text) > SHORT_LIMIT:
        text = f"Ascend images, {len(specs)} tags{locked}"
    return text[:SHORT_LIMIT] + "\n"
