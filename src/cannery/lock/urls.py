"""Download URLs in the lock: a plain URL, or one a build secret holds (``secret:NAME``),
whose value is never shown."""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from cannery.catalog.inputs import SECRET_URL
from cannery.errors import FatalError, LockError, NetworkError
from cannery.util.env import hide_from_children


def secret_url(name: str, env: dict[str, str] | None = None) -> str:
    """The URL a download's ``url_secret`` names, from the environment: https, or LockError
    (which never shows the value)."""
    hide_from_children(name)
    value = (os.environ if env is None else env).get(name, "").strip()
    if not value:
        raise LockError(f"build secret {name} is not set: export {name} as the download's URL")
    if not value.startswith("https://") or any(c.isspace() for c in value):
        raise LockError(f"build secret {name}: not an https URL (its value is not shown)")
    import httpx

    try:
        host = httpx.URL(value).host
        host.encode("idna")
    except (httpx.InvalidURL, UnicodeError, ValueError):
        raise LockError(f"build secret {name}: not a valid URL (its value is not shown)") from None
    if not host:
        raise LockError(f"build secret {name}: not a valid URL (its value is not shown)")
    return value


def _secret_or_plain(url: str, fetch: Callable[[str], tuple[str, int]]) -> tuple[str, int]:
    """Fetch ``url``; for ``secret:NAME``, the URL the variable NAME holds, with any failure
    said without it (the URL carries its credential)."""
    if not url.startswith(SECRET_URL):
        return fetch(url)
    name = url[len(SECRET_URL):]
    real = secret_url(name)
    try:
        return fetch(real)
    except FatalError as exc:
        said = re.sub(r"https?://\S+", "(a URL)", exc.message.replace(real, f"${name}"))
        raise NetworkError(f"build secret {name}: {said}") from None
