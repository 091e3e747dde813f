"""The `[images]` table: an image's Python, stages, matrix and the image itself."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator
from pydantic.config import JsonDict, JsonValue

from cannery.catalog.models.common import (
    ABS_PATH,
    COMPAT_CODES,
    ENV_NAME,
    EXTENDS,
    LABEL_KEY,
    NAME,
    PY_VERSION,
    TAG_FIELD_DOCS,
    TAG_TEMPLATE,
    TAG_VALUE,
    USER_NAME,
    Strict,
    _env_names,
    _full,
    _https,
    _original_field,
    _relative,
    _schema,
)
from cannery.catalog.models.steps import (
    Budget,
    FileDownload,
    HostOverride,
    Override,
    PathEdit,
    Step,
)
from cannery.catalog.platforms import ARCHES, PLATFORM, platform_arch
from cannery.util.text import did_you_mean

PLATFORMS: list[JsonValue] = [*(f"linux/{a}" for a in ARCHES), "linux/arm64/v8"]
# A distribution package name (Debian and RPM naming both fit; nothing the shell expands).
OS_PACKAGE = r"^[A-Za-z0-9][A-Za-z0-9+._-]*$"


def _os_packages(v: list[str] | None) -> list[str] | None:
    """Distribution package names, each checked: they reach apt/dnf command lines."""
    for name in v or ():
        if not _full(OS_PACKAGE, name):
            raise ValueError(f"bad package name {name!r}")
    return v


# A Python source tarball's URL template: {version} only (one tarball for every platform).
PY_URL_TEMPLATE = r"^https://[^/@{}]+(/([^{}]|\{version\})*)?$"


def _python_rules() -> JsonDict:
    """PythonInstall's cross-field rules as JSON Schema (the model validator says the same)."""
    source: JsonDict = {"properties": {"install": {"const": "source"}}}
    return {
        "if": source,
        "then": {"required": ["url"], "not": {"required": ["packages"]}},
        "else": {
            "required": ["packages"],
            "not": {"anyOf": [{"required": ["url"]}, {"required": ["build_packages"]}]},
        },
    }


class PythonInstall(Strict):
    """``[images.X.python]``: the Python the image installs, from the distribution's packages or
    built from a source tarball (sha256 from the lock) in a builder stage."""

    model_config = ConfigDict(json_schema_extra=_python_rules())

    version: str = Field(
        pattern=PY_VERSION,
        description="The full version, e.g. 3.11.10 (filled into url; `python3 --version` is "
        "checked against it)",
    )
    install: Literal["packages", "source"] = Field(
        description="packages: the distribution's packages; source: built from url in a "
        "builder stage, the tarball checked against its sha256 from cannery.lock",
    )
    packages: list[str] | None = Field(
        None, min_length=1,
        description="install = packages: the distribution packages (apt or dnf, by the base's os)",
        json_schema_extra={"items": {"type": "string", "pattern": OS_PACKAGE}},
    )
    url: str | None = Field(
        None, description="install = source: https URL template of the tarball ({version})",
        json_schema_extra=_schema(PY_URL_TEMPLATE),
    )
    build_packages: list[str] | None = Field(
        None,
        description="install = source: what the builder stage installs to compile Python, never "
        "in the final image (default: cannery's list for the base's package manager)",
        json_schema_extra={"items": {"type": "string", "pattern": OS_PACKAGE}},
    )

    @field_validator("packages", "build_packages")
    @classmethod
    def _packages(cls, v: list[str] | None) -> list[str] | None:
        return _os_packages(v)

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        for name in re.findall(r"\{([^}]*)\}", v):
            if name != "version":
                raise ValueError(f"unknown template field {{{name}}} (known: version)")
        return _https(v, PY_URL_TEMPLATE)

    @model_validator(mode="after")
    def _one_way(self) -> PythonInstall:
        if self.install == "source" and (self.url is None or self.packages is not None):
            raise ValueError("install = \"source\" takes url (and no packages)")
        if self.install == "packages" and (
            self.packages is None or self.url is not None or self.build_packages is not None
        ):
            raise ValueError("install = \"packages\" takes packages (and no url or build_packages)")
        return self

    @property
    def minor(self) -> str:
        """``3.11`` of ``3.11.10``: what tags and the Python resolution use."""
        return ".".join(self.version.split(".")[:2])


# Stage names the renderer uses itself (the base, per-arch and final stages, its own builders).
RESERVED_STAGE = r"^(base|image|arch-.*|cannery-.*)$"


