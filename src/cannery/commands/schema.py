from __future__ import annotations

import copy
import json
from typing import Any

from cannery.catalog.models import AXIS_NAME, AXIS_WORD, Catalog
from cannery.util.patterns import CONTROL

# Tables whose entries may `extends` a sibling (cannery.catalog.extends.EXTENDABLE): such an entry
# inherits its required keys, so they are required only of an entry that extends nothing.
_EXTENDABLE = ("Base", "Component", "Image")


def catalog_schema() -> dict[str, Any]:
    """The catalog's JSON Schema (draft 2020-12), generated from the models that validate it.

    It checks every table on its own, as `catalog validate` does; what spans tables (a name
    that must exist elsewhere, `extends` chains, the compatibility table, tag owners) only
    `catalog validate` can check.
    """
    schema: dict[str, Any] = Catalog.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "cannery catalog"
    for name in _EXTENDABLE:
        model = schema["$defs"][name]
        required = model.pop("required", [])
        # an entry with a matrix may have its required keys set per axis word
        given = [{"required": ["extends"]}, *([{"required": ["matrix"]}] if name == "Image"
                                              else [])]
        rule = {"if": {"not": {"anyOf": given}}, "then": {"required": required}}
        model.setdefault("allOf", []).append(rule)
    _placeholders(schema["$defs"])  # first: a matrix's axis tables copy the image's fields
    _matrix(schema["$defs"])
    # SoC families and the compatibility table come from cannery's own data when absent.
    schema["required"] = ["catalog"]
    _no_control(schema)
    return schema


def _matrix(defs: dict[str, Any]) -> None:
    """A matrix's axes (its keys other than name, include, exclude): arrays of words or of
    tables of a word and image fields; an include: axis words and image fields (an axis is
    never named like an image field, so the two cannot be confused)."""
    fields = {k: v for k, v in defs["Image"]["properties"].items()
              if k not in ("extends", "matrix")}
    word: dict[str, Any] = {"type": "string", "pattern": AXIS_WORD}
    value = {"type": "object", "required": ["value"], "additionalProperties": False,
             "properties": {"value": word, **copy.deepcopy(fields)}}
    matrix = defs["Matrix"]
    matrix["propertyNames"] = {"pattern": AXIS_NAME.rstrip("$") + "|^(name|include|exclude)$"}
    matrix["additionalProperties"] = {
        "type": "array", "minItems": 1, "items": {"anyOf": [copy.deepcopy(word), value]}}
    matrix["properties"]["include"]["items"] = {
        "type": "object", "minProperties": 1, "properties": copy.deepcopy(fields),
        "additionalProperties": copy.deepcopy(word)}
    matrix["properties"]["exclude"]["items"] = {
        "type": "object", "minProperties": 1, "additionalProperties": copy.deepcopy(word)}


# What a matrix entry may write in any of its strings: {matrix.AXIS}, the image's word for it.
PLACEHOLDER = r"\{matrix\.[a-z][a-z0-9_]*\}"


def _placeholders(defs: dict[str, Any]) -> None:
    """A string of an image entry (and of the tables inside it) whose value has a pattern may
    instead hold a {matrix.AXIS}: catalog/matrix.py puts the word in before the pattern is
    checked. The schema cannot tell an entry with a matrix from one without, so it lets the
    placeholder through in every image; `catalog validate` names one no matrix defines."""
    names = _reachable(defs, defs["Image"]) - {"Image", "Matrix"}
    image = {k: v for k, v in defs["Image"]["properties"].items() if k not in ("extends", "matrix")}
    for node in [*image.values(), *(defs[n] for n in sorted(names))]:
        _allow_placeholder(node)


def _reachable(defs: dict[str, Any], node: object, seen: set[str] | None = None) -> set[str]:
    """The names of the $defs ``node`` refers to, directly or through them."""
    seen = set() if seen is None else seen
    if isinstance(node, list):
        for item in node:
            _reachable(defs, item, seen)
    elif isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.removeprefix("#/$defs/")
            if name not in seen and name != "Matrix":
                seen.add(name)
                _reachable(defs, defs[name], seen)
        for item in node.values():
            _reachable(defs, item, seen)
    return seen


def _allow_placeholder(node: object) -> None:
    """Each ``pattern`` a value must match becomes "the pattern, or a placeholder"; what a
    value must not match (``not``) stays as it is."""
    if isinstance(node, list):
        for item in node:
            _allow_placeholder(item)
    if not isinstance(node, dict):
        return
    for key, item in node.items():
        if key not in ("enum", "const", "default", "examples", "not", "propertyNames"):
            _allow_placeholder(item)
    if isinstance(node.get("pattern"), str):
        either = {"anyOf": [{"pattern": node.pop("pattern")}, {"pattern": PLACEHOLDER}]}
        node.setdefault("allOf", []).append(either)


def _no_control(node: object) -> None:
    """Every string the schema describes, and every key of every table, holds no CONTROL
    character (what `catalog validate` checks first, cannery.catalog.load._control_chars)."""
    if isinstance(node, list):
        for item in node:
            _no_control(item)
    if not isinstance(node, dict):
        return
    for key, item in node.items():
        if key not in ("enum", "const", "pattern", "default", "examples"):
            _no_control(item)
    if node.get("type") == "string":
        node.setdefault("allOf", []).append({"not": {"pattern": CONTROL}})
    if node.get("type") == "object":
        node.setdefault("propertyNames", {}).setdefault("allOf", []).append(
            {"not": {"pattern": CONTROL}})


def schema_cmd() -> int:
    print(json.dumps(catalog_schema(), indent=2, sort_keys=True))
    return 0
