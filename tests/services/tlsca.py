"""A throwaway test CA (made with the openssl CLI) and an HTTPS file server signed by it."""

from __future__ import annotations

import http.server
import shutil
import ssl
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class LocalCA:
    ca_cert: Path
    server_cert: Path
    server_key: Path


def make_ca(root: Path, name: str = "cannery test CA") -> LocalCA:
    if shutil.which("openssl") is None:
        raise RuntimeError("openssl is not installed: run `bash .ci/run` (it installs it)")
    root.mkdir(parents=True, exist_ok=True)

    def ssl_cmd(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=root, check=True, capture_output=True)

    ssl_cmd(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-subj",
        f"/CN={name}",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    )
    ssl_cmd(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    )
    (root / "san.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
    )
    ssl_cmd(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "san.ext",
    )
    return LocalCA(root / "ca.pem", root / "server.pem", root / "server.key")


class QuietServer(http.server.ThreadingHTTPServer):
    """A threaded HTTP server that says in one line when a client went away mid-request (a
    download cut short, a TLS connection closed early: expected in tests and benches), and
    prints a traceback only for anything else."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, (ssl.SSLError, ConnectionError, TimeoutError)):
            host, port = self.server_address[:2]
            print(f"{host}:{port}: a client closed its connection early "
                  f"({type(exc).__name__}); nothing to do", file=sys.stderr)
            return
        super().handle_error(request, client_address)


class HTTPSServer:
    """A threaded HTTPS server on 127.0.0.1 with the test CA's server certificate."""

    def __init__(self, handler: Any, ca: LocalCA, port: int = 0) -> None:
        self.httpd = QuietServer(("127.0.0.1", port), handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(ca.server_cert, ca.server_key)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


class HTTPSFileServer(HTTPSServer):
    """Serves ``root`` over HTTPS on 127.0.0.1 with the test CA's server certificate."""

    def __init__(self, root: Path, ca: LocalCA, port: int = 0) -> None:
        self.requests: list[str] = []  # the paths asked for, in order (a test may clear it)
        seen = self.requests
        handler = lambda *a, **kw: _QuietHandler(  # noqa: E731
            *a, directory=str(root), seen=seen, **kw)
        super().__init__(handler, ca, port)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *args: Any, seen: list[str], **kwargs: Any) -> None:
        self.seen = seen  # set first: the base class handles the request inside __init__
        super().__init__(*args, **kwargs)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        self.seen.append(self.path)

    def log_message(self, format: str, *args: object) -> None:
        pass
