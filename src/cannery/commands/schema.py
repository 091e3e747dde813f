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
