"""The lock file: its model (one entry per resolved reference, each with the time it was
resolved), read and written as sorted TOML.

Only entries whose value changed get a new timestamp (an entry re-resolved to the same value
keeps its time), so re-running ``cannery lock``, even with ``--update``, leaves it
byte-identical when nothing moved.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated, Literal

import tomli_w
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from cannery.errors import LockError
from cannery.pydeps import LOCKED_LINE
from cannery.util import toml
from cannery.util.bounded import NotRegularFile, OverLimit, read_regular_file
from cannery.util.patterns import COMMIT_PATTERN, OCI_DIGEST_PATTERN, SHA256_HEX_PATTERN

HEADER = "# cannery.lock: written by `cannery lock`; edit the catalog, not this file.\n"
LOCK_LIMIT = 64 << 20  # a lock file larger than this is refused unread


def parse_time(text: str) -> dt.datetime:
    """An ISO 8601 time with its timezone (``Z`` allowed, as on Python ≥ 3.11)."""
    value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError("no timezone")
    return value


def _timestamp(text: str) -> str:
    try:
        parse_time(text)
    except ValueError:
        raise ValueError(
            f"{text!r} is not an ISO 8601 time with a timezone (e.g. 2026-01-01T00:00:00+00:00)"
        ) from None
    return text


# When an entry was resolved; the build's SOURCE_DATE_EPOCH comes from these, so a time with
# no timezone (read in local time) would make the same lock build different bytes elsewhere.
Timestamp = Annotated[str, AfterValidator(_timestamp)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BaseEntry(_Strict):
    digest: str = Field(pattern=OCI_DIGEST_PATTERN)
    resolved_at: Timestamp
    # The image's /etc/os-release (ID and VERSION_ID, as written), read when it was locked;
    # absent: not read (an older lock, or no layer had the file)
    os_id: str | None = Field(None, pattern=r"^[A-Za-z0-9._-]{1,64}$")
    os_version: str | None = Field(None, pattern=r"^[A-Za-z0-9._-]{1,64}$")
    # the package managers found with it (apt, dnf, yum, microdnf, apk); absent: not read
    package_managers: list[Literal["apt", "dnf", "yum", "microdnf", "apk"]] | None = None


class GitEntry(_Strict):
    url: str
    ref: str
    commit: str = Field(pattern=COMMIT_PATTERN)
    resolved_at: Timestamp


class UrlEntry(_Strict):
    sha256: str = Field(pattern=SHA256_HEX_PATTERN)
    size: int = Field(ge=0)
    resolved_at: Timestamp


class PythonEntry(_Strict):
    """An image's Python dependencies on one platform, resolved with hashes."""

    inputs: str = Field(pattern=OCI_DIGEST_PATTERN, description="PythonRequest.digest()")
    requirements: list[str]
    resolved_at: Timestamp

    @field_validator("requirements")
    @classmethod
    def _locked(cls, v: list[str]) -> list[str]:
        for line in v:
            if not LOCKED_LINE.match(line):
                raise ValueError(f"{line[:80]!r} is not 'name==version --hash=sha256:…'")
        return v


class Lock(_Strict):
    version: int = 1
    bases: dict[str, BaseEntry] = {}
    git: dict[str, GitEntry] = {}
    urls: dict[str, UrlEntry] = {}
    python: dict[str, PythonEntry] = {}  # "image/arch"
    # What CI installs cannery from ([ci] install), per architecture of the runners; empty
    # with [ci] install_action (the action is pinned by commit instead).
    ci: dict[str, PythonEntry] = {}  # "amd64"


def git_key(url: str, ref: str) -> str:
    return f"{url}#{ref}"


def lock_epoch(entries: dict[str, tuple[str, str]]) -> int:
    """The newest resolution time among ``entries`` (Unix seconds; 0 with none): how new the
    lock an image was built from is. A lock only gets a newer time where a value changed
    (``lock.update._kept_time``), so a later lock of the same image never has a smaller one."""
    times = [parse_time(v[1]) for v in entries.values()]
    return int(max(times).timestamp()) if times else 0


def read_lock(path: Path) -> Lock:
    """The lock at ``path``; an absent file is an empty lock."""
    try:
        text = read_regular_file(path, limit=LOCK_LIMIT).decode("utf-8")
    except FileNotFoundError:
        return Lock()
    except (NotRegularFile, OverLimit) as exc:  # a symlink to /dev/zero, a FIFO
        raise LockError(exc.message) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LockError(f"{path}: cannot read: {exc}") from None
    try:
        raw = toml.loads(text)
    except toml.TOMLDecodeError as exc:
        raise LockError(toml.syntax_error(str(path), text, exc)) from None
    try:
        lock = Lock.model_validate(raw)
    except ValidationError as exc:
        from cannery.catalog.locate import LineMap

        err = exc.errors()[0]
        loc = tuple(err["loc"])
        line = LineMap(text).line_of(loc)
        field = ".".join(str(p) for p in loc)
        raise LockError(f"{path}:{line}: {field}: {err['msg']}") from None
    if lock.version != 1:
        raise LockError(f"{path}: lock version {lock.version} is not supported (expected 1)")
    return lock

def dump_lock(lock: Lock) -> str:
    data = lock.model_dump()
    # an os-release not read is left out, not written empty (TOML has no null)
    bases = {k: {f: v for f, v in e.items() if v is not None} for k, e in data["bases"].items()}
    ordered = {
        "version": data["version"],
        "bases": dict(sorted(bases.items())),
        "git": dict(sorted(data["git"].items())),
        "urls": dict(sorted(data["urls"].items())),
        "python": dict(sorted(data["python"].items())),
    }
    if data["ci"]:  # absent rather than empty: a lock without it reads as it always did
        ordered["ci"] = dict(sorted(data["ci"].items()))
    return HEADER + tomli_w.dumps(ordered)


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()
