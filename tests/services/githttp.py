"""Git's smart HTTP protocol over HTTPS on 127.0.0.1: bare repositories under ``root``, served
by the real ``git http-backend`` (CGI) behind the test CA's server certificate, so clients fetch
exactly as they do from a git host (shallow fetches of a commit included)."""

from __future__ import annotations

import http.server
import os
import ssl
import subprocess
import threading
from pathlib import Path

from tests.services.tlsca import LocalCA


class GitHTTPSServer:
    def __init__(self, root: Path, ca: LocalCA) -> None:
        self.root = root
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server._cgi(self)

            def do_POST(self) -> None:
                server._cgi(self)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
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

    def _cgi(self, req: http.server.BaseHTTPRequestHandler) -> None:
        path, _, query = req.path.partition("?")
        length = int(req.headers.get("Content-Length") or 0)
        body = req.rfile.read(length) if length else b""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REQUEST_METHOD": req.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": req.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": "127.0.0.1",
            "GIT_PROTOCOL": req.headers.get("Git-Protocol", ""),
            "HTTP_CONTENT_ENCODING": req.headers.get("Content-Encoding", ""),
        }
        proc = subprocess.run(
            ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
        )
        head, _, payload = proc.stdout.partition(b"\r\n\r\n")
        status = 200
        headers = []
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name, value.strip()))
        req.send_response(status)
        for name, value in headers:
            req.send_header(name, value)
        req.send_header("Content-Length", str(len(payload)))
        req.end_headers()
        req.wfile.write(payload)
