"""The `[bases]` table: the images a family builds on."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from cannery.catalog.models.common import (
    EXTENDS,
    OS_FAMILIES,
    PACKAGE_MANAGERS,
    PY_MINOR,
    TAG_VALUE,
    TAGGED_IMAGE,
    OsName,
    PackageManager,
    Strict,
    _full,
    _schema,
    default_package_manager,
)


class Base(Strict):
    extends: str | None = EXTENDS
    image: str = Field(
        description="Base image reference with a tag; `cannery lock` pins its digest",
        json_schema_extra=_schema(TAGGED_IMAGE),
    )
    python: str | None = Field(
        None, pattern=PY_MINOR,
        description="The Python the base image ships (\"3.11\"); omitted: it ships none",
    )
    os: OsName = Field(
        description="The base's /etc/os-release ID (`cannery lock` reads it and refuses another); "
        "decides the package manager: apt (ubuntu, debian), dnf (openeuler, fedora, rocky, "
        "almalinux, centos, rhel; yum for centos and rhel 7), apk (alpine)"
    )
    os_version: str = Field(pattern=TAG_VALUE, description="The base's VERSION_ID (22.04; a "
                            "point release the lock reads, such as 3.20.3, is of 3.20)")
    package_manager: PackageManager | None = Field(
        None, description="Another package manager of the OS's family than its default "
        "(microdnf for a UBI minimal base, yum for an rpm base without dnf)",
    )
    chip: str | None = Field(
        None, pattern=TAG_VALUE,
        description="Chip token of the base image tag: 910b, a3, 310p, 950; omitted for a "
        "plain OS base, which only images with no toolkit and no soc can use",
    )
    toolkit_version: str | None = Field(None, description="CANN version the base already ships")

    @model_validator(mode="after")
    def _manager_fits(self) -> Base:
        family = OS_FAMILIES[self.os]
        if self.package_manager is not None and (
            self.package_manager not in PACKAGE_MANAGERS[family]
        ):
            raise ValueError(
                f"package_manager {self.package_manager!r}: {self.os} installs with "
                f"{' or '.join(PACKAGE_MANAGERS[family])}"
            )
        return self

    @property
    def manager(self) -> str:
        """The package manager the base's images install with."""
        return self.package_manager or default_package_manager(self.os, self.os_version)

    @field_validator("image")
    @classmethod
    def _tagged(cls, v: str) -> str:
        last = v.rsplit("/", 1)[-1]
        if "@" in v:
            raise ValueError("give the tag, not a digest: `cannery lock` records the digest")
        if ":" not in last:
            raise ValueError(f"base image {v!r} has no tag")
        if not _full(TAGGED_IMAGE, v):
            raise ValueError(f"base image {v!r} is not a reference name:tag")
        return v
