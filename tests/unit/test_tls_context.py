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
