"""The catalog file as pydantic models: unknown keys are errors; pieces refer to each other."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.config import JsonDict, JsonValue

from cannery.catalog.platforms import ARCHES, PLATFORM, platform_arch
from cannery.util.hdkversion import PATTERN as HDK_VERSION_PATTERN
from cannery.util.sizes import SIZE
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
# Values usable in an image tag template, and what each gives (the reference says the same,
# from here); besides these, a component's version is {<component name with '-' and '.' as
# '_'>} (which components exist, only the loader knows). Only {cann} changes its value.
TAG_FIELD_DOCS = {
    "name": "the image's name",
    "cann": "the toolkit's version lowercased, as Ascend's own tags write it (8.0.RC3 → 8.0.rc3)",
    "cann_exact": "the toolkit's version exactly as written (8.0.RC3)",
    "chip": "the base's chip token (910b, a3)",
    "os": "the base's os",
    "os_version": "the base's os_version",
    "python": "the image's Python as 3.11 (the one it installs, else the base's)",
    "recipe": "the image's recipe",
    "soc": "the image's soc",
    "family": "the SoC family (A2, A3) of its soc, else of its base's chip",
    "version": "catalog.version",
    "date": "the UTC day (YYYYMMDD) the newest of the image's lock entries was resolved",
}
TAG_FIELDS = tuple(TAG_FIELD_DOCS)
URL_FIELDS = ("version", "uname_arch", "arch")
SECRET_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
RUNNER_LABEL = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
REL_PATH = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_./-]*$")
# https, no user:password@ (a credential in a URL ends up in the Dockerfile, lock and logs).
HTTPS_URL = r"^https://[^/@]+(/.*)?$"
# A URL template: literal text and {field}s of URL_FIELDS only. The literal text is the
# characters RFC 3986 allows in a URL (space, quotes, backtick, backslash, <>^| are
# percent-encoded there), so a URL cannot carry shell syntax into the step that fetches it.
URL_CHARS = r"A-Za-z0-9._~!$&'()*+,;=:@/%?#-"
URL_TEMPLATE = (rf'^https://[^/@{{}}\s`"\\]+(/([{URL_CHARS}]|\{{({"|".join(URL_FIELDS)})\}})*)?$')
# An image tag template: tag characters and {field}s (TAG_FIELDS or a component's field); a
# literal '.' or '-' never first (the rendered tag could not start with it).
# (a matrix entry's {matrix.AXIS} is its word by the time the tag is validated)
_TAG_FIELD = r"\{(matrix\.)?[a-z0-9_]+\}"
TAG_TEMPLATE = rf"^([A-Za-z0-9_]|{_TAG_FIELD})([A-Za-z0-9_.-]|{_TAG_FIELD})*$"
# A base image with a tag and no digest (the lock records the digest).
TAGGED_IMAGE = r"^[^@]*:[^/@:]+$"
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
EXTRA_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
# https, ssh, git or file URLs without user:password@, or scp-style user@host:path.
GIT_URL = r"^((https|ssh|file)://[^/@]*(/.*)?|[A-Za-z0-9_.-]+@[A-Za-z0-9_.-]+:.*)$"
ABS_PATH = r"^/[A-Za-z0-9_.+/-]*$"
# A value that can appear in an image tag (os_version, chip, recipe, the toolkit version).
TAG_VALUE = r"^[A-Za-z0-9_.-]*$"
# A matrix axis's name, and each of its words (they go into image names and tags).
AXIS_NAME = r"^[a-z][a-z0-9_]*$"
AXIS_WORD = r"^[A-Za-z0-9_.-]+$"
# The keys of an image's matrix that are not axes.
MATRIX_RESERVED = ("name", "include", "exclude")
HDK_VERSION = HDK_VERSION_PATTERN
CRON = r"^ *[^ \t\n]+([ \t]+[^ \t\n]+){4} *$"
# A release as written (v0.18.0, 8.2.RC1, 2.8.0.post2, 1.0+local), or "" (none): it reaches
# labels, comments and messages.
VERSION = r"^([A-Za-z0-9][A-Za-z0-9._+-]*)?$"
# A git ref in characters no shell, Dockerfile or YAML reads as syntax (it is a word of the
# rendered `git fetch`); `_git_ref` adds `git check-ref-format`'s rules on top.
GIT_REF = r"^[A-Za-z0-9_][A-Za-z0-9_./+-]*$"
_GIT_REF_NOT = (r"[.][.]", "//", r"[./]$", r"(^|/)[.]", r"[.]lock(/|$)")
# Free text that reaches the generated workflow (the catalog's name, the cannery requirement):
# no '$', braces, backtick or backslash, so nothing in it can become a GitHub expression
# (${{ … }}) or a shell substitution, whatever the YAML or shell around it.
WORKFLOW_TEXT = r"^[^$`{}\\]*$"
# The toolkit's build-only library directory: an absolute path, with {version} and
# {uname_arch} filled in; it is written inside double quotes in the build step.
DEVLIB_PATH = r"^/([A-Za-z0-9_.+/-]|\{(version|uname_arch)\})*$"
# An image label key: reverse-DNS style (org.opencontainers.image.source), never quoted.
LABEL_KEY = r"^[A-Za-z0-9][A-Za-z0-9._/-]*$"
# An OS (its /etc/os-release ID) → the package manager its images install with: apt for the
# Debian family, dnf for the rpm family (yum on CentOS and RHEL 7, which have no dnf), apk
# for Alpine. A base may name another of its family (``package_manager``: microdnf, the only
# one of the UBI minimal images).
OS_FAMILIES = {
    "ubuntu": "apt", "debian": "apt",
    "openeuler": "dnf", "fedora": "dnf", "rocky": "dnf", "almalinux": "dnf", "centos": "dnf",
    "rhel": "dnf", "alpine": "apk",
}
YUM_ONLY = {"centos": "7", "rhel": "7"}
PACKAGE_MANAGERS = {"apt": ("apt",), "dnf": ("dnf", "yum", "microdnf"), "apk": ("apk",)}
OsName = Literal["ubuntu", "debian", "openeuler", "fedora", "rocky", "almalinux", "centos",
                 "rhel", "alpine"]
PackageManager = Literal["apt", "dnf", "yum", "microdnf", "apk"]


def default_package_manager(os: str, os_version: str) -> str:
    """What an image of ``os`` ``os_version`` installs packages with, unless its base says."""
    if YUM_ONLY.get(os) == os_version.split(".")[0]:
        return "yum"
    return OS_FAMILIES[os]


PY_MINOR = r"^3\.[0-9]+$"
ONE_LINE = r"^[^\n]+$"
ALTERNATIVE_NAME = r"^[A-Za-z0-9_.+-]+$"
PY_VERSION = r"^3\.[0-9]+\.[0-9]+$"
USER_NAME = r"^[a-z_][a-z0-9_-]{0,31}$"
# What a value checked by a Field pattern must be, said for people (the loader's message for
# a mismatch: "python.version must look like 3.11.10, got '3.11'"); a test checks that every
# pattern of the models has its words.
# A download's name: it becomes a shell variable's (NAME_url), so it starts with a letter.
DOWNLOAD_NAME = r"^[a-z][a-z0-9_.-]*$"
# A branch pattern the check job also matches itself (build_branches): GitHub's * ** ? +
# only (? and + apply to the character before them, so they do not start a pattern).
BRANCH_GLOB = r"^[A-Za-z0-9_.*][A-Za-z0-9_./*?+-]*$"
# A pull-request label, written into an expression in single quotes: no quote, no ${{ }}.
PR_LABEL = r"^[A-Za-z0-9][A-Za-z0-9 _.:/-]*$"

PATTERN_WORDS = {
    WORKFLOW_TEXT: "hold no '$', '{', '}', backtick or backslash (it is written into the "
                   "workflow)",
    RUNNER_LABEL: "be a name of letters, digits and . _ - that starts with a letter or digit",
    PY_MINOR: "look like 3.11",
    PY_VERSION: "look like 3.11.10",
    TAG_VALUE: "use letters, digits and . _ - only (it can appear in a tag)",
    ABS_PATH: "be an absolute path of letters, digits and . _ + - /, like /opt/app",
    USER_NAME: "be a user name like app: lower case letters, digits, _ and -, at most 32",
    ONE_LINE: "be one line",
    ALTERNATIVE_NAME: "use letters, digits and . _ + - only",
    NAME: "use lowercase letters, digits, '-', '_' and '.', starting with a letter or digit",
    EXTRA_NAME: "be a name like vllm-ascend: letters, digits and . _ -",
    VERSION: "look like a release as written (v0.18.0, 8.2.RC1, 2.8.0.post2) or be empty",
    DEVLIB_PATH: "be an absolute path of letters, digits and . _ + - /, with {version} and "
                 "{uname_arch} allowed",
    SECRET_NAME: "be a name like REGISTRY_USER: letters, digits and _, not starting with a digit",
    HDK_VERSION: "be a driver or firmware version like 24.1.rc2, 25.0.RC1.b030 or 7.3.0.1.231",
    SIZE: "be a size like 10GB, 500 MB or 1.5GiB",
    DOWNLOAD_NAME: "be a name like libfoo: lowercase letters, digits and . _ -, starting with a "
                   "letter",
    PR_LABEL: "be a label of letters, digits, spaces and . _ : / - (no quote)",
    BRANCH_GLOB: "be a branch pattern of letters, digits, . _ - / and GitHub's * ** ? +",
}


class Strict(BaseModel):
    # strict: TOML has real booleans and integers, so "no" is never false and "2" never 2.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _schema(pattern: str, **extra: JsonValue) -> JsonDict:
    """A field's JSON Schema addition: the pattern its validator checks (one definition)."""
    return {"pattern": pattern, **extra}


