"""How each kind of reference is resolved: the table an update reads, and the real one (a
registry, git, HTTPS, uv)."""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cannery.lock.file import Lock
from cannery.lock.git import resolve_git
from cannery.lock.urls import _secret_or_plain
from cannery.pydeps import PythonRequest

if TYPE_CHECKING:
    from cannery.catalog.models import Catalog
    from cannery.oci.rootfs import BaseOs


@dataclass
class Resolvers:
    """How each kind of reference is resolved; tests may point these at local services.

    Without ``python``, Python dependencies are left as the lock has them (or unpinned).
    """

    base: Callable[[str], str]
    git: Callable[[str, str], str]
    url: Callable[[str], tuple[str, int]]
    python: Callable[[PythonRequest], list[str]] | None = None
    # (image, digest) → the image's os-release (ID, VERSION_ID), None when no layer has it;
    # without it, bases are locked without their OS
    os_release: Callable[[str, str], BaseOs | None] | None = None


@contextmanager
def network_resolvers(
    cat: Catalog,
    lock: Lock,
    ca_cert: Path | None,
    images: list[str] | None = None,
    tls: Callable[[], ssl.SSLContext] | None = None,
) -> Iterator[Resolvers]:
    """The real resolvers (registry, git, HTTPS, uv), trusting the system roots plus
    ``ca_cert``. CANNERY_REGISTRY_USER/_PASSWORD are for the push registry: they go to a base
    image's registry only when it is that same host. ``tls`` gives the caller's TLS context
    for those roots (a build shares one with its publish client: loading the roots twice
    costs ~25 ms); else one is made here."""
    from cannery.download import resolve_url
    from cannery.oci import Credentials, OCIClient
    from cannery.oci.auth import push_host
    from cannery.oci.rootfs import read_os_release
    from cannery.pydeps import resolve_python
    from cannery.tls import git_ca_bundle, ssl_context

    ctx = tls() if tls is not None else ssl_context(ca_cert)
    repositories = [
        cat.registries[cat.images[n].registry or cat.catalog.registry or ""].repository
        for n in images or list(cat.images)
    ]
    creds = Credentials(env_host=push_host(repositories))
    with OCIClient(ctx, credentials=creds) as client, git_ca_bundle(ca_cert) as git_ca:
        yield Resolvers(
            base=client.resolve,
            git=lambda url, ref: resolve_git(url, ref, git_ca),
            url=lambda url: _secret_or_plain(url, lambda real: resolve_url(real, ctx)),
            python=lambda request: resolve_python(request, git_ca),
            os_release=lambda image, digest: read_os_release(client, image, digest),
        )
