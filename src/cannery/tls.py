"""One place that decides what TLS trusts: the system/certifi roots plus an optional extra CA.

Verification is never turned off; an extra CA (--ca-cert or CANNERY_CA_CERT) only adds trust.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import ssl
import stat
import subprocess
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


_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----[^-]*?-----END \1-----")


def _pem_certs(data: bytes) -> list[bytes]:
    """Each PEM block of a bundle, in order: a certificate with its base64 lines rejoined the
    one way, so one certificate in two bundles compares equal; any other block (a TRUSTED
    CERTIFICATE with OpenSSL's trust settings, say) as it is written. Text between blocks
    (comments) is dropped."""
    out = []
    for block in _PEM_BLOCK.finditer(data):
        if block.group(1) != b"CERTIFICATE":
            out.append(block.group(0))
            continue
        body = b"".join(block.group(0)[27:-25].split())
        lines = [body[i:i + 64] for i in range(0, len(body), 64)]
        out.append(b"\n".join([b"-----BEGIN CERTIFICATE-----", *lines,
                                b"-----END CERTIFICATE-----"]))
    return out


def _ca_dir_files(read: list[Path]) -> list[Path]:
    """The files of the system's CA directories (as OpenSSL names them: /etc/ssl/certs on
    Debian, where each root is there twice, by name and by hash link), each file once (by
    device and inode) and none of ``read``."""
    paths = ssl.get_default_verify_paths()
    seen = set()
    for path in read:
        with contextlib.suppress(OSError):
            st = path.stat()
            seen.add((st.st_dev, st.st_ino))
    out = []
    for name in dict.fromkeys(p for p in (paths.capath, paths.openssl_capath) if p):
        try:
            entries = sorted(os.scandir(name), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat()  # follows the link
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                out.append(Path(entry.path))
    return out


def _git_names_a_ca_dir() -> bool:
    """Whether the user's git configuration names a CA directory (``http.sslCAPath``, for
    every URL or one): git is then left to read its directories (unknown counts as yes)."""
    from cannery.util.env import child_env

    try:
        done = subprocess.run(["git", "config", "--get-regexp", r"^http\..*sslcapath$"],
                              capture_output=True, timeout=30, check=False, env=child_env(),
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return True
    return done.returncode != 1 or bool(done.stdout.strip())


# bundle file -> the empty directory git is given as its CA directory with it
_NO_CA_DIR: dict[str, str] = {}


@contextmanager
def git_ca_bundle(ca_cert: Path | None = None) -> Iterator[str | None]:
    """A CA file for git while the block runs: the extra CA, then every root the system
    trusts (its CA files, its CA directory's files, certifi's), each certificate once.

    git's ``GIT_SSL_CAINFO`` replaces its trust file, so it gets a combined bundle (in a
    private temporary directory, removed afterwards) rather than the extra CA alone. ``None``
    when there is no extra CA: git then keeps its own defaults. As the bundle holds the CA
    directory's roots too, ``git_trust_env`` gives git an empty directory as its CA directory
    with it: git built with GnuTLS reads every file of its default one (/etc/ssl/certs) in
    every process, ~55 ms of a fetch, for roots the bundle holds; and the system's and
    certifi's sets are mostly the same, so each root once halves what git and uv parse. Not
    when the user's git configuration names a CA directory of its own: git reads it then.
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
    files = _system_roots()
    own_dir = _git_names_a_ca_dir()
    for path in [*files, *([] if own_dir else _ca_dir_files(files))]:
        try:
            data = path.read_bytes()
        except OSError:
            continue  # a file the system lists but this user cannot read: not a root here
        roots.update((cert, None) for cert in _pem_certs(data) if cert not in seen)
    folder = Path(tempfile.mkdtemp(prefix="cannery-ca-"))
    bundle = folder / "ca.pem"
    try:
        # the extra CA file as given first (whatever else it holds), then each root once
        bundle.write_bytes(b"\n".join([first.rstrip(b"\n"), *roots]) + b"\n")
        if not own_dir:
            (folder / "no-ca-dir").mkdir()
            _NO_CA_DIR[str(bundle)] = str(folder / "no-ca-dir")
        yield str(bundle)
    finally:
        _NO_CA_DIR.pop(str(bundle), None)
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
        if ca_file in _NO_CA_DIR:  # a bundle of git_ca_bundle's, which holds every root
            env["GIT_SSL_CAPATH"] = _NO_CA_DIR[ca_file]
    return env