def _inside_repo(pattern: str, **extra: JsonValue) -> JsonDict:
    """JSON Schema of a relative path inside the repository (what `_relative` checks)."""
    return {
        "allOf": [
            {"pattern": pattern},
            {"not": {"pattern": "(^|/)[.][.](/|$)"}},
            {"not": {"pattern": "/$"}},
        ],
        **extra,
    }


def _relative(v: str | None) -> str | None:
    """A relative path inside the repository (or the fetched source): never outside it
    (no ``..``), nothing the shell expands, no trailing ``/`` (what `_inside_repo` says)."""
    if v is not None and (not REL_PATH.fullmatch(v) or ".." in v.split("/") or v.endswith("/")):
        raise ValueError(f"{v!r}: give a relative path inside the repository")
    return v


def _env_names(names: Iterable[str]) -> None:
    """Each of ``names`` is a variable name the shell and the ENV instruction accept."""
    for var in names:
        if not _full(ENV_NAME, var):
            raise ValueError(f"{var!r} is not a valid environment variable name")


def _original_field(what: str) -> Any:
    """The ``original`` field: the hand-written file ``what`` (it names what replaces it)
    replaces, for `cannery compare`."""
    return Field(
        None, json_schema_extra=_inside_repo(REL_PATH.pattern),
        description=f"The hand-written {what} replaces, relative to the checkout "
        "`cannery compare --original DIR` names",
    )


