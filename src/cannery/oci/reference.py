"""Image references: ``host/repository[:tag][@digest]``, parsed the way Docker parses them."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, replace

DOCKER_HUB = "registry-1.docker.io"
# Names Docker accepts for its Hub; all of them mean the registry at DOCKER_HUB.
HUB_ALIASES = frozenset({"docker.io", "index.docker.io", DOCKER_HUB})

# The grammar of the OCI distribution spec (and Docker's reference package).
_COMPONENT = r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*"
_REPOSITORY = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128}")


def valid_digest(digest: str) -> bool:
    return _DIGEST.fullmatch(digest) is not None


@dataclass(frozen=True)
class Reference:
    host: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    @classmethod
    def parse(cls, ref: str) -> Reference:
        """Parse ``host/repo:tag``, ``host/repo@sha256:…``, both, or a Docker Hub short name
        (``ubuntu`` → ``registry-1.docker.io/library/ubuntu:latest``). Raise ValueError."""
        name, at, digest = ref.partition("@")
        if at and not valid_digest(digest):
            raise ValueError(f"{ref}: not a sha256/sha512 digest after '@'")
        first, slash, rest = name.partition("/")
        # Docker's rule: the first component is a host when it has a dot or a port, or is
        # localhost; otherwise the whole name is a Docker Hub repository.
        if slash and ("." in first or ":" in first or first == "localhost"):
            host = DOCKER_HUB if first in HUB_ALIASES else first
        else:
            host, rest = DOCKER_HUB, name
        if host == DOCKER_HUB and "/" not in rest.partition(":")[0]:
            rest = f"library/{rest}"
        repo, colon, tag = rest.rpartition(":")
        if not colon or "/" in tag:
            repo, tag = rest, ""
        if not _REPOSITORY.fullmatch(repo):
            raise ValueError(f"{ref}: invalid repository name {repo!r}")
        if tag and not _TAG.fullmatch(tag):
            raise ValueError(f"{ref}: invalid tag {tag!r}")
        if not tag and not at:
            tag = "latest"
        return cls(host, repo, tag or None, digest or None)

    @property
    def hostname(self) -> str:
        """The host without its port (and without the brackets of an IPv6 literal)."""
        if self.host.startswith("["):
            return self.host[1:].partition("]")[0]
        return self.host.rpartition(":")[0] if ":" in self.host else self.host

    @property
    def loopback(self) -> bool:
        """True for ``localhost`` and IP literals in 127.0.0.0/8 or ``::1``; a DNS name that
        merely starts with ``127.`` is not loopback (it resolves wherever its owner wants)."""
        name = self.hostname
        if name == "localhost":
            return True
        try:
            return ipaddress.ip_address(name).is_loopback
        except ValueError:
            return False

    @property
    def name(self) -> str:
        return f"{self.host}/{self.repository}"

    @property
    def reference(self) -> str:
        """What goes in a ``/manifests/<reference>`` path: the digest if set, else the tag."""
        ref = self.digest or self.tag
        if ref is None:  # pragma: no cover - parse() always sets one
            raise ValueError(f"{self.name}: neither tag nor digest")
        return ref

    def with_tag(self, tag: str) -> Reference:
        if not _TAG.fullmatch(tag):
            raise ValueError(f"invalid tag {tag!r}")
        return replace(self, tag=tag, digest=None)

    def with_digest(self, digest: str) -> Reference:
        if not valid_digest(digest):
            raise ValueError(f"invalid digest {digest!r}")
        return replace(self, digest=digest)

    def __str__(self) -> str:
        text = self.name
        if self.tag:
            text += f":{self.tag}"
        if self.digest:
            text += f"@{self.digest}"
        return text
