"""The `[components]` table: what an image installs from git, pip, a wheel or a path."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic.config import JsonDict

from cannery.catalog.models.common import (
    ABS_PATH,
    ENV_NAME,
    EXTENDS,
    EXTRA_NAME,
    GIT_URL,
    HTTPS_URL,
    REL_PATH,
    URL_TEMPLATE,
    VERSION,
    Strict,
    _env_names,
    _full,
    _git_ref,
    _git_ref_schema,
    _https,
    _inside_repo,
    _no_userinfo,
    _relative,
    _schema,
    _url_template,
)
from cannery.catalog.platforms import ARCHES
from cannery.util.text import did_you_mean


class Jobs(Strict):
    limit: int = Field(ge=1, description="At most this many parallel compile jobs")
    reason: str = Field(min_length=3, description="Why (said in the rendered step)")


# Fields that only a component built from source (git, or a path of the checkout) uses: on a
# pip or wheel component they would have no effect, so they are errors there.
BUILT = (
    "subdir", "extras", "pyproject", "requirements", "build_env", "toolkit_build", "jobs", "dest"
)
GIT_ONLY = ("ref", *BUILT)
SOURCES = ("git", "pip", "wheel", "path")
# Fields that act on the component's own build and install: with install = "none" (the tree
# is fetched, and only its requirements files are installed) they would have no effect.
INSTALLED_ONLY = (
    "subdir", "extras", "pyproject", "pip_args", "build_env", "toolkit_build", "jobs"
)


# A wheel bundle's URL (cannery.catalog.inputs.BUNDLES) and a pattern of its wheels' names
# (written inside double quotes in the Dockerfile's `find -name`: nothing the shell expands).
BUNDLE_URL = r"\.(zip|tar\.gz|tgz)$"
BUNDLE_WHEEL_PATTERN = r"^([A-Za-z0-9._+*?-]|\{uname_arch\})+$"


def _component_rules() -> JsonDict:
    """The cross-field rules of Component, as JSON Schema (the model validators below say the
    same): one source per entry; git-only fields and `pin` only with their source; an entry that
    does not `extends` another needs a source, and a git source needs a ref."""
    def has(*keys: str) -> JsonDict:
        return {"required": list(keys)}

    return {
        "allOf": [
            {"not": {"anyOf": [
                has(a, b) for i, a in enumerate(SOURCES) for b in SOURCES[i + 1:]
            ]}},
            {
                "if": {"anyOf": [has("pip"), has("wheel")]},
                "then": {
                    "not": {"anyOf": [has(f) for f in GIT_ONLY]},
                    "properties": {"install": {"const": "pip"}},
                },
            },
            {"if": has("path"), "then": {"not": has("ref")}},
            {"if": has("bundle_wheels"), "then": {
                "required": ["wheel"], "properties": {"wheel": {"pattern": BUNDLE_URL}}}},
            {"if": has("pip"), "then": {"not": has("pip_args")}},
            {
                "if": {"required": ["install"], "properties": {"install": {"const": "none"}}},
                "then": {"not": {"anyOf": [has(f) for f in INSTALLED_ONLY]}},
            },
            {
                "if": has("git", "dest"),
                "then": {"required": ["install"],
                         "properties": {"install": {"enum": ["editable", "none"]}}},
            },
            {"if": {"anyOf": [has("git"), has("wheel"), has("path")]},
             "then": {"properties": {"pin": {"const": False}}}},
            {
                "if": {"not": has("extends")},
                "then": {
                    "anyOf": [has(k) for k in SOURCES],
                    "if": has("git"),
                    "then": has("ref"),
                },
            },
        ]
    }


class Component(Strict):
    model_config = ConfigDict(json_schema_extra=_component_rules())

    extends: str | None = EXTENDS
    git: str | None = Field(
        None, description="Git repository URL", json_schema_extra=_schema(GIT_URL)
    )
    pip: list[str] | None = Field(None, description="pip requirement specifiers")
    wheel: str | None = Field(
        None,
        description="https URL template of a wheel, or a .zip/.tar.gz of wheels "
                    "({uname_arch}, {arch})",
        json_schema_extra=_schema(URL_TEMPLATE),
    )
    bundle_wheels: list[str] | None = Field(
        None, min_length=1,
        description="A bundle (.zip/.tar.gz) wheel only: install only its wheels whose file "
                    "names match one of these patterns (* and ?; {uname_arch} is the platform's "
                    "`uname -m`), among those for the platform; default every one for it",
        json_schema_extra={"items": {"type": "string", "pattern": BUNDLE_WHEEL_PATTERN}},
    )
    path: str | None = Field(
        None,
        description="A directory of the repository being built (the build context, e.g. \".\"),"
                    " copied in; its commit is read from git at build time",
        json_schema_extra=_inside_repo(REL_PATH.pattern),
    )
    dest: str | None = Field(
        None, pattern=ABS_PATH,
        description="Where the source tree goes in the image (default /opt/src/NAME)",
    )
    ref: str | None = Field(
        None, min_length=1,
        description="Tag, branch, full commit, or a commit prefix of 7-39 hex digits; "
                    "`cannery lock` pins it to a full commit",
        json_schema_extra=_git_ref_schema(),
    )
    package: str | None = Field(
        None, pattern=EXTRA_NAME, description="Distribution name, if not the component name"
    )
    version: str | None = Field(
        None, pattern=VERSION, description="Release this source corresponds to (for compat)"
    )
    install: Literal["pip", "editable", "none"] = Field(
        "pip", description="git and path only: editable keeps the tree; none only fetches it "
                           "and installs its requirements files"
    )
    subdir: str | None = Field(
        None, description="Directory of the Python project in the repo",
        json_schema_extra=_inside_repo(REL_PATH.pattern),
    )
    extras: list[str] = Field(
        [], description="Extras to install, e.g. all_npu",
        json_schema_extra={"items": {"type": "string", "pattern": EXTRA_NAME}},
    )
    pyproject: str | None = Field(
        None, description="File in the project directory to build with as its pyproject.toml",
        json_schema_extra=_inside_repo(REL_PATH.pattern),
    )
    requirements: list[str] = Field(
        [], description="Requirements files in the component's source (paths in it), "
        "installed before it")
    pip_args: list[str] = Field([], description="More arguments for the pip install")
    build_env: dict[str, str] = Field(
        {}, json_schema_extra={"propertyNames": {"pattern": ENV_NAME}},
        description="Environment of the install step only (not kept in the image)",
    )
    toolkit_build: bool = Field(False, description="Compiles against CANN (devlib, SOC_VERSION)")
    jobs: Jobs | None = Field(
        None, description="A cap on parallel compile jobs, and why (MAX_JOBS)")
    pin: bool = Field(False, description="Installed first; later installs are constrained to it")
    extra_index: dict[str, str | list[str]] = Field(
        {},
        description="Extra package indexes per TARGETARCH (amd64, arm64, …): a URL or a list; "
                    "used by `cannery lock` and in the build's pip commands, never saved in the "
                    "image",
        json_schema_extra={
            "propertyNames": {"enum": list(ARCHES)},
            "additionalProperties": {
                "anyOf": [
                    {"type": "string", "pattern": HTTPS_URL},
                    {"type": "array", "items": {"type": "string", "pattern": HTTPS_URL}},
                ]
            },
        },
    )

    @field_validator(*GIT_ONLY, "install")
    @classmethod
    def _git_only(cls, v: object, info: ValidationInfo) -> object:
        other = next((k for k in ("pip", "wheel") if info.data.get(k) is not None), None)
        if other is not None and (info.field_name != "install" or v != "pip"):
            raise ValueError(
                f"{info.field_name} has no effect on a {other} component (only git and path "
                "components are built from source)"
            )
        if info.field_name == "ref" and info.data.get("path") is not None:
            raise ValueError(
                "ref has no effect on a path component: its commit is read from git at build time"
            )
        return v

    @field_validator(*INSTALLED_ONLY)
    @classmethod
    def _installed_only(cls, v: object, info: ValidationInfo) -> object:
        if info.data.get("install") == "none":
            raise ValueError(
                f'{info.field_name} has no effect with install = "none" (the tree is only '
                "fetched, and its requirements files installed)"
            )
        if info.field_name == "pip_args" and info.data.get("pip") is not None:
            raise ValueError(
                "pip_args has no effect on a pip component: `cannery lock` resolves its "
                "specifiers and the image installs them from the lock (say it in the specifiers)"
            )
        return v

    @field_validator("ref")
    @classmethod
    def _ref(cls, v: str | None) -> str | None:
        return _git_ref(v) if v is not None else v

    @field_validator("path", "subdir", "pyproject")
    @classmethod
    def _inside(cls, v: str | None) -> str | None:
        # path: copied from the build context; subdir, pyproject: paths inside the fetched
        # source. Never outside it, nothing the shell expands.
        return _relative(v)

    @field_validator("pin")
    @classmethod
    def _pin(cls, v: bool, info: ValidationInfo) -> bool:
        other = next((k for k in ("git", "wheel") if info.data.get(k) is not None), None)
        other = other or ("path" if info.data.get("path") is not None else None)
        if v and other is not None:
            raise ValueError(f"pin is only for pip components (this one is {other})")
        return v

    @field_validator("git")
    @classmethod
    def _git(cls, v: str | None) -> str | None:
        if v is not None:
            # Neither is authenticated: `cannery lock` resolves the ref to a commit over it.
            for scheme in ("http", "git"):
                if v.startswith(f"{scheme}://"):
                    raise ValueError(
                        f"git URL must not be {scheme}:// (unauthenticated; use https://)"
                    )
            _no_userinfo(v)
            if not _full(GIT_URL, v):
                raise ValueError(
                    f"{v!r}: give an https://, ssh:// or file:// URL, or user@host:path"
                )
        return v

    @field_validator("wheel")
    @classmethod
    def _wheel(cls, v: str | None) -> str | None:
        return _url_template(v) if v is not None else v

    @field_validator("extras")
    @classmethod
    def _extras(cls, v: list[str]) -> list[str]:
        for extra in v:
            if not _full(EXTRA_NAME, extra):
                raise ValueError(f"bad extra name {extra!r}")
        return v

    @field_validator("build_env")
    @classmethod
    def _build_env(cls, v: dict[str, str]) -> dict[str, str]:
        _env_names(v)
        return v

    @field_validator("extra_index")
    @classmethod
    def _index(cls, v: dict[str, str | list[str]]) -> dict[str, str | list[str]]:
        for arch, urls in v.items():
            if arch not in ARCHES:
                raise ValueError(f"unknown architecture {arch!r} ({did_you_mean(arch, ARCHES)})")
            for url in [urls] if isinstance(urls, str) else urls:
                _https(url)
        return v

    @field_validator("bundle_wheels")
    @classmethod
    def _bundle_patterns(cls, v: list[str] | None) -> list[str] | None:
        for pattern in v or ():
            if not _full(BUNDLE_WHEEL_PATTERN, pattern):
                raise ValueError(f"bad wheel file-name pattern {pattern!r} (letters, digits, "
                                 "._+-, * and ?, and {uname_arch})")
        return v

    @model_validator(mode="after")
    def _one_source(self) -> Component:
        kinds = [k for k in SOURCES if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError("give exactly one of git, pip, wheel, path")
        if self.bundle_wheels is not None and not re.search(BUNDLE_URL, self.wheel or ""):
            raise ValueError("bundle_wheels needs a wheel bundle: a wheel URL ending in .zip, "
                             ".tar.gz or .tgz")
        if self.git is not None and not self.ref:
            raise ValueError("a git component needs a ref")
        return self

    def indexes(self, arch: str) -> list[str]:
        """The extra package indexes of ``arch``, in the order written."""
        urls = self.extra_index.get(arch, [])
        return [urls] if isinstance(urls, str) else list(urls)
