"""Git's smart-HTTP protocol over HTTPS on 127.0.0.1: ``git http-backend`` behind a small CGI
bridge, with the test CA's server certificate. Real git on both ends; nothing faked."""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
from pathlib import Path

from tests.services.tlsca import HTTPSServer, LocalCA

_BACKEND_TIMEOUT = 60.0


class GitHTTPSServer(HTTPSServer):
    """Serves the bare repositories under ``root`` (``root/NAME.git`` → ``url/NAME.git``)."""

    def __init__(self, root: Path, ca: LocalCA, port: int = 0) -> None:
        if shutil.which("git") is None:
            raise RuntimeError("git is not installed")
        backend_root = str(root)

        class Handler(_CGIHandler):
            project_root = backend_root

        super().__init__(Handler, ca, port)


class _CGIHandler(http.server.BaseHTTPRequestHandler):
    project_root = ""
    protocol_version = "HTTP/1.0"  # the CGI output is not chunked; close after each response

    def do_GET(self) -> None:
        self._cgi()

    def do_POST(self) -> None:
        self._cgi()

    def _cgi(self) -> None:
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": self.project_root,
            "GIT_HTTP_EXPORT_ALL": "1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": self.client_address[0],
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
        }
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        proc = subprocess.run(
            ["git", "http-backend"],
            input=body,
            env=env,
            capture_output=True,
            timeout=_BACKEND_TIMEOUT,
        )
        head, _, payload = proc.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = proc.stdout.partition(b"\n\n")
        status = 200
        headers: list[tuple[str, str]] = []
        for line in head.decode("latin-1").splitlines():
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = int(value.strip().split()[0])
            elif key:
                headers.append((key, value.strip()))
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        pass
