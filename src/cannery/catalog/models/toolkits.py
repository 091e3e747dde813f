"""The `[toolkits]` table: CANN toolkits (from a git ref, a URL template or the host)."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic.config import JsonDict

from cannery.catalog.models.common import (
    DEVLIB_PATH,
    TAG_VALUE,
    URL_TEMPLATE,
    Strict,
    _schema,
    _url_template,
)


class Package(Strict):
    name: str = Field(description="The installer's name (toolkit, ops, nnal): its build "
                      "variables and messages")
    url: str = Field(
        description="https URL template; {version} and {uname_arch} are filled in",
        json_schema_extra=_schema(URL_TEMPLATE),
    )
    family: str | None = Field(None, description="Only for this SoC family (ops packages)")

    @field_validator("url")
    @classmethod
    def _fields(cls, v: str) -> str:
        return _url_template(v)


# What a toolkit the host provides (mounted at run time) cannot have: nothing installs it, no
# ENV claims it, nothing builds against it.
HOST_FORBIDS = ("env", "devlib", "env_scripts", "install_args", "packages")


def _toolkit_rules() -> JsonDict:
    """Toolkit's cross-field rule as JSON Schema (the model validator says the same)."""
    host: JsonDict = {"properties": {"provided": {"const": "host"}}, "required": ["provided"]}
    return {
        "if": host,
        "then": {"not": {"anyOf": [{"required": [k]} for k in HOST_FORBIDS]}},
        "else": {"required": ["env"]},
    }


class Toolkit(Strict):
    model_config = ConfigDict(json_schema_extra=_toolkit_rules())

    version: str = Field(pattern=TAG_VALUE, description="The CANN version (8.5.2, 8.0.RC3): "
                         "{version} of its installers' URLs and env")
    provided: Literal["image", "host"] = Field(
        "image",
        description="image: installed in the image (or shipped by the base); host: mounted from "
        "the host at run time, so no installers, no ENV and no io.cannery.toolkit label",
    )
    layout: Literal["cann", "ascend-toolkit"] = Field(
        "cann", description="Where the installers put CANN: cann (/usr/local/Ascend/cann-X, "
        "CANN 8.5 on) or ascend-toolkit (/usr/local/Ascend/ascend-toolkit/latest, CANN 8.0-8.3)")
    env: str | None = Field(
        None, description="Name of the env table (an envs key) set_env.sh corresponds to"
    )
    devlib: str | None = Field(
        None, pattern=DEVLIB_PATH, description="Build-only stub library dir; never in image ENV"
    )
    env_scripts: list[str] = Field(
        [],
        description="Scripts the toolkit ships to set its env ({version}: the toolkit's): the "
        "install step and `cannery verify` compare what they set with the image ENV",
    )
    install_args: list[str] = Field(
        ["--quiet", "--install"], description="Arguments every installer runs with")
    packages: list[Package] = Field(
        [], description="The installers, in install order (toolkit, then ops and nnal)")

    @field_validator(*HOST_FORBIDS)
    @classmethod
    def _host(cls, v: object, info: ValidationInfo) -> object:
        # runs only for keys written (defaults are not validated): each is its own error line
        if info.data.get("provided") == "host":
            raise ValueError(
                f"{info.field_name} has no effect on a toolkit the host provides (nothing "
                "installs it, and the image sets no toolkit ENV)"
            )
        return v

    @model_validator(mode="after")
    def _env_needed(self) -> Toolkit:
        if self.provided == "image" and self.env is None:
            raise ValueError("missing required key 'env' (a toolkit installed in the image)")
        return self
