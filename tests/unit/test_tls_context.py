"""``cannery.tls.ssl_context`` hands out a new context on every call: a caller that weakens its
own (as a test of the client's refusal does) weakens no other. A build shares one context
between its lock resolvers and its publish client by passing it, never through a cache."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from cannery.tls import ssl_context
from tests.services.tlsca import make_ca


def _subjects(ctx: ssl.SSLContext) -> set[str]:
    return {
        value for cert in ctx.get_ca_certs() for rdn in cert["subject"] for key, value in rdn
        if key == "commonName"
    }


def test_a_weakened_context_is_nobody_elses(tmp_path: Path) -> None:
    ca = make_ca(tmp_path / "ca", name="cannery context CA")
    first = ssl_context(ca.ca_cert)
    assert "cannery context CA" in _subjects(first)
    first.check_hostname = False
    first.verify_mode = ssl.CERT_NONE
    again = ssl_context(ca.ca_cert)
    assert again is not first
    assert again.verify_mode == ssl.CERT_REQUIRED and again.check_hostname
    assert "cannery context CA" in _subjects(again)


def test_a_context_made_ahead_is_the_same_context_and_its_error_the_same_error(
    tmp_path: Path,
) -> None:
    """``context_ahead`` (the build's roots, loaded while its modules import): the context it
    gives verifies and trusts the extra CA, is new on every call, and a CA file that cannot be
    loaded is the same one-line InputError as ``ssl_context``'s, raised where it is used."""
    import pytest

    from cannery.errors import InputError
    from cannery.tls import context_ahead

    ca = make_ca(tmp_path / "ca", name="cannery ahead CA")
    get = context_ahead(ca.ca_cert)
    ctx = get()
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert "cannery ahead CA" in _subjects(ctx)
    assert get() is ctx and context_ahead(ca.ca_cert)() is not ctx
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate\n")
    with pytest.raises(InputError) as ahead:
        context_ahead(bad)()
    with pytest.raises(InputError) as direct:
        ssl_context(bad)
    assert str(ahead.value) == str(direct.value)


def test_gits_bundle_holds_each_root_once_and_is_its_whole_trust(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``git_ca_bundle``: the extra CA file first, as given, then every root the system trusts
    (its CA file, its CA directory's files, certifi's), each certificate once (the sets overlap
    almost whole: git and uv parse every certificate of the bundle in every process), and,
    while the block runs, an empty CA directory that ``git_trust_env`` hands git with it, so a
    GnuTLS git does not read /etc/ssl/certs as well. A root only in the CA directory
    (``SSL_CERT_DIR``) is in the bundle: adding a CA never takes one away. All of it is gone
    after the block."""
    import os

    from cannery.tls import _pem_certs, _system_roots, git_ca_bundle, git_trust_env

    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    ca_dir = tmp_path / "ca-dir"
    ca_dir.mkdir()
    only_in_dir = make_ca(tmp_path / "dir-ca", name="cannery directory CA")
    (ca_dir / "directory-ca.pem").write_bytes(only_in_dir.ca_cert.read_bytes())
    monkeypatch.setenv("SSL_CERT_DIR", str(ca_dir))
    ca = make_ca(tmp_path / "ca", name="cannery bundle CA")
    given = ca.ca_cert.read_bytes()
    wanted = {c for path in _system_roots() for c in _pem_certs(path.read_bytes())}
    with git_ca_bundle(ca.ca_cert) as name:
        assert name is not None
        bundle = Path(name).read_bytes()
        env = git_trust_env(name)
        capath = Path(env["GIT_SSL_CAPATH"])
        assert capath.is_dir() and not os.listdir(capath)
        assert env["GIT_SSL_CAINFO"] == name
        assert env["GIT_CONFIG_KEY_0"] == "http.sslVerify" and env["GIT_CONFIG_VALUE_0"] == "true"
    assert bundle.startswith(given.rstrip(b"\n"))
    certs = _pem_certs(bundle)
    assert len(certs) == len(set(certs))  # each once
    dir_root = set(_pem_certs(only_in_dir.ca_cert.read_bytes()))
    assert set(certs) == wanted | set(_pem_certs(given)) | dir_root  # no root lost
    assert len(wanted) > 1 and not dir_root & wanted
    assert not Path(name).parent.exists()
    # once the block has ended, and for a CA file not from git_ca_bundle (even one beside a
    # directory of that name), git keeps its own CA directory
    assert "GIT_SSL_CAPATH" not in git_trust_env(name)
    (tmp_path / "no-ca-dir").mkdir()
    (tmp_path / "mine.pem").write_bytes(given)
    assert "GIT_SSL_CAPATH" not in git_trust_env(str(tmp_path / "mine.pem"))


def test_a_ca_directory_in_gits_configuration_is_left_to_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user whose git configuration names a CA directory (``http.sslCAPath``, or one URL's)
    keeps it: the bundle is git's CA file, and no empty directory replaces theirs."""
    from cannery.tls import git_ca_bundle, git_trust_env

    config = tmp_path / "gitconfig"
    config.write_text('[http "https://git.example.com/"]\n\tsslCAPath = /srv/corp-cas\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    ca = make_ca(tmp_path / "ca", name="cannery bundle CA")
    with git_ca_bundle(ca.ca_cert) as name:
        assert name is not None
        env = git_trust_env(name)
        assert env["GIT_SSL_CAINFO"] == name and "GIT_SSL_CAPATH" not in env
        assert not (Path(name).parent / "no-ca-dir").exists()


def test_pem_certs_compares_one_certificate_however_it_is_wrapped() -> None:
    from cannery.tls import _pem_certs

    body = "QUJD" * 40
    wrapped_64 = "\n".join(body[i:i + 64] for i in range(0, len(body), 64))
    wrapped_76 = "\r\n".join(body[i:i + 76] for i in range(0, len(body), 76))
    one = f"# a comment\n-----BEGIN CERTIFICATE-----\n{wrapped_64}\n-----END CERTIFICATE-----\n"
    two = f"-----BEGIN CERTIFICATE-----\r\n{wrapped_76}\r\n-----END CERTIFICATE-----\r\n"
    assert _pem_certs(one.encode()) == _pem_certs(two.encode())
    assert len(_pem_certs((one + two).encode())) == 2
    # another kind of block (OpenSSL's trust settings) is kept, as written
    trusted = (f"-----BEGIN TRUSTED CERTIFICATE-----\n{wrapped_64}\n"
               "-----END TRUSTED CERTIFICATE-----")
    assert _pem_certs((one + trusted + "\n").encode())[1] == trusted.encode()
