"""``cannery.tls.ssl_context`` hands out a new context on every call: a caller that weakens its
own (as a test of the client's refusal does) weakens no other. A build shares one context
between its lock resolvers and its publish client by passing it, never through a cache."""

from __future__ import annotations

import ssl
from pathlib import Path

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
