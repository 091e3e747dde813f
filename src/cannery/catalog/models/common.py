"""Shared pieces of the catalog models: string patterns, the `Strict` base, and the
validators several tables use."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.config import JsonDict, JsonValue

from cannery.util.hdkversion import PATTERN as HDK_VERSION_PATTERN
from cannery.util.sizes import SIZE

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


EXTENDS = Field(
    None, description="A sibling entry whose keys this one starts from (its own keys win)"
)


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
