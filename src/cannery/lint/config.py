"""Lint options, read once: defaults → pyproject.toml [tool.cannery.lint] → .cannery.toml
[lint] → command-line overrides. Unknown keys are errors with a "did you mean" hint."""

from __future__ import annotations

from pathlib import Path

from cannery.errors import InputError
from cannery.lint.bases import DEFAULT_BASE_ENV, DEFAULT_SHELLS
from cannery.lint.model import Confidence, Frozen, Severity

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

# ARGs that builds read from the environment without a `$` in the Dockerfile.
DEFAULT_IMPLICIT_ARGS = (
    "SOC_VERSION", "TARGETARCH", "TARGETPLATFORM", "TARGETOS", "TARGETVARIANT",
    "BUILDPLATFORM", "BUILDARCH", "BUILDOS", "BUILDVARIANT", "MAX_JOBS", "MAKEFLAGS",
    "CMAKE_BUILD_PARALLEL_LEVEL", "COMPILE_CUSTOM_KERNELS", "VLLM_TARGET_DEVICE",
    "HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy",
    "https_proxy", "ftp_proxy", "no_proxy", "all_proxy", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL",
    "DEBIAN_FRONTEND", "BUILDKIT_INLINE_CACHE", "SOURCE_DATE_EPOCH",
)
# Assignments that turn a source build's native compilation off (pip install -e . then
# builds no extension, so it does not link against the torch installed at that time).
DEFAULT_NO_COMPILE_ENV = ("VLLM_TARGET_DEVICE=empty",)
KEYS = ("select", "ignore", "severity", "base-image-shells", "base-image-env",
        "implicit-args", "trusted-registries", "fail-on", "target", "no-compile-env",
        "min-confidence")


class LintConfig(Frozen):
    """The options of one run (immutable; ``replace`` makes a changed copy)."""

    __slots__ = (
        "base_image_env",
        "base_image_shells",
        "fail_on",
        "ignore",
        "implicit_args",
        "min_confidence",
        "no_compile_env",
        "select",
        "severity",
        "source",
        "target",
        "trusted_registries",
    )
    select: tuple[str, ...] | None  # None: every rule
    ignore: tuple[str, ...]
    severity: dict[str, Severity]
    base_image_shells: dict[str, list[str]]
    base_image_env: dict[str, list[str]]
    implicit_args: frozenset[str]
    trusted_registries: tuple[str, ...]
    fail_on: Severity
    target: str | None  # the stage that ships (default: the last one)
    no_compile_env: tuple[str, ...]
    min_confidence: Confidence  # findings less sure than this are not reported
    source: str

    def __init__(
        self,
        select: tuple[str, ...] | None = None,
        ignore: tuple[str, ...] = (),
        severity: dict[str, Severity] | None = None,
        base_image_shells: dict[str, list[str]] | None = None,
        base_image_env: dict[str, list[str]] | None = None,
        implicit_args: frozenset[str] = frozenset(DEFAULT_IMPLICIT_ARGS),
        trusted_registries: tuple[str, ...] = (),
        fail_on: Severity = Severity.WARNING,
        target: str | None = None,
        no_compile_env: tuple[str, ...] = DEFAULT_NO_COMPILE_ENV,
        # medium: a guess (an unknown base's config, say) is shown only when asked for
        min_confidence: Confidence = Confidence.MEDIUM,
        source: str = "defaults",
    ) -> None:
        set_ = object.__setattr__  # immutable after this (Frozen)
        set_(self, "select", select)
        set_(self, "ignore", ignore)
        set_(self, "severity", {} if severity is None else severity)
        set_(self, "base_image_shells",
             dict(DEFAULT_SHELLS) if base_image_shells is None else base_image_shells)
        set_(self, "base_image_env",
             dict(DEFAULT_BASE_ENV) if base_image_env is None else base_image_env)
        set_(self, "implicit_args", implicit_args)
        set_(self, "trusted_registries", trusted_registries)
        set_(self, "fail_on", fail_on)
        set_(self, "target", target)
        set_(self, "no_compile_env", no_compile_env)
        set_(self, "min_confidence", min_confidence)
        set_(self, "source", source)


def rule_list(value: Any, where: str) -> tuple[str, ...]:
    from cannery.lint.ruleset import RuleSet

    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{where}: expected a list of rule names")
    for v in value:
        if RuleSet.resolve(v) is None:
            import difflib

            hint = difflib.get_close_matches(v, RuleSet.names(), n=1)
            raise InputError(f"{where}: unknown rule {v!r}"
                             + (f" (did you mean {hint[0]!r}?)" if hint else ""))
    return tuple(RuleSet.resolve(v).name for v in value)  # type: ignore[union-attr]


