"""ImageSpec + rendered Dockerfile + lock → frozen build steps. Pure: no network, no processes.

The executor (``builder/execute.py``) runs what this plans; unit tests check plans with no engine.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from cannery import __version__
from cannery.builder.checkout import Checkout
from cannery.catalog.platforms import platform_arch
from cannery.errors import InputError
from cannery.lock import Lock, lock_epoch, parse_time
from cannery.plan import CHECKOUT_ARG, ImageSpec, lock_entries

INPUTS_LABEL = "io.cannery.inputs"
MAJOR = __version__.split(".")[0]


def _instructions(dockerfile: str) -> str:
    """The Dockerfile without its comment lines (the rendered header names the image and its
    repository; the builder ignores comments)."""
    return "\n".join(line for line in dockerfile.splitlines() if not line.lstrip().startswith("#"))


def input_digest(
    dockerfile: str, platform: str, entries: dict[str, tuple[str, str]], epoch: int
) -> str:
    """sha256 over everything that decides a platform's image bytes: the rendered Dockerfile's
    instructions (comments left out), the pinned values of the lock entries it uses, the
    platform, the build's clock ``epoch`` (``--timestamp`` and ``SOURCE_DATE_EPOCH``: every
    file and history time in the image) and cannery's major version. The image's name, its
    repository and the entries' own resolution times are left out (only ``epoch``, which is
    drawn from them, reaches the bytes)."""
    blob = json.dumps(
        {
            "cannery": MAJOR,
            "platform": platform,
            "dockerfile": _instructions(dockerfile),
            "lock": {k: v[0] for k, v in entries.items()},
            "epoch": epoch,
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def source_date_epoch(entries: dict[str, tuple[str, str]]) -> int:
    """When the base image was locked (else the oldest entry; 0 with none). Every timestamp a
    build writes comes from the lock, so the same lock gives the same bytes; and it is the
    base's time, not the newest entry's, because the value is a build argument: a value that
    moved with every re-locked component would rebuild every step after its ARG."""
    base = [v[1] for k, v in entries.items() if k.startswith("base:")]
    times = [parse_time(t) for t in (base or [v[1] for v in entries.values()])]
    return int(min(times).timestamp()) if times else 0


@dataclass(frozen=True)
class PlatformJob:
    image: str
    platform: str  # linux/arm64
    input_digest: str
    local_name: str  # the engine's local name for the built image

    @property
    def slug(self) -> str:
        """``linux-arm64``: for file names."""
        return self.platform.replace("/", "-")

    @property
    def os_arch(self) -> dict[str, str]:
        parts = self.platform.split("/")
        out = {"os": parts[0], "architecture": parts[1]}
        if len(parts) > 2:
            out["variant"] = parts[2]
        return out


@dataclass(frozen=True)
class ImageJob:
    spec: ImageSpec
    dockerfile: str
    repository: str  # host/path, where platforms, the index and the tags go
    tags: tuple[str, ...]
    epoch: int  # SOURCE_DATE_EPOCH and --timestamp of every platform
    platforms: tuple[PlatformJob, ...]
    # An image that copies the checkout: its directory is the build context, and its commit a
    # build argument (the labels) and part of every platform's input digest.
    context: Path | None = None
    build_args: tuple[tuple[str, str], ...] = ()
    lock_epoch: int = 0  # see lock_epoch(); annotated on the index, guards the tag move

    @property
    def name(self) -> str:
        return self.spec.name


def plan_build(
    spec: ImageSpec,
    dockerfile: str,
    lock: Lock,
    platforms: list[str] | None = None,
    tag_suffix: str = "",
    checkout: Checkout | None = None,
    extra_tags: tuple[str, ...] = (),
) -> ImageJob:
    """One image's build: which platforms, their input digests, the tags to move at the end
    (its tag, its aliases, then ``extra_tags``). ``checkout`` is required, and used, when the
    image copies the checkout."""
    entries = lock_entries(spec, lock)
    epoch = source_date_epoch(entries)
    chosen = [p for p in spec.platforms if not platforms or p in platforms]
    uses_checkout = any(c.path is not None for c in spec.components)
    if uses_checkout and checkout is None:
        raise InputError(f"{spec.name} copies the checkout: build it from one (--context DIR)")
    extra = {"checkout": (checkout.commit, "")} if uses_checkout and checkout else {}
    jobs = []
    for p in chosen:
        used = {**lock_entries(spec, lock, platform_arch(p)), **extra}
        digest = input_digest(dockerfile, p, used, epoch)
        local = f"localhost/cannery-build/{spec.name}:{p.replace('/', '-')}-{digest[7:19]}"
        jobs.append(PlatformJob(spec.name, p, digest, local))
    return ImageJob(
        spec=spec,
        dockerfile=dockerfile,
        repository=spec.repository,
        tags=tuple(dict.fromkeys([*(t + tag_suffix for t in spec.tags), *extra_tags])),
        epoch=epoch,
        platforms=tuple(jobs),
        lock_epoch=lock_epoch(entries),
        context=checkout.root if uses_checkout and checkout else None,
        build_args=((CHECKOUT_ARG, checkout.commit),) if uses_checkout and checkout else (),
    )
