"""The `[build.mirrors]` table: where builds fetch packages from instead of their origins."""

from __future__ import annotations

from pydantic import Field, field_validator
from pydantic.config import JsonDict, JsonValue

from cannery.catalog.models.common import Strict, _full

# A mirror prefix: scheme, host[:port], path segments of URL characters that the shell, sed
# and awk take literally, ending in '/' so that it replaces whole path segments only.
_MIRROR_PATH = r"[A-Za-z0-9.-]+(:[0-9]+)?/([A-Za-z0-9._~%+-]+/)*$"
HTTPS_PREFIX = r"^https://" + _MIRROR_PATH
HTTP_PREFIX = r"^http://" + _MIRROR_PATH


def _mirror_schema(http_originals: bool) -> JsonDict:
    """An https original needs an https mirror; an http one (apt and dnf check signatures
    either way) may have an http or https mirror, never weaker than what the base uses."""
    https: JsonDict = {"type": "string", "pattern": HTTPS_PREFIX}
    props: dict[str, JsonValue] = {HTTPS_PREFIX: https}
    if http_originals:
        props[HTTP_PREFIX] = {"type": "string", "pattern": r"^https?://" + _MIRROR_PATH}
    return {"patternProperties": props, "additionalProperties": False}


def _mirror_map(v: dict[str, str], http_originals: bool) -> dict[str, str]:
    shape = ("an http(s)://host/path/ prefix" if http_originals
             else "an https://host/path/ prefix")
    chars = "ending in '/', with letters, digits and . _ ~ % + - only"
    for src, dst in v.items():
        if not (_full(HTTPS_PREFIX, src) or (http_originals and _full(HTTP_PREFIX, src))):
            raise ValueError(f"{src!r}: give {shape} {chars}")
        if not (_full(HTTPS_PREFIX, dst) or (_full(HTTP_PREFIX, dst) and _full(HTTP_PREFIX, src)
                                             and http_originals)):
            raise ValueError(
                f"{dst!r}: give an https://host/path/ prefix {chars}"
                + (" (http only as the mirror of an http original)" if http_originals else "")
            )
    return v


class BuildMirrors(Strict):
    """``[build_mirrors]``: URL prefixes the build fetches from instead of the originals.
    Used by the rendered package and pip steps for that RUN only; nothing of it is written
    into the image, and `cannery lock` resolves against the original indexes."""

    packages: dict[str, str] = Field(
        {},
        description="Package repository prefix, as the base's apt sources or dnf .repo baseurl "
                    "write it → a mirror prefix; apt or dnf reads a rewritten copy of the "
                    "sources in the install step only, signature checks and keys as the base "
                    "has them",
        json_schema_extra=_mirror_schema(http_originals=True),
    )
    python: dict[str, str] = Field(
        {},
        description="Python index prefix (python_index, extra_index) → an https mirror prefix; "
                    "used by the build's pip commands (the lock's hashes are still checked)",
        json_schema_extra=_mirror_schema(http_originals=False),
    )

    @field_validator("packages")
    @classmethod
    def _packages(cls, v: dict[str, str]) -> dict[str, str]:
        return _mirror_map(v, http_originals=True)

    @field_validator("python")
    @classmethod
    def _python(cls, v: dict[str, str]) -> dict[str, str]:
        return _mirror_map(v, http_originals=False)
