"""What a build engine is to cannery: commands planned from a job, then what they produced.

Each backend is one small module (``buildah.py``, ``buildx.py``). The executor runs the planned
commands, streams their output to one log per platform, then asks the backend what it built.
The index merge and the tag move are never the engine's: cannery's own registry client does
them, so "the tag never points at a partial index" is cannery's guarantee for every backend.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cannery.builder.jobs import ImageJob, PlatformJob
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
    # build secrets: (id, a file holding the value, mode 0600), each given as --secret
    # id=ID,src=FILE, so the value is never in an argv
    secrets: tuple[tuple[str, Path], ...] = ()


@dataclass(frozen=True)
class Built:
    """One platform's result: a ``dir:`` layout cannery pushes itself, or a descriptor of an
    image the engine already pushed by digest.

    A layout holds the manifest, the config and the layers that were written in this build;
    a layer the manifest names but the layout lacks is one ``present`` said the target already
    has (so it was neither exported nor is it uploaded again).
    """

    layout: Path | None
    descriptor: Descriptor | None
    layers: int = 0  # layers in the image (0: the engine pushed it itself)
    exported: int = 0  # of those, how many the engine wrote (the target lacked them)


# Runs one command the way the executor runs every engine command (its output appended to the
# platform's log); returns the output lines, or raises when the command fails.
Run = Callable[[list[str]], list[str]]
# Whether the build's target (the registry repository, or the OCI layout) already holds a blob.
Present = Callable[[Descriptor], bool]


class Engine(Protocol):
    name: str
    # True when the build commands push to the registry themselves (so nothing may run
    # before the inputs they build from are settled).
    pushes_while_building: bool

    def steps(self, image: ImageJob, job: PlatformJob, opts: BuildOptions) -> list[list[str]]:
        """The commands that build (and, for engines that push, push) one platform. Pure."""
        ...

    def login_hosts(self, image: ImageJob, opts: BuildOptions) -> list[str]:
        """The registry hosts the commands reach with Docker's login (its config file): the
        executor hands them cannery's logins for these in a temporary Docker config (see
        :meth:`cannery.oci.auth.Credentials.docker_config`). Empty: the commands need none."""
        ...

    def collect(
        self, image: ImageJob, job: PlatformJob, opts: BuildOptions, run: Run, present: Present
    ) -> Built:
        """After the commands ran: what they produced, exported for the upload if the engine
        did not push it itself (through ``run``, writing only what ``present`` says the target
        lacks)."""
        ...
