"""Ascend domain facts shared by the catalog and the linter (SoC families), read from data."""

from __future__ import annotations

from functools import lru_cache

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any


def _data_text() -> str:
    from pathlib import Path

    # a plain path, not importlib.resources: this runs on every lint and must start fast
    return (Path(__file__).parent / "catalog" / "data" / "ascend.toml").read_text("utf-8")


@lru_cache(maxsize=1)
def ascend_data() -> dict[str, object]:
    from cannery.util import toml

    data: dict[str, object] = toml.loads(_data_text())
    return data


@lru_cache(maxsize=1)
def soc_chips() -> dict[str, str]:
    """SOC_VERSION → image chip token (ascend910b1 → 910b, ascend910_9391 → a3)."""
    families: Any = simple_tables(_data_text(), "families")
    if families is None:  # written in more of TOML than simple_tables reads
        families = ascend_data()["families"]
    assert isinstance(families, dict)
    return {soc: fam["chip"] for fam in families.values() for soc in fam["socs"]}


def simple_tables(text: str, name: str) -> dict[str, dict[str, object]] | None:
    """The ``[name.KEY]`` tables of a TOML text, when each is written plainly: bare keys,
    one ``key = value`` per line, values strings without escapes or one-line arrays of them.
    None when anything about ``name`` is written otherwise (the caller then parses the whole
    file with tomllib). `cannery lint` reads the SoC families this way on every run that
    meets a SOC_VERSION: importing tomllib would cost it more than the rest of the lint."""
    import json
    import re

    if '"""' in text or "'''" in text:  # a multi-line string could hold a line like a header
        return None
    tables: dict[str, dict[str, object]] = {}
    current: dict[str, object] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("["):
            current = None
            if name not in stripped:
                continue
            header = re.fullmatch(rf"\[{re.escape(name)}\.([A-Za-z0-9_-]+)\]", stripped)
            if header is None or header.group(1) in tables:
                return None
            current = tables[header.group(1)] = {}
            continue
        if current is None:
            if name in stripped:  # perhaps a dotted or quoted key outside the tables
                return None
            continue
        entry = re.fullmatch(r"([A-Za-z0-9_-]+) = (.*)", stripped)
        if entry is None or "\\" in entry.group(2) or entry.group(1) in current:
            return None
        try:
            value = json.loads(entry.group(2))
        except ValueError:
            return None
        if not (isinstance(value, str) or (isinstance(value, list)
                                           and all(isinstance(v, str) for v in value))):
            return None
        current[entry.group(1)] = value
    return tables


# What CANN's and ATB's set_env.sh export (ASCEND.md), by the script's path.
CANN_ENV = (
    "ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH", "ASCEND_AICPU_PATH", "ASCEND_OPP_PATH",
    "TOOLCHAIN_HOME", "LD_LIBRARY_PATH", "PYTHONPATH", "PATH",
)
ATB_ENV = ("ATB_HOME_PATH", "LD_LIBRARY_PATH")


def env_script_vars(path: str) -> tuple[str, ...] | None:
    """Variables a known env script sets, or None for a script we know nothing about."""
    if "nnal" in path or "/atb/" in path:
        return ATB_ENV
    if path.endswith("set_env.sh") and ("Ascend" in path or "ascend" in path or "cann" in path):
        return CANN_ENV
    return None
