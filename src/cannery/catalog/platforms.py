"""Platforms and architectures cannery builds for: the one list of them."""

from __future__ import annotations

import re

# Docker's TARGETARCH → `uname -m` (what installer file names and library paths use).
UNAME_ARCH = {
    "amd64": "x86_64",
    "arm64": "aarch64",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
    "riscv64": "riscv64",
}
ARCHES = tuple(UNAME_ARCH)
# linux/ARCH, and linux/arm64/v8 (the one variant spelled out in practice).
PLATFORM = re.compile(rf"^linux/({'|'.join(ARCHES)}|arm64/v8)$")


def platform_arch(platform: str) -> str:
    """``linux/arm64/v8`` → ``arm64`` (Docker's TARGETARCH)."""
    return platform.split("/")[1]


def arches_of(platforms: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The distinct TARGETARCH values of ``platforms``, in order."""
    return tuple(dict.fromkeys(platform_arch(p) for p in platforms))
