"""``cannery.tls.ssl_context`` is made once per extra CA file as it is on disk: the lock's
resolvers and the publish client share one, and a CA file replaced in between is loaded anew
(two real CAs made with openssl)."""

from __future__ import annotations

import os
import ssl
from pathlib import Path

from cannery.tls import ssl_context
from tests.services.tlsca import make_ca


def _subjects(ctx: ssl.SSLContext) -> set[str]:
    return {
        value for cert in ctx.get_ca_certs() for rdn in cert["subject"] for key, value in rdn
        if key == "commonName"
    }


def test_one_context_per_ca_file_and_a_new_one_when_the_file_changes(tmp_path: Path) -> None:
    first = make_ca(tmp_path / "one", name="cannery first CA")
    second = make_ca(tmp_path / "two", name="cannery second CA, a longer name")
    extra = tmp_path / "extra.pem"
    extra.write_bytes(first.ca_cert.read_bytes())
    ctx = ssl_context(extra)
    assert ssl_context(extra) is ctx
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert "cannery first CA" in _subjects(ctx)
    extra.write_bytes(second.ca_cert.read_bytes())
    os.utime(extra, ns=(1, 1))  # a replaced file: other bytes, another time
    again = ssl_context(extra)
    assert again is not ctx
    assert "cannery second CA, a longer name" in _subjects(again)
    assert "cannery first CA" not in _subjects(again)
    assert ssl_context(None) is not ctx
