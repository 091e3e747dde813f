"""Before validation: each `extends` resolved into its entry, and the built-in Ascend facts
(SoC families, CANN env tables, the compatibility table) merged in."""

from __future__ import annotations

import copy
from importlib import resources
from typing import Any

from cannery.catalog.collector import MERGED, Collector
from cannery.util import toml
from cannery.util.text import did_you_mean


def read_data(name: str) -> str:
    return (resources.files("cannery.catalog") / "data" / name).read_text(encoding="utf-8")


# Tables whose entries may say `extends = "<sibling>"`: the sibling's keys, then their own.
EXTENDABLE = {"images": "image", "components": "component", "bases": "base", "envs": "env table"}


def resolve_extends(raw: dict[str, Any], col: Collector) -> None:
    for table, what in EXTENDABLE.items():
        _resolve_table_extends(raw, table, what, col)


def _resolve_table_extends(raw: dict[str, Any], table: str, what: str, col: Collector) -> None:
    entries = raw.get(table)
    if not isinstance(entries, dict):
        return
    done: dict[str, dict[str, Any]] = {}

    def resolve(name: str, chain: list[str]) -> dict[str, Any] | None:
        if name in done:
            return done[name]
        body = entries[name]
        if not isinstance(body, dict):
            return None
        parent_name = body.get("extends")
        col.origins[(table, name)] = {str(k): name for k in body}
        for sub in MERGED if table == "images" else ():
            if isinstance(body.get(sub), dict):
                col.label_origins[(name, sub)] = {str(k): name for k in body[sub]}
        if parent_name is None:
            done[name] = body
            return body
        if not isinstance(parent_name, str) or parent_name not in entries:
            col.error(
                (table, name, "extends"),
                f"unknown {what} {parent_name!r} "
                f"({did_you_mean(str(parent_name), list(entries))})",
            )
            return None
        if parent_name in chain:
            cycle = " -> ".join([*chain[chain.index(parent_name) :], parent_name])
            col.error((table, name, "extends"), f"cyclic extends: {cycle}")
            return None
        parent = resolve(parent_name, [*chain, parent_name])
        if parent is None:
            return None
        col.parents[(table, name)] = parent_name
        col.origins[(table, name)] = {
            **col.origins[(table, parent_name)], **col.origins[(table, name)]
        }
        for sub in MERGED if table == "images" else ():
            col.label_origins[(name, sub)] = {
                **col.label_origins.get((parent_name, sub), {}),
                **col.label_origins.get((name, sub), {}),
            }
        merged = copy.deepcopy(parent)
        merged.pop("extends", None)
        for key, value in body.items():
            if table == "images" and key in MERGED and isinstance(value, dict):
                merged[key] = {**merged.get(key, {}), **value}
            elif key != "extends":
                merged[key] = value
        done[name] = merged
        return merged

    for name in list(entries):
        result = resolve(name, [name])
        if result is not None:
            entries[name] = result


# The CANN packages with an env table in ascend.toml, in the order Ascend's images source
# their env scripts.
CANN_ENV_PACKAGES = ("toolkit", "ops", "bisheng", "nnal")


def compose_cann_env(series: dict[str, Any]) -> dict[str, Any]:
    """One CANN series' env table from its packages' (ascend.toml ``cann_envs.<series>``): the
    plain values in package order, then each search path with the entries of the package
    sourced last first, as sourcing the scripts in that order leaves it."""
    unknown = set(series) - {*CANN_ENV_PACKAGES, "source"}
    if unknown:
        raise ValueError(f"ascend.toml: unknown CANN package {sorted(unknown)}")
    packages = [series.get(p, {}) for p in CANN_ENV_PACKAGES]
    table: dict[str, Any] = {}
    for pkg in packages:
        table.update((k, v) for k, v in pkg.items() if isinstance(v, str))
    for pkg in reversed(packages):
        for key, value in pkg.items():
            if isinstance(value, list):
                table[key] = [*table.get(key, []), *value]
    return table


def merge_knowledge(raw: dict[str, Any]) -> None:
    """Ascend facts (SoC families, toolkit env tables, compatibility table) that every catalog
    starts from."""
    known = toml.loads(read_data("ascend.toml"))
    families = {**known["families"], **raw.get("families", {})}
    raw["families"] = families
    # set_env.sh of each CANN line, so a catalog can name them without copying (its own win).
    envs = raw.get("envs", {})
    if isinstance(envs, dict):
        builtin = {name: compose_cann_env(series) for name, series in known["cann_envs"].items()}
        raw["envs"] = {**builtin, **envs}
    compat = raw.get("compat", {})
    if isinstance(compat, dict):
        merged = {**known["compat"], **{k: v for k, v in compat.items() if k != "rows"}}
        merged["rows"] = [*compat.get("rows", []), *known["compat"]["rows"]]
        raw["compat"] = merged
