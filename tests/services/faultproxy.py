"""A fault-injecting HTTP proxy of the project's own, on 127.0.0.1, in front of a real registry.

Per request it forwards, or drops the connection (before forwarding, after forwarding without
answering, or half-way through the answer's body), or answers 500/503/429 itself (429 with
``Retry-After: 0`` or ``1``). Chosen by a seeded ``random.Random`` at a given rate, or by a
script of actions for deterministic tests (where ``429:N`` fixes Retry-After at N, and 502 and
504 may be asked for too). Every action taken is counted.

``location_to`` sends clients elsewhere for uploads (another origin), to check what they
carry there; ``authorized`` lists the requests that came with an Authorization header.

Scripted-only actions that make the registry look dishonest: ``lie-digest`` forwards but
replaces ``Docker-Content-Digest`` with another digest; ``corrupt-consistent`` flips a byte of
the body and sets the header to the digest of the corrupted bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import http.server
import json
import random
import socket
import threading
import urllib.parse
from collections import Counter
from collections.abc import Callable

from tests.services.tlsca import QuietServer

FAULTS = ("drop-before", "drop-after", "drop-mid-body", "500", "503", "429")
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade"}


class FaultProxy:
    def __init__(
        self,
        target_port: int,
        *,
        seed: int = 0,
        rate: float = 0.0,
        script: list[str] | None = None,
        when: Callable[[str, str], bool] | None = None,
        faults: tuple[str, ...] = FAULTS,
        port: int = 0,
    ) -> None:
        self.target_port = target_port
        self.rng = random.Random(seed)
        self.rate = rate
        self.script = list(script or [])
        self.when = when
        self.fault_kinds = faults  # what a random fault is drawn from
        self.counts: Counter[str] = Counter()
        self.log: list[tuple[str, str, str]] = []  # (method, path, action)
        self.authorized: list[str] = []  # paths of requests that carried an Authorization
        self.location_to: str | None = None  # rewrite Location headers to this host:port
        self.connections = 0  # TCP connections accepted (a client that keeps one alive: 1)
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def handle(self) -> None:
                # A TLS ClientHello (the client probing for HTTPS): answer as a plain HTTP
                # server does, rather than wait for a request line that never comes.
                with contextlib.suppress(OSError):
                    if self.connection.recv(1, socket.MSG_PEEK) == b"\x16":
                        self.wfile.write(b"HTTP/1.0 400 Bad Request\r\n\r\n")
                        return
                super().handle()

            def setup(self) -> None:
                super().setup()
                with proxy._lock:
                    proxy._open.add(self.connection)
                    proxy.connections += 1

            def finish(self) -> None:
                with proxy._lock:
                    proxy._open.discard(self.connection)
                super().finish()

            def do_GET(self) -> None:
                proxy._handle(self)

            do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = do_GET

        self.httpd = QuietServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def refuse(self, method: str, path: str, content_type: str) -> tuple[int, bytes] | None:
        """An answer the registry behind would not give (a subclass's quirk), or None."""
        return None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        """Stop listening and cut open keep-alive connections: the port now refuses."""
        self.httpd.shutdown()
        self.httpd.server_close()
        with self._lock:
            for conn in self._open:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)

    @property
    def faults(self) -> int:
        return sum(n for kind, n in self.counts.items() if kind != "forward")

    def _choose(self, method: str, path: str) -> tuple[str, str]:
        """(action, Retry-After value) for this request, under the lock (seeded order)."""
        with self._lock:
            if self.when is not None and not self.when(method, path):
                action = "forward"
            elif self.script:
                action = self.script.pop(0)
            elif self.rate and self.rng.random() < self.rate:
                action = self.rng.choice(self.fault_kinds)
            else:
                action = "forward"
            return action, self.rng.choice(("0", "1"))

    def _record(self, method: str, path: str, action: str) -> None:
        with self._lock:
            self.counts[action] += 1
            self.log.append((method, path, action))

    def _handle(self, h: http.server.BaseHTTPRequestHandler) -> None:
        body = _read_body(h)
        method, path = h.command, h.path
        if h.headers.get("Authorization"):
            with self._lock:
                self.authorized.append(path)
        refusal = self.refuse(method, path, h.headers.get("Content-Type", ""))
        if refusal is not None:
            self._record(method, path, "refused")
            h.send_response(refusal[0])
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(refusal[1])))
            h.end_headers()
            h.wfile.write(refusal[1])
            return None
        action, wait = self._choose(method, path)
        if action.startswith("429:"):  # scripted: a fixed Retry-After
            action, wait = "429", action.partition(":")[2]
        if action == "drop-before":
            self._record(method, path, action)
            return _drop(h)
        if action in ("500", "502", "503", "504", "429"):
            self._record(method, path, action)
            h.send_response(int(action))
            if action == "429":
                h.send_header("Retry-After", wait)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return None
        conn = http.client.HTTPConnection("127.0.0.1", self.target_port, timeout=60)
        try:
            headers = {k: v for k, v in h.headers.items() if k.lower() not in HOP_BY_HOP}
            if body or method in ("PUT", "POST", "PATCH"):
                headers["Content-Length"] = str(len(body))
            conn.request(method, path, body=body or None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            status, reason, out = resp.status, resp.reason, resp.getheaders()
        finally:
            conn.close()
        if action == "drop-after" or (action == "drop-mid-body" and not data):
            self._record(method, path, "drop-after")
            return _drop(h)
        out = [(k, v) for k, v in out if k.lower() not in HOP_BY_HOP]
        if self.location_to:
            out = [(k, _rehost(v, self.location_to) if k.lower() == "location" else v)
                   for k, v in out]
        if action == "lie-digest":
            out = _set(out, "Docker-Content-Digest", "sha256:" + "0" * 64)
        elif action == "corrupt-consistent" and data:
            data = bytes([data[0] ^ 0x20]) + data[1:]
            out = _set(out, "Docker-Content-Digest", "sha256:" + hashlib.sha256(data).hexdigest())
        self._record(method, path, action)
        h.send_response(status, reason)
        for k, v in out:
            if method == "HEAD" or k.lower() != "content-length":
                h.send_header(k, v)
        if method != "HEAD":
            h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if method == "HEAD":
            return None
        if action == "drop-mid-body":
            h.wfile.write(data[: len(data) // 2])
            h.wfile.flush()
            return _drop(h)
        h.wfile.write(data)
        return None


def _read_body(h: http.server.BaseHTTPRequestHandler) -> bytes:
    if h.headers.get("Transfer-Encoding", "").lower() == "chunked":
        parts = []
        while True:
            size = int(h.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                h.rfile.readline()
                return b"".join(parts)
            parts.append(h.rfile.read(size))
            h.rfile.readline()
    return h.rfile.read(int(h.headers.get("Content-Length") or 0))


def _drop(h: http.server.BaseHTTPRequestHandler) -> None:
    """Close the client's connection without (finishing) an answer."""
    h.close_connection = True
    with contextlib.suppress(OSError):
        h.connection.shutdown(socket.SHUT_RDWR)


def _rehost(url: str, host: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(netloc=host)) if parts.netloc else url


def _set(headers: list[tuple[str, str]], name: str, value: str) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers if k.lower() != name.lower()] + [(name, value)]


SWR_MESSAGE = "Invalid image, fail to parse 'manifest.json'"
OCI_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
)


class SWRStandIn(FaultProxy):
    """A stand-in for Huawei SWR (which cannot run here) in front of a real registry: it
    refuses a manifest PUT with an OCI media type, answering 400 and the message SWR users
    report ("Invalid image, fail to parse 'manifest.json'", vllm-ascend #16117); Docker manifest
    lists and v2s2 manifests pass. Only that quirk is imitated, nothing else of SWR."""

    def refuse(self, method: str, path: str, content_type: str) -> tuple[int, bytes] | None:
        if method == "PUT" and "/manifests/" in path and content_type in OCI_TYPES:
            body = {"errors": [{"code": "MANIFEST_INVALID", "message": SWR_MESSAGE}]}
            return 400, json.dumps(body).encode()
        return None


class HubLike(FaultProxy):
    """Docker Hub's rate limit, imitated: a share (``rate``) of pulls and HEADs of manifests
    and blobs is answered 429 with ``Retry-After``; uploads pass."""

    def __init__(self, target_port: int, *, seed: int = 0, rate: float = 0.3) -> None:
        super().__init__(
            target_port, seed=seed, rate=rate, faults=("429",),
            when=lambda method, path: method in ("GET", "HEAD")
            and ("/manifests/" in path or "/blobs/sha256:" in path),
        )
