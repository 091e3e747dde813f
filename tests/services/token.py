"""A registry token service (the Docker Registry v2 Bearer token spec) for tests: issues RS256
JWTs signed with openssl, with the signing certificate in the `x5c` header, as the CNCF
distribution registry verifies them against its `rootcertbundle`."""

from __future__ import annotations

import base64
import http.server
import json
import subprocess
import threading
import time
import urllib.parse
from pathlib import Path

from tests.services.tlsca import QuietServer


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenServer:
    def __init__(self, root: Path, service: str = "cannery-test",
                 issuer: str = "cannery-test-issuer",
                 credentials: tuple[str, str] | None = None) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.key = root / "token.key"
        self.cert = root / "token.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-keyout", str(self.key), "-out", str(self.cert),
                        "-subj", "/CN=cannery test token signer"],
                       check=True, capture_output=True)
        der = subprocess.run(["openssl", "x509", "-in", str(self.cert), "-outform", "DER"],
                             check=True, capture_output=True).stdout
        self.x5c = base64.b64encode(der).decode()
        self.service = service
        self.issuer = issuer
        self.credentials = credentials
        self.requests: list[dict[str, str]] = []
        self.delay = 0.0  # seconds each answer waits (a slow token service, as over a WAN)
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
                auth = self.headers.get("Authorization", "")
                server.requests.append({**query, "authorization": auth.split(" ")[0]})
                time.sleep(server.delay)
                if server.credentials is not None:
                    want = "Basic " + base64.b64encode(
                        ":".join(server.credentials).encode()).decode()
                    if auth != want:
                        self.send_response(401)
                        self.end_headers()
                        return
                body = json.dumps({"token": server.sign(query.get("scope", ""))}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = QuietServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def realm(self) -> str:
        return f"http://127.0.0.1:{self.port}/token"

    def sign(self, scope: str) -> str:
        access = []
        for item in scope.split(" "):
            parts = item.split(":")
            if len(parts) == 3:
                access.append({"type": parts[0], "name": parts[1],
                               "actions": parts[2].split(",")})
        now = int(time.time())
        header = {"typ": "JWT", "alg": "RS256", "x5c": [self.x5c]}
        claims = {"iss": self.issuer, "sub": "", "aud": self.service, "exp": now + 300,
                  "nbf": now - 10, "iat": now, "jti": str(now), "access": access}
        signing_input = (_b64url(json.dumps(header).encode()) + "."
                         + _b64url(json.dumps(claims).encode()))
        sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(self.key)],
                             input=signing_input.encode(), check=True,
                             capture_output=True).stdout
        return signing_input + "." + _b64url(sig)

    def registry_auth(self) -> str:
        return ("auth:\n  token:\n"
                f"    realm: {self.realm}\n    service: {self.service}\n"
                f"    issuer: {self.issuer}\n    rootcertbundle: {self.cert}\n")

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
