"""The one tomllib import (tomli before Python 3.11) and one way to word a TOML syntax error."""

from __future__ import annotations

import re
import sys
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TOMLDecodeError = tomllib.TOMLDecodeError


def loads(text: str) -> dict[str, Any]:
    data: dict[str, Any] = tomllib.loads(text)
    return data


def syntax_error(shown: str, text: str, exc: Exception) -> str:
    """``file:line:column: reason`` for a TOMLDecodeError; an error at the end of the document
    is placed on the file's last line."""
    msg = str(exc)
    m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
    if m:
        reason = msg[: m.start()].strip()
        dup = re.match(r"Cannot (?:declare|overwrite a value) \((.*)\)", reason)
        if dup:
            name = ".".join(re.findall(r"'([^']*)'", dup.group(1)))
            return f"{shown}:{m.group(1)}:{m.group(2)}: {name} is defined twice"
        return f"{shown}:{m.group(1)}:{m.group(2)}: TOML syntax error: {reason}"
    end = re.search(r"\s*\(at end of document\)", msg)
    if end:
        line = max(1, len(text.splitlines()))
        return f"{shown}:{line}: TOML syntax error: {msg[: end.start()]} at the end of the file"
    return f"{shown}: TOML syntax error: {msg}"
