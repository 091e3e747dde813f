"""A download hashed as it arrives: what `cannery lock` records of a URL input (and of a wheel
bundle it reads), over verified TLS, bounded."""

from __future__ import annotations

import contextlib
import hashlib
import ssl
from pathlib import Path

# The most bytes a `url` input may have: a CANN toolkit `.run` is a few GiB; an endless answer
# stops here instead of running for ever.
DOWNLOAD_LIMIT = 16 << 30


def resolve_url(
    url: str,
    verify: ssl.SSLContext,
    timeout: float = 60.0,
    into: Path | None = None,
    limit: int | None = None,
) -> tuple[str, int]:
    """Stream ``url`` over verified TLS and return (sha256 hex, size) of the bytes as sent,
    keeping them in ``into`` if given. Redirects are followed, except from HTTPS to anything
    else. ``Accept-Encoding: identity`` is asked for and an answer in any other encoding is
    refused (what is hashed is what the build's ``curl`` saves, and a gzip bomb is never
    inflated); an answer over ``limit`` bytes (by default DOWNLOAD_LIMIT) is refused, by its
    length or as it arrives. On any failure nothing is left at ``into``."""
    import httpx

    from cannery.errors import NetworkError
    from cannery.oci import http_reason
    from cannery.oci.client import shown
    from cannery.util.bounded import read_http_body

    def no_downgrade(resp: httpx.Response) -> None:
        # Called for every hop: a redirect off TLS would pin bytes fetched without it.
        if resp.has_redirect_location:
            target = resp.url.join(resp.headers["location"])
            if resp.url.scheme == "https" and target.scheme != "https":
                raise NetworkError(f"{url}: refusing the redirect to {shown(str(target))}: a "
                                   "downgrade from HTTPS to plain HTTP")

    digest = hashlib.sha256()
    size = 0
    hooks = {"response": [no_downgrade]}
    try:
        with httpx.Client(
            verify=verify, timeout=timeout, follow_redirects=True, event_hooks=hooks
        ) as http, http.stream("GET", url, headers={"Accept-Encoding": "identity"}) as resp:
            if resp.status_code != 200:
                raise NetworkError(f"{url}: download failed: HTTP {resp.status_code}")
            with open(into, "wb") if into else contextlib.nullcontext() as sink:

                def take(chunk: bytes) -> None:
                    nonlocal size
                    digest.update(chunk)
                    size += len(chunk)
                    if sink:
                        sink.write(chunk)

                read_http_body(resp, limit=DOWNLOAD_LIMIT if limit is None else limit,
                               what=shown(url), sink=take)
    except BaseException as exc:
        if into:
            into.unlink(missing_ok=True)  # nothing half-written is kept
        if isinstance(exc, httpx.HTTPError):
            raise NetworkError(f"{url}: download failed: {http_reason(exc)}") from None
        raise
    return digest.hexdigest(), size
