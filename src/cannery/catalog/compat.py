"""The vllm-ascend compatibility table as a check: contradictions are errors, gaps are warnings."""

from __future__ import annotations

import re
from collections.abc import Iterator

from cannery.catalog.models import Catalog, CompatRow


def _ver(text: str) -> tuple[int | str, ...]:
    text = text.strip().lstrip("v")
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"[.+]", text))


def _minor(text: str) -> tuple[int | str, ...]:
    return _ver(text)[:2]


def in_range(version: str, spec: str) -> bool:
    """``3.11`` against ``>=3.10,<3.12`` (the only operators the table uses)."""
    v = _ver(version)
    for clause in spec.split(","):
        m = re.match(r"\s*(>=|<=|<|>|==)\s*([\w.]+)\s*$", clause)
        if not m:
            continue
        op, bound = m.group(1), _ver(m.group(2))
        ok = {
            ">=": v >= bound,
            "<=": v <= bound,
            "<": v < bound,
            ">": v > bound,
            "==": v == bound,
        }[op]
        if not ok:
            return False
    return True


def _pins(cat: Catalog, components: list[str]) -> dict[str, str]:
    pins: dict[str, str] = {}
    for name in components:
        comp = cat.components[name]
        for req in comp.pip or []:
            m = re.match(r"^\s*([A-Za-z0-9_.-]+)\s*==\s*([^\s;,]+)", req)
            if m:
                pins[m.group(1).lower().replace("-", "_")] = m.group(2)
    return pins


def _versions(cat: Catalog, components: list[str]) -> dict[str, tuple[str, str]]:
    """package name → (component name, declared version) for git/wheel components."""
    out: dict[str, tuple[str, str]] = {}
    for name in components:
        comp = cat.components[name]
        if comp.version:
            out[comp.package or name] = (name, comp.version)
    return out


def _row(cat: Catalog, vllm_ascend: str) -> CompatRow | None:
    for row in cat.compat.rows:
        if _ver(row.vllm_ascend) == _ver(vllm_ascend):
            return row
    return None


def check_image(cat: Catalog, image: str) -> Iterator[tuple[str, str, str, str]]:
    """Yield (level, code, field, message) for one image."""
    img = cat.images[image]
    versions = _versions(cat, img.components)
    if "vllm-ascend" not in versions:
        return
    src = f"{cat.compat.source}, {cat.compat.date}".strip(", ")
    _, va = versions["vllm-ascend"]
    row = _row(cat, va)
    if row is None:
        yield (
            "warning",
            "compat-unlisted",
            "components",
            f"vllm-ascend {va} is not in the compatibility table ({src})",
        )
        return
    python = cat.python_of(image)
    if python is not None and not in_range(python, row.python):
        yield (
            "error",
            "compat-python",
            "python" if img.python else "base",
            f"python {python} is outside vllm-ascend {row.vllm_ascend}'s range "
            f"{row.python} ({src})",
        )
    if "vllm" in versions:
        vname, vv = versions["vllm"]
        if _ver(vv) != _ver(row.vllm):
            level = "error" if _minor(vv) != _minor(row.vllm) else "warning"
            yield (
                level,
                "compat-vllm",
                "components",
                f"vllm {vv} (component {vname!r}) with vllm-ascend {row.vllm_ascend}, "
                f"which the table pairs with vllm {row.vllm} ({src})",
            )
    tk = cat.toolkit_of(image)
    cann = tk.version if tk is not None else None
    if cann is not None and _ver(cann) != _ver(row.cann):
        level = "error" if _minor(cann) != _minor(row.cann) else "warning"
        yield (
            level,
            "compat-cann",
            "toolkit",
            f"CANN {cann} with vllm-ascend {row.vllm_ascend}, which the table pairs with "
            f"CANN {row.cann} ({src})",
        )
    pins = _pins(cat, img.components)
    for pkg, want, code in (
        ("torch", row.torch, "compat-torch"),
        ("torch_npu", row.torch_npu, "compat-torch-npu"),
    ):
        have = pins.get(pkg)
        if have is None:
            continue
        if _ver(have) != _ver(want):
            level = "error" if _minor(have) != _minor(want) else "warning"
            yield (
                level,
                code,
                "components",
                f"{pkg} {have} with vllm-ascend {row.vllm_ascend}, which the table pairs with "
                f"{pkg} {want} ({src})",
            )
