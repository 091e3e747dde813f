"""What a build engine is to cannery: commands planned from a job, then what they produced.

Each backend is one small module (``buildah.py``, ``buildx.py``). The executor runs the planned
commands, streams their output to one log per platform, then asks the backend what it built.
The index merge and the tag move are never the engine's: cannery's own registry client does
them, so "the tag never points at a partial index" is cannery's guarantee for every backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cannery.builder.plan import ImageJob, PlatformJob
from cannery.oci import Descriptor


@dataclass(frozen=True)
class BuildOptions:
    context: Path  # build context directory (the rendered Dockerfile is the only file needed)
    dockerfile: Path
    work: Path  # scratch directory for this platform's outputs (layout, digest and metadata files)
    push_repository: str | None  # host/repo to push to by digest; None: local output only
    oci_output: bool  # the platform is written as an OCI layout (no registry)
    cert_dir: Path | None = None  # extra CA for pulling the base (buildah --cert-dir)
    network: str | None = None  # build-time network mode (e.g. host, to reach 127.0.0.1)
    builder: str | None = None  # buildx builder (remote or Kubernetes BuildKit)
    no_cache: bool = False  # rebuild every step (--force)
    cache_ref: str | None = None  # a registry cache of this image and platform alone (buildx)


@dataclass(frozen=True)
class Built:
    """One platform's result: a ``dir:`` layout cannery pushes itself, or a descriptor of an
    image the engine already pushed by digest."""

    layout: Path | None
    descriptor: Descriptor | None


class Engine(Protocol):
    name: str

    def steps(self, image: ImageJob, job: PlatformJob, opts: BuildOptions) -> list[list[str]]:
        """The commands that build (and, for engines that push, push) one platform. Pure."""
        ...

    def collect(self, image: ImageJob, job: PlatformJob, opts: BuildOptions) -> Built:
        """After the commands ran: what they produced (reads files in ``opts.work``)."""
        ...
