"""An image's settings and steps: path edits, budgets, overrides, alternatives, symlinks,
steps and file downloads."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator
from pydantic.config import JsonDict

from cannery.catalog.models.common import (
    ABS_PATH,
    ALTERNATIVE_NAME,
    DOWNLOAD_NAME,
    EXTRA_NAME,
    HDK_VERSION,
    ONE_LINE,
    SECRET_NAME,
    TAG_VALUE,
    URL_TEMPLATE,
    Strict,
    _full,
    _schema,
    _url_template,
)
from cannery.util.sizes import SIZE

# ---------------------------------------------------------------- image settings and steps


def _one_of(*keys: str) -> JsonDict:
    return {"oneOf": [{"required": [k]} for k in keys]}


class PathEdit(Strict):
    """A search-path variable changed relative to what is already set (the toolkit's list, or
    the base image's): append, prepend, both (entries on either side of the current value), or
    replace alone."""

    model_config = ConfigDict(json_schema_extra={
        "anyOf": [{"required": [k]} for k in ("append", "prepend", "replace")],
        "not": {"required": ["replace"],
                "anyOf": [{"required": ["append"]}, {"required": ["prepend"]}]},
    })

    append: list[str] | None = Field(None, description="Added after the current value")
    prepend: list[str] | None = Field(None, description="Added before the current value")
    replace: list[str] | None = Field(None, description="The whole value, the current one dropped")

    @model_validator(mode="after")
    def _one(self) -> PathEdit:
        if self.replace is not None and (self.append is not None or self.prepend is not None):
            raise ValueError("replace drops the current value: give it alone, or append and/or "
                             "prepend")
        if self.append is None and self.prepend is None and self.replace is None:
            raise ValueError("give append, prepend (or both), or replace")
        return self

    @property
    def mode(self) -> str:
        return next(k for k in ("prepend", "append", "replace") if getattr(self, k) is not None)

    @property
    def items(self) -> list[str]:
        return list(getattr(self, self.mode))

    @property
    def appended(self) -> list[str]:
        """With both prepend and append: the entries added after the current value."""
        return list(self.append or ()) if self.mode == "prepend" else []


class Budget(Strict):
    """What an image may weigh, per platform; `cannery verify` fails an image over it, naming
    the layer and the step that made it. Each field set replaces the catalog's."""

    compressed: str | None = Field(
        None, pattern=SIZE, description="Most compressed bytes of the layers a pull downloads"
    )
    layer: str | None = Field(
        None, pattern=SIZE,
        description="Largest compressed layer (default 10GB: GHCR refuses larger ones)",
    )
    wasted: float | None = Field(
        None, ge=0, le=1,
        description="Largest share of the layers' file bytes that a later layer removes or "
        "overwrites (0.1: 10 %); checking it reads every layer",
    )


class HostOverride(Strict):
    """What the image needs of a node, where the built-in table (ascend.toml ``[[hosts]]``) has
    no row for its CANN release or the image knows better: each field set replaces the table's."""

    chips: list[str] | None = Field(
        None, min_length=1, description="Chips the image runs on (default: the base's chip)",
        json_schema_extra={"items": {"type": "string", "pattern": TAG_VALUE}, "uniqueItems": True},
    )
    driver: str | None = Field(
        None, pattern=HDK_VERSION, description="Oldest NPU driver it runs with (24.1.rc2)"
    )
    firmware: str | None = Field(
        None, pattern=HDK_VERSION, description="Oldest NPU firmware it runs with (7.3.0.1.231)"
    )


class Override(Strict):
    """``{ value = "...", override = true }``: a label or variable that replaces one cannery
    writes itself (an OCI label, a variable of the toolkit's env), said on purpose."""

    value: str = Field(description="The value written instead of cannery's")
    override: Literal[True] = Field(
        description="Must be true: this entry replaces the label or variable cannery writes"
    )


class Alternative(Strict):
    """`update-alternatives --install LINK NAME PATH PRIORITY` (Debian and openEuler alike)."""

    name: str = Field(pattern=ALTERNATIVE_NAME, description="The alternative's name (python3)")
    link: str = Field(pattern=ABS_PATH, description="The generic link (/usr/bin/python3)")
    path: str = Field(pattern=ABS_PATH, description="What it points to")
    priority: int = Field(ge=0, description="Its priority")


class Symlink(Strict):
    target: str = Field(pattern=ABS_PATH, description="What the link points to")
    link: str = Field(pattern=ABS_PATH, description="The link created (its directory too)")


STEP_KINDS = ("uninstall", "alternatives", "symlink", "ldconfig", "run")
# Where an image's step runs; the default is the place steps had before `at` existed.
STEP_PLACES = ("before-toolkit", "before-components", "after-components")


class Step(Strict):
    """One step: a typed one, or `run` (shell, linted at render time); an image's step may say
    where it runs (`at`)."""

    model_config = ConfigDict(json_schema_extra=_one_of(*STEP_KINDS))

    uninstall: list[str] | None = Field(
        None, min_length=1, description="Python distributions to remove (pip uninstall -y)",
        json_schema_extra={"items": {"type": "string", "pattern": EXTRA_NAME}},
    )
    alternatives: Alternative | None = Field(
        None, description="An update-alternatives entry")
    symlink: Symlink | None = Field(None, description="A symbolic link")
    ldconfig: Literal[True] | None = Field(None, description="Refresh the dynamic linker cache")
    run: str | None = Field(
        None, min_length=1, pattern=ONE_LINE,
        description="Shell for what no typed step says; linted with cannery's Dockerfile rules",
    )
    at: Literal["before-toolkit", "before-components", "after-components"] | None = Field(
        None,
        description=(
            "Where an image's step runs: before-toolkit (after the system packages and the "
            "builder stages' outputs, before the CANN toolkit is installed), before-components "
            "(after the toolkit, before the locked Python dependencies and the components), "
            "after-components (the default: after every install). Not in a builder stage"
        ),
    )

    @field_validator("uninstall")
    @classmethod
    def _names(cls, v: list[str] | None) -> list[str] | None:
        for name in v or ():
            if not _full(EXTRA_NAME, name):
                raise ValueError(f"bad distribution name {name!r}")
        return v

    @model_validator(mode="after")
    def _one(self) -> Step:
        given = [k for k in STEP_KINDS if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                "a step is exactly one of uninstall, alternatives, symlink, ldconfig, run"
            )
        return self

    @property
    def kind(self) -> str:
        return next(k for k in STEP_KINDS if getattr(self, k) is not None)


class FileDownload(Strict):
    """A file the build fetches: `cannery lock` records its sha256 (and size) per platform, the
    build checks the bytes against it before anything uses them, then places them at `path`
    (as a file, marked executable or not, or unpacked into that directory)."""

    name: str = Field(pattern=DOWNLOAD_NAME,
                      description="A name for messages and the build's shell variables")
    url: str | None = Field(
        None, description="https URL; {arch} (amd64) and {uname_arch} (x86_64) are filled in "
        "per platform", json_schema_extra=_schema(URL_TEMPLATE),
    )
    url_secret: str | None = Field(
        None, pattern=SECRET_NAME,
        description="Instead of url: the environment variable that holds the URL (a presigned "
        "one, with its credential); `cannery lock` reads it to pin the sha256, the build hands "
        "it to the one RUN that fetches the file as a build secret (never in the Dockerfile, "
        "the lock, a log or the image). One file for every platform",
    )
    path: str = Field(
        pattern=ABS_PATH, description="Where it lands: the file (made with its directories), or "
        "with unpack the directory the archive is unpacked into",
    )
    unpack: bool = Field(False, description="A tar archive: unpack it (owned by root; a "
                         "compressed one needs its decompressor, gzip or xz, in the image)")
    executable: bool = Field(False, description="Mark the file executable (0755; else 0644)")
    at: Literal["before-toolkit", "before-components", "after-components"] = Field(
        "after-components",
        description="When it is fetched: at the same places as a step, before the steps placed "
        "there",
    )

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if "{version}" in v:
            raise ValueError("unknown template field {version} (known: arch, uname_arch)")
        return _url_template(v)

    @field_validator("url_secret")
    @classmethod
    def _own_name(cls, v: str | None) -> str | None:
        # the build step's own variables, cannery's, GitHub's and the shell's: a secret of
        # that name would replace one of them in the step that gets it
        taken = {"PLATFORM", "BUILDER", "FORCE", "BASE_DIGEST", "EXTRA_TAGS", "IMAGE_REF",
                 "PATH", "HOME", "SHELL", "USER", "PWD", "IFS", "TMPDIR", "LANG"}
        if v is not None and (v.upper() in taken or v.upper().startswith(
                ("CANNERY_", "GITHUB_", "RUNNER_", "ACTIONS_", "DOCKER_", "BUILDAH_", "LD_"))):
            raise ValueError(f"url_secret {v!r}: the build step or its tools use that name; "
                             "pick another (WEIGHTS_URL)")
        return v

    @model_validator(mode="after")
    def _unpacked(self) -> FileDownload:
        if (self.url is None) == (self.url_secret is None):
            raise ValueError("give url or url_secret (the variable that holds a URL with its "
                             "credential), one of them")
        if self.unpack and self.executable:
            raise ValueError("executable has no effect with unpack (the archive keeps its modes)")
        if self.path == "/" or (self.path.endswith("/") and not self.unpack):
            raise ValueError(f"path {self.path!r}: give the file's path")
        if any(part in (".", "..") for part in self.path.split("/")) or "//" in self.path:
            raise ValueError(f"path {self.path!r}: write it without '.', '..' or '//'")
        return self
