"""One place that decides what TLS trusts: the system/certifi roots plus an optional extra CA.

Verification is never turned off; an extra CA (--ca-cert or CANNERY_CA_CERT) only adds trust.
"""

from __future__ import annotations

import os
import ssl
from pathlib import Path

from cannery.errors import InputError

CA_ENV = "CANNERY_CA_CERT"


def ssl_context(ca_cert: Path | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    try:
        import certifi  # httpx depends on it

        ctx.load_verify_locations(cafile=certifi.where())
    except (ImportError, OSError):  # pragma: no cover - system roots still apply
        pass
    extra = ca_cert or (Path(os.environ[CA_ENV]) if os.environ.get(CA_ENV) else None)
    if extra is not None:
        try:
            ctx.load_verify_locations(cafile=str(extra))
        except (OSError, ssl.SSLError) as exc:
            raise InputError(f"{extra}: cannot load CA certificate: {exc}") from None
    return ctx


def ca_file(ca_cert: Path | None = None) -> str | None:
    """The extra CA file, for tools (git) that take a path rather than a context."""
    if ca_cert is not None:
        return str(ca_cert)
    return os.environ.get(CA_ENV) or None
