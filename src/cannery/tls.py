"""One place that decides what TLS trusts: the system/certifi roots plus an optional extra CA.

Verification is never turned off; an extra CA (--ca-cert or CANNERY_CA_CERT) only adds trust.
"""

from __future__ import annotations

import os
import re
import shutil
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


_PEM_CERT = re.compile(rb"-----BEGIN CERTIFICATE-----[A-Za-z0-9+/=\s]+?-----END CERTIFICATE-----")


def _pem_certs(data: bytes) -> list[bytes]:
    """Each certificate of a PEM bundle, in order, its base64 lines rejoined the one way, so
    one certificate in two bundles compares equal (comments and other blocks are dropped)."""
    out = []
    for block in _PEM_CERT.findall(data):
        body = b"".join(block[27:-25].split())
        lines = [body[i:i + 64] for i in range(0, len(body), 64)]
        out.append(b"\n".join([b"-----BEGIN CERTIFICATE-----", *lines,
                                b"-----END CERTIFICATE-----"]))
    return out


# Beside git's bundle, an empty directory for GIT_SSL_CAPATH: the bundle is git's whole trust
NO_CAPATH = "no-capath"


@contextmanager
def git_ca_bundle(ca_cert: Path | None = None) -> Iterator[str | None]:
    """A CA file for git while the block runs: the system roots plus the extra CA, each
    certificate once (the system's and certifi's sets are mostly the same; git and uv parse
    every certificate in every process).

    git's ``GIT_SSL_CAINFO`` replaces its trust file, so it gets a combined bundle (in a
    temporary directory, removed afterwards) rather than the extra CA alone. ``None`` when
    there is no extra CA: git then keeps its own defaults. The bundle's directory also holds
    an empty ``NO_CAPATH`` directory, which ``git_trust_env`` gives git as its CA directory:
    git built with GnuTLS reads every file of its default one (/etc/ssl/certs) in every
    process, ~55 ms of a fetch, for roots the bundle already holds.
    """
    extra = extra_ca(ca_cert)
    if extra is None:
        yield None
        return
    try:
        first = extra.read_bytes()
    except OSError as exc:
        raise InputError(f"{extra}: cannot read CA certificate: {exc.strerror}") from None
    seen = set(_pem_certs(first))
    roots: dict[bytes, None] = {}  # in order, each once
    for path in _system_roots():
        roots.update((cert, None) for cert in _pem_certs(path.read_bytes()) if cert not in seen)
    folder = Path(tempfile.mkdtemp(prefix="cannery-ca-"))
    try:
        (folder / NO_CAPATH).mkdir()
        bundle = folder / "ca.pem"
        # the extra CA file as given first (whatever else it holds), then each root once
        bundle.write_bytes(b"\n".join([first.rstrip(b"\n"), *roots]) + b"\n")
        yield str(bundle)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


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
        no_capath = Path(ca_file).parent / NO_CAPATH
        if no_capath.is_dir():  # a bundle from git_ca_bundle: git's whole trust
            env["GIT_SSL_CAPATH"] = str(no_capath)
    return env