def _full(pattern: str, value: str) -> bool:
    # fullmatch gives `^…$` the meaning JSON Schema (ECMA-262) gives it: no trailing newline.
    return re.fullmatch(pattern, value) is not None


# Query parameters that carry a credential: presigned object-store URLs (S3, OBS, OSS, GCS),
# tokens and signatures.
CREDENTIAL_PARAM = re.compile(
    r"^(x-(amz|goog|obs|oss)-.*|(aws)?accesskeyid|signature|sig|[a-z_]*token|auth|password"
    r"|secret|api_?key|ossaccesskeyid)$", re.IGNORECASE)


def _no_userinfo(url: str) -> str:
    # A credential in a URL would end up in the Dockerfile, the lock, every log line and, for
    # what the build fetches, the image's history.
    if re.match(r"^[a-z]+://[^/]*@", url):
        raise ValueError("URL must not carry credentials (user:password@)")
    query = url.split("#", 1)[0].partition("?")[2]
    names = [p.split("=", 1)[0] for p in re.split(r"[&;]", query) if p]
    found = [n for n in names if CREDENTIAL_PARAM.fullmatch(n)]
    if found:
        raise ValueError(
            f"URL carries a credential in its query ({', '.join(f'{n}=…' for n in found)}): it "
            "would stay in the Dockerfile, the lock and the image history; publish the file "
            "at a URL without one (the lock pins its sha256), or fetch it as an image's "
            "download with url_secret (the URL in a build secret, mounted for that RUN only)"
        )
    return url


def _https(url: str, pattern: str = HTTPS_URL) -> str:
    if not url.startswith("https://"):
        raise ValueError(f"download URL must be https:// (TLS-verified), got {url!r}")
    _no_userinfo(url)
    if not _full(pattern, url):
        raise ValueError(f"{url!r} is not an https://host/path URL")
    return url


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