class Stage(Strict):
    """A builder stage rendered before the final one: its packages stay in it, and only its
    ``outputs`` reach the image (``COPY --from=NAME``, at the same path)."""

    name: str = Field(
        pattern=NAME, description="Stage name (not base, image, arch-*, cannery-*)",
        json_schema_extra={"not": {"pattern": RESERVED_STAGE}},
    )
    base: str | None = Field(None, description="A bases key (default: the image's base)")
    packages: list[str] = Field(
        [], description="Build-only distribution packages: never in the final image",
        json_schema_extra={"items": {"type": "string", "pattern": OS_PACKAGE}},
    )
    steps: list[Step] = Field([], description="What the stage runs, in order")
    outputs: list[str] = Field(
        min_length=1,
        description="Absolute paths copied into the final image at the same path",
        json_schema_extra={
            "items": {"type": "string", "pattern": ABS_PATH, "not": {"const": "/"}},
            "uniqueItems": True,
        },
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if _full(RESERVED_STAGE, v):
            raise ValueError(f"stage name {v!r} is reserved (base, image, arch-*, cannery-*)")
        return v

    @field_validator("packages")
    @classmethod
    def _packages(cls, v: list[str]) -> list[str]:
        return _os_packages(v) or []

    @field_validator("outputs")
    @classmethod
    def _outputs(cls, v: list[str]) -> list[str]:
        for path in v:
            if not _full(ABS_PATH, path) or path == "/":
                raise ValueError(f"output {path!r}: give an absolute path below /")
        if len(set(v)) != len(v):
            raise ValueError("an output is listed twice")
        return v

    @field_validator("steps")
    @classmethod
    def _stage_steps(cls, v: list[Step]) -> list[Step]:
        # a builder stage's steps run in that stage: a place in the final image means nothing
        for i, step in enumerate(v):
            if step.at is not None:
                raise ValueError(f"steps[{i}].at: a builder stage's steps run in the stage, "
                                 "in order; `at` places an image's step")
        return v


class Matrix(Strict):
    """An image entry's matrix (catalog/matrix.py expands it before the images are
    validated): every key but these three is an axis, an array of words or of
    ``{ value = "word", <image fields> }`` tables."""

    # the axes are the extra keys; `cannery schema` describes them (commands/schema.py)
    model_config = ConfigDict(extra="allow", frozen=True, strict=True)
    name: str | None = Field(
        None, description="The expanded images' names: a template of {matrix.AXIS}s "
        "(default: the entry's name and its words, joined by '-')")
    include: list[dict[str, Any]] = Field(
        [], description="Tables of axis words and image fields: the fields are set on every "
        "image whose words match; one that matches none and names every axis adds that image")
    exclude: list[dict[str, str]] = Field(
        [], description="Tables of axis words: the images whose words match one are not made")


class Image(Strict):
    extends: str | None = EXTENDS
    matrix: Matrix | None = Field(
        None, description="Expand this entry into one image per combination of the axes' "
        "words (matrix.AXIS = [...]); {matrix.AXIS} in its strings is the image's word")
    base: str = Field(
        description="A bases key, or image:NAME to build FROM the catalog's image NAME (built "
        "and pushed first; pinned by the digest it was pushed with)"
    )
    toolkit: str | None = Field(None, description="A toolkits key; omitted: no toolkit")
    soc: str | None = Field(
        None, description="SOC_VERSION, e.g. ascend910b1; omitted for a chip-generic image"
    )
    python: PythonInstall | None = Field(
        None, description="Python installed by the image (omitted: the base's python)"
    )
    stages: list[Stage] = Field(
        [], description="Builder stages, rendered before the final stage in this order"
    )
    recipe: str = Field("", pattern=TAG_VALUE, description="A word for the image's variant "
                        "(the {recipe} tag field)")
    platforms: list[str] = Field(
        min_length=1,
        description="The platforms built (linux/amd64, linux/arm64), each on its own runner",
        json_schema_extra={"items": {"type": "string", "enum": PLATFORMS}, "uniqueItems": True},
    )
    tag: str = Field(
        description="Tag template: tag characters and {field}s, each as written except "
        "{cann}: " + "; ".join(f"{{{k}}} {v}" for k, v in TAG_FIELD_DOCS.items())
        + "; {<component>}: a component's version ('-' and '.' of its name as '_'), as "
        "written; `cannery plan` shows each field's value",
        json_schema_extra=_schema(TAG_TEMPLATE),
    )
    registry: str | None = Field(
        None, description="The registry it is pushed to first (default: catalog.registry)")
    mirrors: list[str] | None = Field(
        None, description="Registries this image is also published to (default: catalog.mirrors)"
    )
    packages: list[str] = Field(
        [],
        description="Distribution packages, installed with the base's package manager",
        json_schema_extra={"items": {"type": "string", "pattern": OS_PACKAGE}},
    )
    pip_tools: list[str] = Field(
        [], description="Python tools installed before the components (pinned: pip==25.1)")
    installer: Literal["pip", "uv"] = Field(
        "pip",
        description="What installs the image's components after its Python tools: pip, or uv "
        "(`uv pip install --system --system-certs`; needs in pip_tools a uv that has "
        "--system-certs, such as 0.13.9, which pip installs before the components)",
    )
    components: list[str] = Field([], description="The components it installs, in order")
    revision_from: str | None = Field(
        None, description="The component whose commit or version is the image's revision label")
    smoke_imports: list[str] = Field(
        [], description="Python modules `cannery verify` imports in the built image"
    )
    acknowledge: list[str] = Field(
        [], description="Compatibility warnings accepted for this image",
        json_schema_extra={"items": {"type": "string", "enum": list(COMPAT_CODES)}},
    )
    labels: dict[str, str | Override] = Field(
        {}, description="Image labels; one that cannery writes itself (org.opencontainers.image."
        "source, version, base.name, base.digest, revision) only as { value = \"...\", override "
        "= true }; the io.cannery.* labels are cannery's (verify reads them)",
        json_schema_extra={"propertyNames": {"pattern": LABEL_KEY,
                                             "not": {"pattern": r"^io\.cannery\."}}},
    )
    # Image settings for the running container; set after every build step.
    env: dict[str, str | PathEdit | Override] = Field(
        {}, description="Runtime env: a value, or {append|prepend|replace = [...]} for a path "
        "list; a plain variable the toolkit's env sets only as { value = \"...\", override = "
        "true }",
        json_schema_extra={"propertyNames": {"pattern": ENV_NAME}},
    )
    workdir: str | None = Field(None, pattern=ABS_PATH, description="The container's "
                                "working directory")
    user: str | None = Field(
        None, pattern=USER_NAME, description="Runs as this user, created if the base lacks it"
    )
    entrypoint: list[str] | None = Field(None, min_length=1, description="The container's "
                                         "ENTRYPOINT (exec form)")
    cmd: list[str] | None = Field(None, min_length=1, description="Default: [\"/bin/bash\"]")
    aliases: list[str] = Field(
        [], description="More tags (templates) for the same index: rolling, latest-style",
        json_schema_extra={
            "items": {"type": "string", "pattern": TAG_TEMPLATE}, "uniqueItems": True
        },
    )
    steps: list[Step] = Field(
        [], description="Steps, in order, each at its place (`at`; default after the installs)"
    )
    downloads: list[FileDownload] = Field(
        [], description="Files the build fetches, checked against the lock's sha256 and placed "
        "at a path (each at its place, like a step)",
    )
    budget: Budget | None = Field(
        None, description="Size budget per platform, replacing the catalog's field by field"
    )
    host: HostOverride | None = Field(
        None, description="What it needs of a node (chips, oldest driver and firmware), "
        "replacing the built-in table's row for its CANN release field by field",
    )
    original: str | None = _original_field("Dockerfile this image")

    @field_validator("original")
    @classmethod
    def _original(cls, v: str | None) -> str | None:
        return _relative(v)

    @field_validator("env")
    @classmethod
    def _env(
        cls, v: dict[str, str | PathEdit | Override]
    ) -> dict[str, str | PathEdit | Override]:
        _env_names(v)
        return v

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: dict[str, str | Override]) -> dict[str, str | Override]:
        for key in v:
            if not _full(LABEL_KEY, key):
                raise ValueError(f"label key {key!r}: use letters, digits and . _ / - only")
            if key.startswith("io.cannery."):
                raise ValueError(f"label {key!r}: the io.cannery.* labels are cannery's own "
                                 "(build and verify read them); use another prefix")
        return v

    def label_values(self) -> dict[str, str]:
        """The image's own labels, key → value (an override's value)."""
        return {k: v if isinstance(v, str) else v.value for k, v in self.labels.items()}

    @field_validator("aliases")
    @classmethod
    def _aliases(cls, v: list[str]) -> list[str]:
        for alias in v:
            cls._tag(alias)
        if len(set(v)) != len(v):
            raise ValueError("an alias is listed twice")
        return v

    @field_validator("packages")
    @classmethod
    def _packages(cls, v: list[str]) -> list[str]:
        return _os_packages(v) or []

    @field_validator("platforms")
    @classmethod
    def _platforms(cls, v: list[str]) -> list[str]:
        for p in v:
            if not PLATFORM.fullmatch(p):
                raise ValueError(f"bad platform {p!r}: expected os/arch such as linux/arm64")
        seen: dict[str, str] = {}
        for p in v:
            arch = platform_arch(p)
            if arch in seen:
                other = seen[arch]
                raise ValueError(
                    f"platform {p!r} listed twice"
                    if other == p
                    else f"platforms {other!r} and {p!r} overlap (both are {arch})"
                )
            seen[arch] = p
        return v

    @field_validator("acknowledge")
    @classmethod
    def _acknowledge(cls, v: list[str]) -> list[str]:
        for code in v:
            if code not in COMPAT_CODES:
                raise ValueError(
                    f"unknown warning code {code!r} ({did_you_mean(code, COMPAT_CODES)})"
                )
        return v

    @field_validator("tag")
    @classmethod
    def _tag(cls, v: str) -> str:  # also checks each alias; the loader checks field names
        if not _full(TAG_TEMPLATE, v):
            raise ValueError(
                f"tag {v!r}: use letters, digits, '_', '.', '-' and {{field}}s only"
            )
        return v
