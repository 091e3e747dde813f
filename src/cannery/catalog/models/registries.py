"""The `[catalog]` table and the `[registries]` push targets."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from cannery.catalog.models.common import (
    HTTPS_URL,
    REPOSITORY,
    SECRET_NAME,
    TAG_VALUE,
    WORKFLOW_TEXT,
    Strict,
    _https,
    _schema,
)


class CatalogMeta(Strict):
    name: str = Field(pattern=WORKFLOW_TEXT, description="The catalog's name (in generated "
                      "files' headers and the workflow's name)")
    source: str = Field(description="Source repository, the org.opencontainers.image.source label")
    registry: str | None = Field(None, description="Default registry for images (a registries key)")
    mirrors: list[str] = Field(
        [],
        description="Registries (registries keys) every image is also published to, by digest, "
        "unless the image names its own mirrors",
    )
    version: str | None = Field(
        None, pattern=TAG_VALUE,
        description="The catalog's own release, e.g. 0.9.2: the {version} tag field",
    )
    python_index: str = Field(
        "https://pypi.org/simple",
        description="Python package index `cannery lock` resolves against and images install from",
        json_schema_extra=_schema(HTTPS_URL),
    )

    @field_validator("python_index")
    @classmethod
    def _index(cls, v: str) -> str:
        return _https(v)


class PushTarget(Strict):
    """A ``[registries.NAME]`` table: where images are pushed (the OCI client is elsewhere)."""

    repository: str = Field(
        description="Repository images are pushed to, e.g. quay.io/ascend/verl",
        json_schema_extra=_schema(REPOSITORY.pattern),
    )
    user_secret: str = Field(
        "REGISTRY_USER", pattern=SECRET_NAME,
        description="CI secret holding the registry user (the rendered workflow reads it)",
    )
    user_var: str | None = Field(
        None, pattern=SECRET_NAME,
        description="CI variable (vars.NAME) holding the registry user, read instead of "
        "user_secret: a user name is not secret",
    )
    password_secret: str = Field(
        "REGISTRY_PASSWORD", pattern=SECRET_NAME,
        description="CI secret holding the registry password or token",
    )
    media_types: Literal["oci", "docker"] = Field(
        "oci",
        description="Index media type this registry is given: oci (an OCI image index) or "
        "docker (a Docker manifest list, for registries such as Huawei SWR that refuse OCI "
        "indexes); platform manifests are Docker v2s2 everywhere, so their digests are equal",
    )

    @model_validator(mode="after")
    def _one_user(self) -> PushTarget:
        if self.user_var is not None and "user_secret" in self.model_fields_set:
            raise ValueError("user_var and user_secret both name the registry user: keep one")
        return self

    @property
    def user_expression(self) -> str:
        """The workflow expression of the registry user: ``${{ vars.X }}`` or ``${{ secrets.X
        }}``."""
        if self.user_var is not None:
            return f"${{{{ vars.{self.user_var} }}}}"
        return f"${{{{ secrets.{self.user_secret} }}}}"

    @field_validator("repository")
    @classmethod
    def _repository(cls, v: str) -> str:
        if REPOSITORY.fullmatch(v):
            return v
        if ":" in v.rsplit("/", 1)[-1] or "@" in v:
            raise ValueError(f"{v!r}: give the repository only, without a tag or digest")
        if REPOSITORY.match(v.lower()):
            raise ValueError(f"{v!r}: a repository path must be lower case")
        raise ValueError(f"{v!r} is not a valid repository name (e.g. quay.io/ascend/verl)")
