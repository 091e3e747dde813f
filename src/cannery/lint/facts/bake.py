"""A Docker Buildx bake file, JSON or HCL, read into one shape: the JSON form's
``{"group": {name: {...}}, "target": {name: {...}}, "variable": {name: {...}}}``, with each
string's ``${VAR}`` filled in from the variables' defaults (or the environment the step gives
bake). Targets, groups and ``inherits`` are resolved by the workflow helpers
(lint/rules/_workflow.py), the same way for both formats."""

from __future__ import annotations

import re

from cannery.lint.facts import ParseFailure

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

# the names bake reads when the step names no file, in its order (compose files are not read)
DEFAULT_FILES = ("docker-bake.json", "docker-bake.hcl", "docker-bake.override.json",
                 "docker-bake.override.hcl")
BLOCKS = ("group", "target", "variable")

# (name, text) → parsed: several rules pair a workflow with its bake file in one run, and
# HCL parses slowly (lark); bounded, as a run may read many files
_CACHE: dict[tuple[str, str], dict[str, Any] | ParseFailure] = {}


def parse_bake(name: str, text: str) -> dict[str, Any]:
    """The bake file ``name`` (HCL unless it ends in .json) in the JSON shape, variables not
    yet filled in. A file that does not parse is a ParseFailure with its line."""
    key = (name, text)
    if key not in _CACHE:
        if len(_CACHE) > 64:
            _CACHE.clear()
        try:
            _CACHE[key] = _json(text) if name.endswith(".json") else _hcl(text)
        except ParseFailure as exc:
            _CACHE[key] = exc
    got = _CACHE[key]
    if isinstance(got, ParseFailure):
        raise got
    return got


def _json(text: str) -> dict[str, Any]:
    import json

    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseFailure(exc.lineno, f"JSON: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:
        raise ParseFailure(1, f"JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ParseFailure(1, "JSON: not an object of group, target and variable")
    return {k: v for k, v in doc.items() if k in BLOCKS and isinstance(v, dict)}


def _hcl(text: str) -> dict[str, Any]:
    """HCL through python-hcl2, its blocks (a list of ``{label: body}`` per kind) merged into
    one mapping per kind, as bake merges a block given twice."""
    import hcl2
    from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput

    options = hcl2.SerializationOptions(with_comments=False, explicit_blocks=False,
                                        strip_string_quotes=True, preserve_heredocs=False)
    try:
        doc = hcl2.loads(text, serialization_options=options)
    except UnexpectedEOF:
        raise ParseFailure(text.count("\n") + 1, "HCL: unexpected end of file") from None
    except UnexpectedCharacters as exc:
        raise ParseFailure(exc.line, f"HCL: unexpected character {exc.char!r} at column "
                           f"{exc.column}") from None
    except UnexpectedInput as exc:
        token = getattr(exc, "token", None)
        what = ("end of file" if token is None or token.type == "$END"
                else repr(str(token).strip()[:40]))
        line = exc.line if isinstance(exc.line, int) and exc.line > 0 else 1
        raise ParseFailure(line, f"HCL: unexpected {what}") from None
    except RecursionError:
        raise ParseFailure(1, "HCL: nested too deeply") from None
    except Exception as exc:  # the library's own checks (a duplicate key, a bad literal)
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        m = re.search(r"line (\d+)", first)
        raise ParseFailure(int(m.group(1)) if m else 1, f"HCL: {first}") from None
    out: dict[str, Any] = {}
    for kind in BLOCKS:
        blocks = doc.get(kind)
        merged: dict[str, Any] = {}
        for block in blocks if isinstance(blocks, list) else []:
            for label, body in block.items() if isinstance(block, dict) else ():
                if isinstance(body, dict):
                    merged.setdefault(str(label), {}).update(body)
        if merged:
            out[kind] = merged
    return out


def merge(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """Several bake files as one, a later file's fields winning (bake's `-f a -f b`)."""
    out: dict[str, Any] = {}
    for doc in docs:
        for kind, blocks in doc.items():
            into = out.setdefault(kind, {})
            for name, body in blocks.items():
                if isinstance(body, dict):
                    into.setdefault(name, {}).update(body)
    return out


_REF = re.compile(r"(?<!\$)\$\{\s*([A-Za-z_][\w-]*)\s*\}")


def interpolate(doc: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    """``doc`` with ``${NAME}`` of each variable filled in, in every string of its groups and
    targets: the environment's value of NAME (bake reads it) or else the variable's default.
    Any other expression (a function call, an unknown name) stays as written."""
    values: dict[str, str] = {}
    for name, body in (doc.get("variable") or {}).items():
        if name in env:
            values[name] = env[name]
        elif isinstance(body, dict) and body.get("default") is not None:
            default = body["default"]
            values[name] = (str(default).lower() if isinstance(default, bool)
                            else str(default))

    def fill(text: str) -> str:
        for _ in range(4):  # a default may name another variable
            new = _REF.sub(lambda m: values.get(m.group(1), m.group(0)), text)
            if new == text:
                break
            text = new
        return text

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return fill(value)
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value

    return {kind: (walk(blocks) if kind != "variable" else blocks)
            for kind, blocks in doc.items()}
