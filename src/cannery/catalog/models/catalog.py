"""The root `Catalog`: every table, and the checks that run across them."""

from __future__ import annotations

from pydantic import Field, field_validator
from pydantic.config import JsonDict

from cannery.catalog.models.bases import Base
from cannery.catalog.models.ci import Ci
from cannery.catalog.models.common import ENV_NAME, NAME, Strict, _env_names, _full
from cannery.catalog.models.components import Component
from cannery.catalog.models.families import Compat, EnvValue, Family
from cannery.catalog.models.images import Image
from cannery.catalog.models.mirrors import BuildMirrors
from cannery.catalog.models.registries import CatalogMeta, PushTarget
from cannery.catalog.models.steps import Budget
from cannery.catalog.models.toolkits import Toolkit

NAMED: JsonDict = {"propertyNames": {"pattern": NAME}}


class Catalog(Strict):
    catalog: CatalogMeta = Field(description="The catalog's name, source and defaults")
    registries: dict[str, PushTarget] = Field(
        {}, json_schema_extra=NAMED, description="Where images are published, by name")
    bases: dict[str, Base] = Field(
        {}, json_schema_extra=NAMED, description="Base images and what each already ships")
    envs: dict[str, dict[str, EnvValue]] = Field(
        {},
        description="Toolkit environments by name: what set_env.sh exports (a list: a search "
        "path)",
        json_schema_extra={
            "propertyNames": {"pattern": NAME},
            "additionalProperties": {
                "type": "object",
                "propertyNames": {"pattern": ENV_NAME},
                "additionalProperties": {
                    "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]
                },
            },
        },
    )
    toolkits: dict[str, Toolkit] = Field(
        {}, json_schema_extra=NAMED, description="CANN toolkits: version, installers, env")
    components: dict[str, Component] = Field(
        {}, json_schema_extra=NAMED, description="What images install: pip packages, git "
        "sources, wheels, checkout directories")
    images: dict[str, Image] = Field(
        {}, json_schema_extra=NAMED, description="The images to build, by name")
    families: dict[str, Family] = Field(
        {}, description="SoC families (A2, A3): their chip token and SOC_VERSIONs (cannery's "
        "own table is merged in)")
    compat: Compat = Field(
        Compat(), description="A compatibility table (vllm-ascend's) the images are checked "
        "against")
    ci: Ci = Field(Ci(), description="The generated CI: triggers, runners, files, secrets")
    build_mirrors: BuildMirrors = Field(
        BuildMirrors(), description="Mirrors the build fetches packages and Python from "
        "(what is locked and labelled stays the original)")
    budget: Budget = Field(
        Budget(), description="Every image's size budget per platform (an image's replaces it "
        "field by field)",
    )

    @field_validator("registries", "bases", "envs", "toolkits", "components", "images")
    @classmethod
    def _names(cls, v: dict[str, object]) -> dict[str, object]:
        for key in v:
            if not _full(NAME, key):
                raise ValueError(f"name {key!r}: use lowercase letters, digits, '-', '_', '.'")
        return v

    @field_validator("envs")
    @classmethod
    def _env_vars(cls, v: dict[str, dict[str, EnvValue]]) -> dict[str, dict[str, EnvValue]]:
        for env in v.values():
            _env_names(env)
        return v

    def family_of(self, soc: str | None) -> str | None:
        """The SoC family (A2, A3, …) that ``soc`` belongs to, or None (also for no SoC)."""
        return next((f for f, fam in self.families.items() if soc in fam.socs), None)

    def family_for(self, image: str) -> str | None:
        """The image's SoC family: its soc's; for a chip-generic image (no soc), the one family
        of its base's chip (the ops packages of that family fit every SoC of it), else None."""
        img = self.images[image]
        if img.soc is not None:
            return self.family_of(img.soc)
        chip = self.bases[img.base].chip
        fams = [f for f, fam in self.families.items() if fam.chip == chip]
        return fams[0] if len(fams) == 1 else None

    def python_of(self, image: str) -> str | None:
        """The image's Python as ``3.11``: the one it installs, else the base's, else None."""
        img = self.images[image]
        return img.python.minor if img.python else self.bases[img.base].python

    def published_to(self, image: str) -> list[str]:
        """The registries keys the image is published to: its own registry, then its mirrors
        (its list, else the catalog's), each once."""
        img = self.images[image]
        registry = img.registry or self.catalog.registry or ""
        return list(dict.fromkeys(
            [registry, *(self.catalog.mirrors if img.mirrors is None else img.mirrors)]))

    def toolkit_of(self, image: str) -> Toolkit | None:
        """The image's toolkit (installed, shipped by the base, or the host's), or None."""
        img = self.images[image]
        return self.toolkits[img.toolkit] if img.toolkit is not None else None
