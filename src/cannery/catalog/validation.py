"""pydantic's validation errors, said in the catalog's words: the key path, what was
expected and what the file has."""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from cannery.catalog.collector import Collector, fmt_path
from cannery.catalog.models import PATTERN_WORDS
from cannery.util.text import did_you_mean

# Keys of earlier versions → their names now.
RENAMED = {"apt": "packages"}


# Tables of named entries: a key's path within its entry starts after the entry's name.
NAMED_TABLES = ("registries", "bases", "envs", "toolkits", "components", "images", "families")


def _key_path(loc: tuple[Any, ...]) -> str:
    """The key as a person names it within its entry: ``python.version`` of
    ``images.one.python.version``, ``python`` of ``ci.python``."""
    rest = loc[2:] if loc and loc[0] in NAMED_TABLES else loc[1:]
    return fmt_path(tuple(rest)) or fmt_path(loc)


def _toml_type(value: Any) -> str:
    """The TOML word for a value's type, for messages such as 'a boolean, got string "no"'."""
    kinds = ((bool, "boolean"), (int, "integer"), (float, "float"), (str, "string"),
             (list, "array"), (dict, "table"))
    return next((word for t, word in kinds if isinstance(value, t)), type(value).__name__)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _get(raw: Any, loc: tuple[Any, ...]) -> Any:
    for part in loc:
        try:
            raw = raw[part]
        except (KeyError, IndexError, TypeError):
            return None
    return raw


def _allowed_keys(loc: tuple[Any, ...]) -> list[str]:
    """Field names of the model at ``loc`` (for 'did you mean')."""
    from pydantic import BaseModel

    from cannery.catalog import models

    model: type[BaseModel] = models.Catalog
    i = 0
    while i < len(loc):
        key = loc[i]
        info = model.model_fields.get(str(key))
        if info is None:
            return []
        ann = info.annotation
        nxt = _model_in(ann)
        if nxt is None:
            return []
        # dict[str, Model] or list[Model] consume one more path element
        origin = getattr(ann, "__origin__", None)
        if origin in (dict, list):
            i += 1
        model = nxt
        i += 1
    return list(model.model_fields)


def _model_in(ann: Any) -> Any:
    from pydantic import BaseModel

    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann
    for arg in getattr(ann, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def say_validation_errors(exc: ValidationError, raw: dict[str, Any], col: Collector) -> None:
    """Each of pydantic's errors of ``raw``, said in the catalog's words at its key's line:
    an unknown key with the one meant, a pattern in words, the choices of a literal."""
    for err in exc.errors():
        loc = tuple(err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            parent = _get(raw, loc[:-1])
            allowed = _allowed_keys(loc[:-1])
            msg = f"unknown key {loc[-1]!r}"
            if RENAMED.get(str(loc[-1])) in allowed:
                msg += f" (renamed to {RENAMED[str(loc[-1])]!r})"
            elif allowed:
                msg += f" ({did_you_mean(str(loc[-1]), allowed)})"
            del parent
        elif err["type"] == "string_pattern_mismatch":
            words = PATTERN_WORDS.get(str(err.get("ctx", {}).get("pattern", "")))
            if words is not None:
                msg = f"{_key_path(loc)} must {words}, got {_shown(err['input'])}"
        elif err["type"] == "missing":
            msg = f"missing required key {loc[-1]!r}"
        elif err["type"] == "literal_error":
            choices = re.findall(r"'([^']*)'", str(err.get("ctx", {}).get("expected", "")))
            got = err["input"]
            msg = f"{_shown(got)} is not one of {', '.join(choices)}"
            if isinstance(got, str):
                msg += f" ({did_you_mean(got, choices)})"
        elif err["type"].endswith("_type"):
            msg = f"{msg}, got {_toml_type(err['input'])} {_shown(err['input'])}"
        col.error(loc, msg)