def apply_table(cfg: LintConfig, table: dict[str, Any], where: str) -> LintConfig:
    for key in table:
        if key not in KEYS:
            import difflib

            hint = difflib.get_close_matches(key, KEYS, n=1)
            raise InputError(f"{where}: unknown key {key!r}"
                             + (f" (did you mean {hint[0]!r}?)" if hint else
                                f" (known: {', '.join(KEYS)})"))
    changes: dict[str, Any] = {}
    if "select" in table:
        changes["select"] = rule_list(table["select"], f"{where}: select")
    if "ignore" in table:
        changes["ignore"] = cfg.ignore + rule_list(table["ignore"], f"{where}: ignore")
    if "severity" in table:
        sev = dict(cfg.severity)
        if not isinstance(table["severity"], dict):
            raise InputError(f"{where}: severity: expected a table of rule = level")
        for name, level in table["severity"].items():
            (rule,) = rule_list([name], f"{where}: severity")
            try:
                sev[rule] = Severity.parse(str(level))
            except ValueError as exc:
                raise InputError(f"{where}: severity.{name}: {exc}") from None
        changes["severity"] = sev
    if "base-image-shells" in table:
        shells = table["base-image-shells"]
        if not isinstance(shells, dict) or not all(
                isinstance(v, (list, str)) for v in shells.values()):
            raise InputError(f"{where}: base-image-shells: expected pattern = [\"/bin/bash\", "
                             "\"-c\"]")
        merged = {k: (v if isinstance(v, list) else [v, "-c"]) for k, v in shells.items()}
        # the project's patterns are tried before the defaults
        changes["base_image_shells"] = {
            **merged, **{k: v for k, v in cfg.base_image_shells.items() if k not in merged}}
    if "base-image-env" in table:
        env = table["base-image-env"]
        if not isinstance(env, dict) or not all(isinstance(v, list) for v in env.values()):
            raise InputError(f"{where}: base-image-env: expected pattern = [\"VAR\", …]")
        changes["base_image_env"] = {
            **{k: list(map(str, v)) for k, v in env.items()},
            **{k: v for k, v in cfg.base_image_env.items() if k not in env}}
    if "implicit-args" in table:
        args = table["implicit-args"]
        if not isinstance(args, list):
            raise InputError(f"{where}: implicit-args: expected a list of names")
        changes["implicit_args"] = cfg.implicit_args | frozenset(map(str, args))
    if "trusted-registries" in table:
        regs = table["trusted-registries"]
        if not isinstance(regs, list):
            raise InputError(f"{where}: trusted-registries: expected a list of hosts")
        changes["trusted_registries"] = tuple(map(str, regs))
    if "fail-on" in table:
        try:
            changes["fail_on"] = Severity.parse(str(table["fail-on"]))
        except ValueError as exc:
            raise InputError(f"{where}: fail-on: {exc}") from None
    if "target" in table:
        if not isinstance(table["target"], str):
            raise InputError(f"{where}: target: expected a stage name")
        changes["target"] = table["target"]
    if "no-compile-env" in table:
        env = table["no-compile-env"]
        if not isinstance(env, list) or not all(isinstance(v, str) and "=" in v for v in env):
            raise InputError(f"{where}: no-compile-env: expected a list of \"NAME=VALUE\"")
        changes["no_compile_env"] = cfg.no_compile_env + tuple(env)
    if "min-confidence" in table:
        try:
            changes["min_confidence"] = Confidence.parse(str(table["min-confidence"]))
        except ValueError as exc:
            raise InputError(f"{where}: min-confidence: {exc}") from None
    return cfg.replace(**changes, source=where)


def _toml(path: Path) -> Any:
    """A config file, read as lint reads any file (a regular file, at most 1 MiB)."""
    import os

    from cannery.lint.files import Skipped, read_regular
    from cannery.util import toml

    try:
        return toml.loads(read_regular(os.path.realpath(path)).decode("utf-8"))
    except Skipped as exc:
        raise InputError(f"{path}: cannot read lint config: {exc.reason}") from None
    except (OSError, UnicodeDecodeError, toml.TOMLDecodeError) as exc:
        raise InputError(f"{path}: cannot read lint config: {exc}") from None


def find_config(start: Path) -> list[tuple[Path, dict[str, Any]]]:
    """The config tables that apply at ``start``: the nearest directory that has either file."""
    here = start.resolve()
    for d in [here, *here.parents]:
        found = []
        py = d / "pyproject.toml"
        dot = d / ".cannery.toml"
        for path, keys in ((py, ("tool", "cannery", "lint")), (dot, ("lint",))):
            if not path.is_file():
                continue
            data = _toml(path)
            for k in keys:
                data = data.get(k, {}) if isinstance(data, dict) else {}
            if data:
                found.append((path, data))
        if found or (d / ".git").exists():
            return found
    return []


def load_config(start: Path, explicit: Path | None = None) -> LintConfig:
    cfg = LintConfig()
    if explicit is not None:
        data = _toml(explicit)
        table = data.get("tool", {}).get("cannery", {}).get("lint") or data.get("lint", {})
        return apply_table(cfg, table, str(explicit))
    for path, table in find_config(start):
        cfg = apply_table(cfg, table, str(path))
    return cfg


def schema() -> dict[str, Any]:
    """JSON Schema of the [tool.cannery.lint] table (tested against the defaults)."""
    from cannery.lint.ruleset import RuleSet

    rule = {"type": "string", "enum": RuleSet.names()}
    level = {"type": "string", "enum": [str(s) for s in Severity]}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "cannery lint options",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "select": {"type": "array", "items": rule},
            "ignore": {"type": "array", "items": rule},
            "severity": {"type": "object", "propertyNames": rule, "additionalProperties": level},
            "base-image-shells": {"type": "object", "additionalProperties": {
                "type": "array", "items": {"type": "string"}}},
            "base-image-env": {"type": "object", "additionalProperties": {
                "type": "array", "items": {"type": "string"}}},
            "implicit-args": {"type": "array", "items": {"type": "string"}},
            "trusted-registries": {"type": "array", "items": {"type": "string"}},
            "fail-on": level,
            "target": {"type": "string"},
            "no-compile-env": {"type": "array", "items": {"type": "string", "pattern": "="}},
            "min-confidence": {"type": "string", "enum": [str(c) for c in Confidence]},
        },
    }
