"""`download.resolve_url` over verified TLS (the test CA's HTTPS server on 127.0.0.1): an answer
other than 200 is an error, and its body is never hashed into the lock."""

from __future__ import annotations

import hashlib
import http.server
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cannery.download import resolve_url
from cannery.errors import NetworkError
from cannery.tls import ssl_context
from tests.services.tlsca import HTTPSFileServer, LocalCA

pytestmark = pytest.mark.e2e


class _Failing(http.server.BaseHTTPRequestHandler):
    """Answers every GET with the status in its path (/500 → 500), with a body."""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body = b"<html>an error page, not an installer</html>"
        self.send_response(int(self.path.strip("/").split(".")[0]))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def failing(test_ca: LocalCA) -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(test_ca.server_cert, test_ca.server_key)
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"https://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("status", [500, 503, 203, 403])
def test_non_200_is_an_error(failing: str, test_ca: LocalCA, status: int) -> None:
    with pytest.raises(NetworkError) as exc:
        resolve_url(f"{failing}/{status}.run", ssl_context(test_ca.ca_cert))
    assert f"HTTP {status}" in str(exc.value)


def test_missing_file_is_an_error_and_the_file_is_hashed_when_there(
    https_files: tuple[HTTPSFileServer, Path], test_ca: LocalCA
) -> None:
    server, root = https_files
    url = f"{server.url}/cann-download-test.run"
    with pytest.raises(NetworkError, match="HTTP 404"):
        resolve_url(url, ssl_context(test_ca.ca_cert))
    data = b"#!/bin/sh\necho installer\n"
    (root / "cann-download-test.run").write_bytes(data)
    assert resolve_url(url, ssl_context(test_ca.ca_cert)) == (
        hashlib.sha256(data).hexdigest(), len(data))
