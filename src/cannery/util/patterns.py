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
