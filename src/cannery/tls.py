"""One place that decides what TLS trusts: the system/certifi roots plus an optional extra CA.

Verification is never turned off; an extra CA (--ca-cert or CANNERY_CA_CERT) only adds trust.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from cannery.errors import InputError
from cannery.util.background import in_background

CA_ENV = "CANNERY_CA_CERT"


def ssl_context(ca_cert: Path | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    try:
        import certifi  # httpx depends on it

        ctx.load_verify_locations(cafile=certifi.where())
    except (ImportError, OSError):  # pragma: no cover - system roots still apply
        pass
    extra = extra_ca(ca_cert)
    if extra is not None:
        try:
            ctx.load_verify_locations(cafile=str(extra))
        except (OSError, ssl.SSLError) as exc:
            raise InputError(f"{extra}: cannot load CA certificate: {exc}") from None
    return ctx


def context_ahead(ca_cert: Path | None = None) -> Callable[[], ssl.SSLContext]:
    """``ssl_context(ca_cert)``, made in a thread from now on: loading the roots (~40 ms,
    mostly with the GIL released) then overlaps the command's imports. The callable returned
    waits for it and gives it, or raises what ``ssl_context`` raised (a bad CA file: the same
    InputError, where the context is first used). Each call of ``context_ahead`` makes its
    own context, which its callable always gives: what is handed out is its caller's alone."""
    return in_background(lambda: ssl_context(ca_cert), "cannery-tls")


def extra_ca(ca_cert: Path | None) -> Path | None:
    if ca_cert is not None:
        return ca_cert
    return Path(os.environ[CA_ENV]) if os.environ.get(CA_ENV) else None


def _system_roots() -> list[Path]:
    """The PEM bundles the TLS context trusts besides the extra CA (system, then certifi)."""
    paths = ssl.get_default_verify_paths()
    found = [Path(p) for p in (paths.cafile, paths.openssl_cafile) if p]
    try:
        import certifi

        found.append(Path(certifi.where()))
    except ImportError:  # pragma: no cover - httpx depends on it
        pass
    return list(dict.fromkeys(p.resolve() for p in found if p.is_file()))


@contextmanager
def git_ca_bundle(ca_cert: Path | None = None) -> Iterator[str | None]:
    """A CA file for git while the block runs: the system roots plus the extra CA.

    git's ``GIT_SSL_CAINFO`` replaces its trust store, so it gets a combined bundle (a
    temporary file, removed afterwards) rather than the extra CA alone. ``None`` when there is
    no extra CA: git then keeps its own defaults.
    """
    extra = extra_ca(ca_cert)
    if extra is None:
        yield None
        return
    try:
        parts = [extra.read_bytes()]
    except OSError as exc:
        raise InputError(f"{extra}: cannot read CA certificate: {exc.strerror}") from None
    for path in _system_roots():
        parts.append(path.read_bytes())
    fd, name = tempfile.mkstemp(prefix="cannery-ca-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(b"\n".join(p.rstrip(b"\n") for p in parts) + b"\n")
        yield name
    finally:
        os.unlink(name)


def git_env(url: str, ca_file: str | None = None) -> dict[str, str]:
    """The environment every git command that talks to ``url`` (a catalog's git URL) runs
    with: no prompt; only the URL's own protocol (git follows an https → http redirect by
    default, and a plain-http hop could then choose what is fetched); certificates checked
    whatever a git config file says (GIT_SSL_NO_VERIFY, which would win over this, never
    reaches a child: ``cannery.util.env``); ``ca_file``, a complete trust bundle
    (``git_ca_bundle``), when given."""
    scheme, sep, _ = url.partition("://")
    return {**git_trust_env(ca_file), "GIT_ALLOW_PROTOCOL": scheme if sep else "ssh"}


def git_trust_env(ca_file: str | None = None) -> dict[str, str]:
    """What of ``git_env`` holds for any URL (uv's git, for a git+ requirement, reads URLs
    cannery does not choose): no prompt, certificates checked whatever a git config file
    says, ``ca_file`` when given."""
    env = {
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "http.sslVerify",
        "GIT_CONFIG_VALUE_0": "true",
    }
    if ca_file:
        env["GIT_SSL_CAINFO"] = ca_file
    return env
