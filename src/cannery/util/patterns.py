"""Immutable-reference patterns, defined once (catalog, lock and renderer use the same)."""

from __future__ import annotations

import re

# A full git commit id. Pydantic takes the pattern string; code uses the compiled form.
COMMIT_PATTERN = r"^[0-9a-f]{40}$"
COMMIT = re.compile(COMMIT_PATTERN)
# A 7 to 39 character hex prefix: a short SHA, which is not an immutable reference.
SHORT_COMMIT = re.compile(r"^[0-9a-f]{7,39}$")
SHA256_HEX_PATTERN = r"^[0-9a-f]{64}$"
OCI_DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
# What no catalog string (key or value) and no rendered Dockerfile value may hold: control
# characters (a newline ends a Dockerfile instruction or a YAML line and starts the next) and
# the line separators YAML 1.1 and Python also take as line breaks. A regex that JSON Schema
# (ECMA-262) reads the same.
CONTROL = r"[\x00-\x1f\x7f-\x9f\u2028\u2029]"
