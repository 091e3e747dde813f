"""The tests' HTTPS servers say in one line when a client goes away mid-download (a TLS
connection closed early), instead of a traceback in the test or bench output; anything else
still prints its traceback."""

from __future__ import annotations

import socket
import ssl
import time
from pathlib import Path

import pytest

from tests.services.tlsca import HTTPSFileServer, LocalCA


def test_a_download_cut_short_is_one_line(
    tmp_path: Path, test_ca: LocalCA, capfd: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "big").write_bytes(b"\0" * (32 << 20))
    server = HTTPSFileServer(tmp_path, test_ca)
    try:
        ctx = ssl.create_default_context(cafile=str(test_ca.ca_cert))
        with socket.create_connection(("127.0.0.1", server.port)) as raw, \
                ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(b"GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert tls.recv(4096).startswith(b"HTTP/1.")
        for _ in range(100):  # the server notices on its next write
            err = capfd.readouterr().err
            if err:
                break
            time.sleep(0.05)
    finally:
        server.stop()
    assert "a client closed its connection early" in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
