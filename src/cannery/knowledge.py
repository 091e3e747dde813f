"""Ascend domain facts shared by the catalog and the linter (SoC families), read from data."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def ascend_data() -> dict[str, object]:
    from pathlib import Path

    from cannery.util import toml

    # a plain path, not importlib.resources: this runs on every lint and must start fast
    text = (Path(__file__).parent / "catalog" / "data" / "ascend.toml").read_text("utf-8")
    data: dict[str, object] = toml.loads(text)
    return data


def soc_chips() -> dict[str, str]:
    """SOC_VERSION → image chip token (ascend910b1 → 910b, ascend910_9391 → a3)."""
    families = ascend_data()["families"]
    assert isinstance(families, dict)
    return {soc: fam["chip"] for fam in families.values() for soc in fam["socs"]}


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