EXTENDS = Field(
    None, description="A sibling entry whose keys this one starts from (its own keys win)"
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


def _git_ref_schema() -> JsonDict:
    """JSON Schema of a git ref (what `_git_ref` checks)."""
    nots: list[JsonValue] = [{"not": {"pattern": p}} for p in _GIT_REF_NOT]
    return {"allOf": [{"pattern": GIT_REF}, *nots]}


def _git_ref(v: str) -> str:
    if not _full(GIT_REF, v) or any(re.search(p, v) for p in _GIT_REF_NOT):
        raise ValueError(
            f"ref {v!r}: give a tag, branch or commit in letters, digits and . _ / + -, "
            "starting with a letter, digit or '_' (no '..', '//' or '/.'; not ending in '.', "
            "'/' or '.lock')"
        )
    return v


def _url_template(v: str) -> str:
    for name in re.findall(r"\{([^}]*)\}", v):
        if name not in URL_FIELDS:
            raise ValueError(f"unknown template field {{{name}}} (known: {', '.join(URL_FIELDS)})")
    return _https(v, URL_TEMPLATE)


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


# A GitHub Actions tag filter (on.push.tags): tag characters and the glob characters * ? +;
# no '!' negation and nothing that needs YAML quoting.
GIT_TAG_FILTER = r"^[A-Za-z0-9_.*?+][A-Za-z0-9_./*?+-]*$"
# An action pinned by commit: owner/repo, an optional path inside it, @ a full commit SHA.
ACTION_REF = r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*@[0-9a-f]{40}$"


class Ci(Strict):
    """How `cannery render` lays out files and the GitHub Actions pipeline. Paths are relative to
    the catalog's directory, which is taken to be the repository root."""

    runners: dict[str, str | list[str]] = Field(
        {"linux/amd64": "ubuntu-latest", "linux/arm64": "ubuntu-24.04-arm"},
        description="Native runner per platform: a label, or a list of labels a runner must "
        "all carry (a self-hosted one: [\"self-hosted\", \"linux\", \"arm64\"])",
        json_schema_extra={
            "propertyNames": {"enum": PLATFORMS},
            "additionalProperties": {"anyOf": [
                {"type": "string", "pattern": RUNNER_LABEL},
                {"type": "array", "minItems": 1,
                 "items": {"type": "string", "pattern": RUNNER_LABEL}},
            ]},
        },
    )
    branches: list[str] = Field(
        ["main"], description="Branches whose pushes build and publish the images they touch, "
        "and whose pull requests build them without pushing; [] for no branch push builds "
        "(release tags, the schedule and manual runs only; pull requests into any branch)",
        json_schema_extra={"items": {"type": "string", "pattern": GIT_TAG_FILTER}},
    )
    branch_pushes: bool = Field(
        True, description="Pushes to `branches` build and publish the images they touch; "
        "false: `branches` only filter pull requests, and only release tags, the schedule and "
        "manual runs publish (release_tags = [] and no schedule: manual runs only)"
    )
    schedule: str | None = Field(
        None, description="Optional cron for periodic rebuilds", json_schema_extra=_schema(CRON)
    )
    # The triggers below are the generated workflow's (cannery.render.workflow says how).
    pull_requests: bool = Field(
        True, description="Pull requests to `branches` build every image they touch, per platform "
        "on its native runner, from the pull request's checkout: no push, no secret"
    )
    pr_label: str | None = Field(
        None, pattern=PR_LABEL,
        description="Pull requests build only while they carry this label (adding it starts "
        "the build)",
    )
    dispatch_tags: bool = Field(
        False, description="A manual run takes an input `tags`: more tags (separated by spaces) "
        "for the index of each image it publishes, checked as tags before any use, passed "
        "through env, never expanded into a script"
    )
    build_branches: list[str] = Field(
        [], description="Branch patterns (GitHub's * ** ? +) whose pushes build what they touch "
        "as a pull request does (no push, no secret) and never publish, even where `branches` "
        "matches",
        json_schema_extra={"items": {"type": "string", "pattern": BRANCH_GLOB}},
    )
    release_tags: list[str] = Field(
        [], description="Git tag patterns (e.g. \"v*\") whose pushes build and publish every "
        "image: its tag, then its aliases; with catalog.version, the tag must be it (or v+it)",
        json_schema_extra={"items": {"type": "string", "pattern": GIT_TAG_FILTER}},
    )
    releases: bool = Field(
        False, description="A GitHub release, when published, builds and publishes every image "
        "from the release's tag: its tag, then its aliases; with catalog.version, the release's "
        "tag must be it (or v+it)"
    )
    max_parallel: int | None = Field(
        None, ge=1, description="At most this many platform legs of one image build at once "
        "(GitHub's strategy.max-parallel)"
    )
    free_disk: bool = Field(
        False, description="Before building, delete the toolchains GitHub-hosted Ubuntu runners "
        "preinstall (.NET, Android SDK, GHC, CodeQL) and prune Docker images, for images close "
        "to the runner's disk size (not for self-hosted runners)"
    )
    lock_update: bool = Field(
        True, description="With schedule: the scheduled run also runs `cannery lock --update "
        "all`, re-renders, and opens a pull request when the lock changed (GITHUB_TOKEN, gh)"
    )
    install: str = Field(
        "", description="pip requirement CI installs cannery from (default: this cannery's "
        "exact version): `cannery lock` resolves it with uv for `python` and the runners' "
        "platforms into hashes, `cannery render` writes them to `requirements`, and the jobs "
        "install that file with pip --require-hashes --no-deps",
        pattern=WORKFLOW_TEXT,
    )
    install_action: str | None = Field(
        None, description="Instead of pip: an action that installs cannery, "
        "owner/repo[/path]@<full commit SHA>, run by every job that runs cannery",
        json_schema_extra=_schema(ACTION_REF),
    )
    requirements: str = Field(
        ".github/workflows/cannery-requirements.txt",
        description="Where `cannery render` writes the hashed requirements CI installs "
        "cannery from", json_schema_extra=_inside_repo(REL_PATH.pattern),
    )
    environment: str | None = Field(
        "image-registry", pattern=RUNNER_LABEL,
        description="Deployment environment of the jobs that read registry secrets "
                    "(protection rules and environment secrets apply to them only)",
    )
    python: str = Field("3.12", pattern=PY_MINOR, description="Python CI runs cannery with")
    workflow: str = Field(
        ".github/workflows/cannery-images.yml", json_schema_extra=_inside_repo(REL_PATH.pattern),
        description="Where the workflow is rendered (from the catalog's directory)",
    )
    dockerfiles: str = Field("dockerfiles", json_schema_extra=_inside_repo(REL_PATH.pattern),
                             description="The directory the Dockerfiles are rendered into")
    bake: str = Field("docker-bake.json", json_schema_extra=_inside_repo(REL_PATH.pattern),
                      description="Where the bake file is rendered")
    docs: str = Field("TAGS.md", json_schema_extra=_inside_repo(REL_PATH.pattern),
                      description="Where the supported-tags page is rendered")
    original: str | None = _original_field("workflow the rendered one")

    @field_validator("runners")
    @classmethod
    def _runners(cls, v: dict[str, str | list[str]]) -> dict[str, str | list[str]]:
        for platform, labels in v.items():
            if not PLATFORM.fullmatch(platform):
                raise ValueError(f"bad platform {platform!r}: expected os/arch such as linux/arm64")
            if isinstance(labels, list) and not labels:
                raise ValueError(f"runners.{platform}: give at least one label")
            for label in [labels] if isinstance(labels, str) else labels:
                if not _full(RUNNER_LABEL, label):
                    raise ValueError(f"bad runner label {label!r}")
        return v

    @model_validator(mode="after")
    def _one_install(self) -> Ci:
        if self.install_action is not None and self.install:
            raise ValueError("install and install_action both say how CI installs cannery: "
                             "keep one")
        return self

    @field_validator("install_action")
    @classmethod
    def _action(cls, v: str | None) -> str | None:
        if v is not None and not _full(ACTION_REF, v):
            raise ValueError(
                f"{v!r}: name the action as owner/repo[/path]@<full 40-hex commit SHA> (a tag "
                "or branch can be moved to other code, which would then hold the registry "
                "secrets)"
            )
        return v

    @field_validator("workflow", "dockerfiles", "bake", "docs", "requirements", "original")
    @classmethod
    def _relative(cls, v: str | None) -> str | None:
        # Written below the catalog's directory: never outside it, never an odd file name.
        return _relative(v)

    @field_validator("branches", "release_tags")
    @classmethod
    def _tag_filters(cls, v: list[str], info: ValidationInfo) -> list[str]:
        what, example = {"branches": ("branch", "releases/*"),
                         "release_tags": ("release tag", "v*")}[str(info.field_name)]
        for pattern in v:
            if not _full(GIT_TAG_FILTER, pattern):
                raise ValueError(
                    f"{what} pattern {pattern!r}: use letters, digits, '.', '_', '-', '/' and "
                    f"the filter characters * ? + (e.g. \"{example}\")"
                )
        return v

    @field_validator("build_branches")
    @classmethod
    def _build_branches(cls, v: list[str]) -> list[str]:
        for pattern in v:
            if not _full(BRANCH_GLOB, pattern):
                raise ValueError(f"branch pattern {pattern!r}: use letters, digits, '.', '_', "
                                 "'-', '/' and GitHub's * ** ? + (e.g. \"dev/**\")")
        return v

    @model_validator(mode="after")
    def _label_needs_prs(self) -> Ci:
        if self.pr_label is not None and not self.pull_requests:
            raise ValueError("pr_label has no effect with pull_requests = false")
        return self

    @field_validator("schedule")
    @classmethod
    def _cron(cls, v: str | None) -> str | None:
        if v is not None and not _full(CRON, v):
            raise ValueError(f"cron {v!r} needs five fields")
        return v


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
