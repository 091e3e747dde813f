"""The `[families]` table and the compatibility matrix (`[compat]`)."""

from __future__ import annotations

from pydantic import Field

from cannery.catalog.models.common import TAG_VALUE, Strict


class Family(Strict):
    description: str = Field("", description="What the family is (Atlas 800T A2 …)")
    chip: str = Field(pattern=TAG_VALUE, description="Chip token of the family's base images")
    socs: list[str] = Field(description="Its SOC_VERSIONs (ascend910b1 …)")


class CompatRow(Strict):
    vllm_ascend: str = Field(description="vllm-ascend's version")
    vllm: str = Field(description="The vllm it supports")
    python: str = Field(description="The Pythons, as the table writes them")
    cann: str = Field(description="The CANN version")
    torch: str = Field(description="The torch version")
    torch_npu: str = Field(description="The torch_npu version")


class Compat(Strict):
    source: str = Field("", description="Where the table was read from")
    date: str = Field("", description="When it was read")
    rows: list[CompatRow] = Field([], description="The supported combinations")


EnvValue = str | list[str]
