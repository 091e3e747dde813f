"""The catalog file as pydantic models: unknown keys are errors; pieces refer to each other."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cannery.catalog.platforms import ARCHES, PLATFORM, platform_arch
from cannery.util.patterns import COMMIT, SHORT_COMMIT
from cannery.util.text import did_you_mean

NAME = r"^[a-z0-9][a-z0-9_.-]*$"
# An OCI repository name (distribution spec): optional registry host[:port], then lower-case
# path components separated by '/'.
_DOMAIN = (
    r"(?:\[[0-9A-Fa-f:]+\]|[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*)(?::[0-9]+)?"
)
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
REPOSITORY = re.compile(rf"^(?:{_DOMAIN}/)?{_PATH_PART}(?:/{_PATH_PART})*$")
# An image tag (distribution spec).
IMAGE_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
# Compatibility warnings an image may acknowledge (cannery.catalog.compat emits them).
COMPAT_CODES = (
    "compat-unlisted",
    "compat-python",
    "compat-vllm",
    "compat-cann",
    "compat-torch",
    "compat-torch-npu",
)
# Values usable in an image tag template.
TAG_FIELDS = ("name", "cann", "chip", "os", "os_version", "python", "recipe", "soc", "family")
URL_FIELDS = ("version", "uname_arch", "arch")
SECRET_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
RUNNER_LABEL = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
REL_PATH = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_./-]*$")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _no_userinfo(url: str) -> str:
    # A credential in a URL would end up in the Dockerfile, the lock and every log line.
    if re.match(r"^[a-z]+://[^/]*@", url):
        raise ValueError("URL must not carry credentials (user:password@)")
    return url


def _https(url: str) -> str:
    if not url.startswith("https://"):
        raise ValueError(f"download URL must be https:// (TLS-verified), got {url!r}")
    return _no_userinfo(url)


class CatalogMeta(Strict):
    name: str
    source: str = Field(description="Source repository, the org.opencontainers.image.source label")
    registry: str | None = Field(None, description="Default registry for images (a registries key)")
    mirrors: list[str] = Field(
        [],
        description="Registries (registries keys) every image is also published to, by digest, "
        "unless the image names its own mirrors",
    )
    python_index: str = Field(
        "https://pypi.org/simple",
        description="Python package index `cannery lock` resolves against and images install from",
    )

    @field_validator("python_index")
    @classmethod
    def _index(cls, v: str) -> str:
        return _https(v)


class PushTarget(Strict):
    """A ``[registries.NAME]`` table: where images are pushed (the OCI client is elsewhere)."""

    repository: str = Field(description="Repository images are pushed to, e.g. quay.io/ascend/verl")
    user_secret: str = Field(
        "REGISTRY_USER", pattern=SECRET_NAME,
        description="CI secret holding the registry user (the rendered workflow reads it)",
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

    @field_validator("repository")
    @classmethod
    def _repository(cls, v: str) -> str:
        if REPOSITORY.match(v):
            return v
        if ":" in v.rsplit("/", 1)[-1] or "@" in v:
            raise ValueError(f"{v!r}: give the repository only, without a tag or digest")
        if REPOSITORY.match(v.lower()):
            raise ValueError(f"{v!r}: a repository path must be lower case")
        raise ValueError(f"{v!r} is not a valid repository name (e.g. quay.io/ascend/verl)")


class Base(Strict):
    image: str = Field(
        description="Base image reference with a tag; `cannery lock` pins its digest"
    )
    python: str = Field(pattern=r"^3\.\d+$")
    os: str
    os_version: str
    chip: str = Field(description="Chip token of the base image tag: 910b, a3, 310p, 950")
    toolkit_version: str | None = Field(None, description="CANN version the base already ships")

    @field_validator("image")
    @classmethod
    def _tagged(cls, v: str) -> str:
        last = v.rsplit("/", 1)[-1]
        if "@" in v:
            raise ValueError("give the tag, not a digest: `cannery lock` records the digest")
        if ":" not in last:
            raise ValueError(f"base image {v!r} has no tag")
        return v


class Package(Strict):
    name: str
    url: str = Field(description="https URL template; {version} and {uname_arch} are filled in")
    family: str | None = Field(None, description="Only for this SoC family (ops packages)")

    @field_validator("url")
    @classmethod
    def _fields(cls, v: str) -> str:
        _https(v)
        for name in re.findall(r"\{([^}]*)\}", v):
            if name not in URL_FIELDS:
                raise ValueError(
                    f"unknown template field {{{name}}} (known: {', '.join(URL_FIELDS)})"
                )
        return v


class Toolkit(Strict):
    version: str
    layout: Literal["cann", "ascend-toolkit"] = "cann"
    env: str = Field(description="Name of the env table (an envs key) set_env.sh corresponds to")
    devlib: str | None = Field(None, description="Build-only stub library dir; never in image ENV")
    env_scripts: list[str] = Field(
        [], description="Scripts the toolkit ships to set its env; `cannery verify` compares them"
    )
    install_args: list[str] = ["--quiet", "--install"]
    packages: list[Package] = []


class Jobs(Strict):
    limit: int = Field(ge=1)
    reason: str = Field(min_length=3)


class Component(Strict):
    git: str | None = Field(None, description="Git repository URL")
    ref: str | None = Field(None, description="Tag, branch or full commit; `cannery lock` pins it")
    pip: list[str] | None = Field(None, description="pip requirement specifiers")
    wheel: str | None = Field(None, description="https wheel URL template ({uname_arch}, {arch})")
    package: str | None = Field(None, description="Distribution name, if not the component name")
    version: str | None = Field(None, description="Release this source corresponds to (for compat)")
    install: Literal["pip", "editable", "none"] = "pip"
    subdir: str | None = Field(None, description="Directory of the Python project in the repo")
    extras: list[str] = Field([], description="Extras to install, e.g. all_npu")
    pyproject: str | None = Field(
        None, description="File in the project directory to build with as its pyproject.toml"
    )
    requirements: list[str] = []
    pip_args: list[str] = []
    build_env: dict[str, str] = {}
    toolkit_build: bool = Field(False, description="Compiles against CANN (devlib, SOC_VERSION)")
    jobs: Jobs | None = None
    pin: bool = Field(False, description="Installed first; later installs are constrained to it")
    extra_index: dict[str, str] = Field(
        {}, description="Extra package index per TARGETARCH (amd64, arm64, …), per command only"
    )

    @field_validator("ref")
    @classmethod
    def _ref(cls, v: str | None) -> str | None:
        if v is not None and not COMMIT.match(v) and SHORT_COMMIT.match(v):
            raise ValueError(f"ref {v!r} looks like a short SHA: give the full 40-hex commit")
        return v

    @field_validator("git")
    @classmethod
    def _git(cls, v: str | None) -> str | None:
        if v is not None:
            if v.startswith("http://"):
                raise ValueError("git URL must not be http:// (use https://)")
            _no_userinfo(v)
        return v

    @field_validator("wheel")
    @classmethod
    def _wheel(cls, v: str | None) -> str | None:
        return _https(v) if v is not None else v

    @field_validator("subdir", "pyproject")
    @classmethod
    def _inside(cls, v: str | None) -> str | None:
        # Used in paths inside the fetched source: never outside it, nothing the shell expands.
        if v is not None and (not REL_PATH.match(v) or ".." in v.split("/")):
            raise ValueError(f"{v!r}: give a relative path inside the repository")
        return v

    @field_validator("extras")
    @classmethod
    def _extras(cls, v: list[str]) -> list[str]:
        for extra in v:
            if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", extra):
                raise ValueError(f"bad extra name {extra!r}")
        return v

    @field_validator("extra_index")
    @classmethod
    def _index(cls, v: dict[str, str]) -> dict[str, str]:
        for arch, url in v.items():
            if arch not in ARCHES:
                raise ValueError(f"unknown architecture {arch!r} ({did_you_mean(arch, ARCHES)})")
            _https(url)
        return v

    @model_validator(mode="after")
    def _one_source(self) -> Component:
        kinds = [k for k in ("git", "pip", "wheel") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError("give exactly one of git, pip, wheel")
        if self.git is not None and not self.ref:
            raise ValueError("a git component needs a ref")
        if self.git is None and self.ref is not None:
            raise ValueError("ref is only for git components")
        if self.pin and self.pip is None:
            raise ValueError("pin is only for pip components")
        if (self.subdir or self.extras or self.pyproject) and self.git is None:
            raise ValueError("subdir, extras and pyproject are for git components")
        return self


class Image(Strict):
    extends: str | None = None
    base: str
    toolkit: str
    soc: str = Field(description="SOC_VERSION, e.g. ascend910b1")
    recipe: str = ""
    platforms: list[str] = Field(min_length=1)
    tag: str
    registry: str | None = None
    mirrors: list[str] | None = Field(
        None, description="Registries this image is also published to (default: catalog.mirrors)"
    )
    aliases: list[str] = Field(
        [],
        description="Rolling tags (latest, main) moved after the release tag is in every "
        "registry; one image owns each alias",
    )
    apt: list[str] = []
    pip_tools: list[str] = []
    components: list[str] = []
    revision_from: str | None = None
    smoke_imports: list[str] = Field(
        [], description="Python modules `cannery verify` imports in the built image"
    )
    acknowledge: list[str] = Field([], description="Compatibility warnings accepted for this image")
    labels: dict[str, str] = {}

    @field_validator("platforms")
    @classmethod
    def _platforms(cls, v: list[str]) -> list[str]:
        for p in v:
            if not PLATFORM.match(p):
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
    def _tag(cls, v: str) -> str:
        for name in re.findall(r"\{([^}]*)\}", v):
            if name not in TAG_FIELDS:
                raise ValueError(
                    f"unknown tag template field {{{name}}} (known: {', '.join(TAG_FIELDS)})"
                )
        return v


class Family(Strict):
    description: str = ""
    chip: str
    socs: list[str]


class CompatRow(Strict):
    vllm_ascend: str
    vllm: str
    python: str
    cann: str
    torch: str
    torch_npu: str


class Compat(Strict):
    source: str = ""
    date: str = ""
    rows: list[CompatRow] = []


EnvValue = str | list[str]


class Ci(Strict):
    """How `cannery render` lays out files and the GitHub Actions pipeline. Paths are relative to
    the catalog's directory, which is taken to be the repository root."""

    runners: dict[str, str] = Field(
        {"linux/amd64": "ubuntu-latest", "linux/arm64": "ubuntu-24.04-arm"},
        description="Native runner label per platform",
    )
    branches: list[str] = Field(["main"], description="Branches whose pushes build images")
    schedule: str | None = Field(None, description="Optional cron for periodic rebuilds")
    install: str = Field("", description="pip requirement CI installs cannery from "
                                         "(default: this cannery's exact version)")
    environment: str | None = Field(
        "image-registry", pattern=RUNNER_LABEL,
        description="Deployment environment of the jobs that read registry secrets "
                    "(protection rules and environment secrets apply to them only)",
    )
    python: str = Field("3.12", pattern=r"^3\.\d+$", description="Python CI runs cannery with")
    workflow: str = Field(".github/workflows/cannery-images.yml")
    dockerfiles: str = Field("dockerfiles")
    bake: str = Field("docker-bake.json")
    docs: str = Field("TAGS.md")

    @field_validator("runners")
    @classmethod
    def _runners(cls, v: dict[str, str]) -> dict[str, str]:
        for platform, label in v.items():
            if not PLATFORM.match(platform):
                raise ValueError(f"bad platform {platform!r}: expected os/arch such as linux/arm64")
            if not re.match(RUNNER_LABEL, label):
                raise ValueError(f"bad runner label {label!r}")
        return v

    @field_validator("workflow", "dockerfiles", "bake", "docs")
    @classmethod
    def _relative(cls, v: str) -> str:
        # Written below the catalog's directory: never outside it, never an odd file name.
        if not REL_PATH.match(v) or ".." in v.split("/") or v.endswith("/"):
            raise ValueError(f"{v!r}: give a relative path inside the repository")
        return v

    @field_validator("schedule")
    @classmethod
    def _cron(cls, v: str | None) -> str | None:
        if v is not None and len(v.split()) != 5:
            raise ValueError(f"cron {v!r} needs five fields")
        return v


class Catalog(Strict):
    catalog: CatalogMeta
    registries: dict[str, PushTarget] = {}
    bases: dict[str, Base] = {}
    envs: dict[str, dict[str, EnvValue]] = {}
    toolkits: dict[str, Toolkit] = {}
    components: dict[str, Component] = {}
    images: dict[str, Image] = {}
    families: dict[str, Family] = {}
    compat: Compat = Compat()
    ci: Ci = Ci()

    @field_validator("registries", "bases", "envs", "toolkits", "components", "images")
    @classmethod
    def _names(cls, v: dict[str, object]) -> dict[str, object]:
        for key in v:
            if not re.match(NAME, key):
                raise ValueError(f"name {key!r}: use lowercase letters, digits, '-', '_', '.'")
        return v

    def family_of(self, soc: str) -> str | None:
        """The SoC family (A2, A3, …) that ``soc`` belongs to, or None."""
        return next((f for f, fam in self.families.items() if soc in fam.socs), None)
