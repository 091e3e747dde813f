"""A hostile registry of the project's own, on 127.0.0.1: plain HTTP, or TLS with a certificate
from the test CA (tests/services/tlsca.py) valid for 127.0.0.1, ``localhost`` and every other
name /etc/hosts gives 127.0.0.1 (so "another host" and "not loopback by name" need no traffic
off this machine).

It is a small registry in its own right — blobs, upload sessions, mounts, manifests by tag and
by digest, paginated tag lists, Basic or Bearer auth with a token endpoint — storing everything
under a directory that tests read (:meth:`HostileRegistry.tags`, :meth:`manifest`,
:meth:`blobs`). Per request it can misbehave, as scripted with :class:`Fault`:

``downgrade``       rewrite ``Location`` / ``Link`` to ``http://`` (same host and port)
``rehost``          rewrite ``Location`` / ``Link`` to another ``host:port`` (``arg``)
``redirect``        answer 307 to ``arg`` (``downgrade``: this URL on ``http://``)
``gzip-bomb``       a gzip body of ``arg`` MiB of zeros (default 200: 204 KB on the wire)
``oversized``       a body of ``arg`` bytes (default 5 MiB) with its Content-Length
``oversized-stream`` the same with no Content-Length (ends when the connection closes)
``drop``            remove the JSON field at dotted path ``arg`` (``manifests.0.size``) from
                    the answer; Docker-Content-Digest names the new bytes
``set``             ``path=json`` sets a JSON field the same way (e.g. an invalid digest)
``lie-digest``      replace Docker-Content-Digest with ``arg`` (default another digest)
``store-then-503``  do the request (a PUT is stored), then answer 503
``huge-error``      a 404 whose body is ``arg`` bytes (default 200 MiB), no Content-Length
``no-length``       answer without Content-Length (on a HEAD: nothing says the size)
``status``          answer status ``arg`` with an empty body, touching nothing

With TLS, the same port also answers plain HTTP, so a client that downgrades is seen (with
what it sent) rather than refused at the handshake. Every other name of this machine plays a
storage backend (a CDN, presigned URLs): no auth is asked there.

Every request is recorded (:attr:`HostileRegistry.seen`: method, URL as the client addressed
it, headers), so a test can check where an ``Authorization`` header went.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.server
import json
import re
import socket
import ssl
import subprocess
import threading
import urllib.parse
import uuid
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from tests.services.faultproxy import _read_body
from tests.services.tlsca import LocalCA, QuietServer

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
_PATH = re.compile(r"^/v2/(?P<repo>.+?)/(?P<kind>manifests|blobs|tags)/(?P<rest>.*)$")


def loopback_aliases(hosts: Path = Path("/etc/hosts")) -> list[str]:
    """Names /etc/hosts gives 127.0.0.0/8 other than ``localhost``: they reach this machine,
    but nothing about the name says loopback."""
    names: list[str] = []
    for line in hosts.read_text().splitlines():
        fields = line.partition("#")[0].split()
        if fields and fields[0].startswith("127."):
            names += [n for n in fields[1:] if "localhost" not in n and n not in names]
    return names


@dataclass
class Fault:
    action: str
    method: str = "*"
    path: str = ""  # a regex searched in the request path (with its query)
    arg: str = ""
    times: int = 1  # 0: every matching request


@dataclass
class Seen:
    method: str
    url: str  # scheme://Host/path?query, as the client addressed it
    headers: dict[str, str] = field(default_factory=dict)  # names in lower case


@dataclass
class _Answer:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    stream: int = 0  # oversized-stream: this many bytes, no Content-Length
    file: Path | None = None  # a blob, sent from its file (the server holds no blob whole)


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _bomb(mib: int) -> bytes:
    """gzip of ``mib`` MiB of zeros, made a MiB at a time (never the whole in memory)."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    return b"".join(comp.compress(zeros) for _ in range(mib)) + comp.flush()


def _server_cert(ca: LocalCA, root: Path, names: list[str]) -> tuple[Path, Path]:
    """A server certificate from the test CA for 127.0.0.1 and ``names``."""
    key, csr, cert, ext = (root / n for n in ("hostile.key", "hostile.csr", "hostile.pem",
                                              "hostile.ext"))
    ext.write_text("subjectAltName=IP:127.0.0.1," + ",".join(f"DNS:{n}" for n in names)
                   + "\nextendedKeyUsage=serverAuth\n")

    def ssl_cmd(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    ssl_cmd("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
            "-subj", "/CN=127.0.0.1")
    ssl_cmd("x509", "-req", "-in", str(csr), "-CA", str(ca.ca_cert),
            "-CAkey", str(ca.ca_cert.parent / "ca.key"), "-CAcreateserial", "-out", str(cert),
            "-days", "2", "-extfile", str(ext))
    return cert, key


class HostileRegistry:
    def __init__(
        self,
        root: Path,
        ca: LocalCA | None = None,
        *,
        auth: str = "",  # "", "basic" or "bearer"
        credentials: tuple[str, str] | None = None,
        realm: str | None = None,  # the Bearer realm to name (default: this server's /token)
    ) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.auth = auth
        self.credentials = credentials
        self._realm = realm
        self.faults: list[Fault] = []
        self.page_size = 0  # tag lists: this many per page whatever the client asks (0: its n)
        self.seen: list[Seen] = []
        self.tokens_issued: set[str] = set()
        self.connections = 0  # TCP connections accepted, on every name of this machine
        self._lock = threading.Lock()
        self._bombs: dict[int, bytes] = {}
        self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER) if ca is not None else None
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            scheme = "http"

            def setup(self) -> None:
                # One port for both: a TLS ClientHello gets TLS, anything else plain HTTP (a
                # proxy that answers both, so a client that downgrades is seen, not refused).
                first = b""
                with contextlib.suppress(OSError):
                    first = self.request.recv(1, socket.MSG_PEEK)
                with server._lock:
                    server.connections += 1
                if first == b"\x16" and server._tls is not None:
                    self.request = server._tls.wrap_socket(self.request, server_side=True)
                    self.scheme = "https"
                super().setup()

            def handle(self) -> None:
                if self.scheme == "http" and server._tls is None:
                    # Plain HTTP, probed with a TLS ClientHello: answer as a plain server does.
                    with contextlib.suppress(OSError):
                        if self.connection.recv(1, socket.MSG_PEEK) == b"\x16":
                            self.wfile.write(b"HTTP/1.0 400 Bad Request\r\n\r\n")
                            return
                super().handle()

            def do_GET(self) -> None:
                with contextlib.suppress(OSError):
                    server._handle(self)

            do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = do_GET

        self.httpd = QuietServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.scheme = "http"
        if ca is not None:
            cert, key = _server_cert(ca, root, ["localhost", *loopback_aliases()])
            self._tls.load_cert_chain(cert, key)
            self.scheme = "https"
        self.port = int(self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    # ------------------------------------------------------------------ for tests

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}"

    @property
    def realm(self) -> str:
        return self._realm or f"{self.url}/token"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)

    def fault(self, action: str, method: str = "*", path: str = "", arg: str = "",
              times: int = 1) -> None:
        with self._lock:
            self.faults.append(Fault(action, method, path, arg, times))

    def tags(self, repo: str) -> dict[str, str]:
        """tag → digest, as stored."""
        d = self.root / "repos" / repo / "tags"
        return {p.name: p.read_text() for p in d.iterdir()} if d.is_dir() else {}

    def manifest(self, repo: str, digest: str) -> bytes | None:
        p = self._manifest_path(repo, digest)
        return p.read_bytes() if p.is_file() else None

    def manifests(self, repo: str) -> set[str]:
        d = self.root / "repos" / repo / "manifests"
        return {f"sha256:{p.name}" for p in d.glob("*") if "." not in p.name}

    def blobs(self) -> set[str]:
        d = self.root / "blobs"
        return {f"sha256:{p.name}" for p in d.glob("*")} if d.is_dir() else set()

    def store_blob(self, data: bytes) -> str:
        digest = _digest(data)
        (self.root / "blobs").mkdir(exist_ok=True)
        (self.root / "blobs" / digest.partition(":")[2]).write_bytes(data)
        return digest

    def store_manifest(self, repo: str, body: bytes, media_type: str, tag: str = "") -> str:
        digest = _digest(body)
        path = self._manifest_path(repo, digest)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
        path.with_suffix(".type").write_text(media_type)
        if tag:
            tags = self.root / "repos" / repo / "tags"
            tags.mkdir(parents=True, exist_ok=True)
            (tags / tag).write_text(digest)
        return digest

    def store_image(self, repo: str, arch: str, note: str = "", tag: str = "") -> tuple[str, int]:
        """A tiny one-layer OCI image; (manifest digest, manifest size)."""
        config = json.dumps({"architecture": arch, "os": "linux",
                             "config": {"Env": [f"NOTE={note}"]},
                             "rootfs": {"type": "layers", "diff_ids": []}}).encode()
        layer = f"layer {arch} {note}".encode()
        manifest = json.dumps({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": self.store_blob(config), "size": len(config)},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                        "digest": self.store_blob(layer), "size": len(layer)}],
        }).encode()
        return self.store_manifest(repo, manifest, OCI_MANIFEST, tag), len(manifest)

    def authorized(self) -> list[Seen]:
        """The requests that carried an Authorization header."""
        return [s for s in self.seen if "authorization" in s.headers]

    # ------------------------------------------------------------------ the server

    def _manifest_path(self, repo: str, digest: str) -> Path:
        return self.root / "repos" / repo / "manifests" / digest.partition(":")[2]

    def _match(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for f in self.faults:
                if f.method in ("*", method) and re.search(f.path, path):
                    return f
        return None

    def _consume(self, fault: Fault) -> None:
        with self._lock:
            if fault.times == 1 and fault in self.faults:
                self.faults.remove(fault)
            elif fault.times > 1:
                fault.times -= 1

    def _handle(self, h: http.server.BaseHTTPRequestHandler) -> None:
        """Record the request, apply the first matching fault, answer. A fault that changes
        the registry's answer waits for a request the registry does not refuse (401)."""
        body = _read_body(h)
        method, path = h.command, h.path
        scheme = getattr(h, "scheme", self.scheme)
        host = h.headers.get("Host", self.host)
        headers = {k.lower(): v for k, v in h.headers.items()}
        with self._lock:
            self.seen.append(Seen(method, f"{scheme}://{host}{path}", headers))
        fault = self._match(method, path)
        answer = self._pre(fault, host, path) if fault else None
        if answer is None:
            answer = self._answer(method, path, headers, body, host)
            if fault and answer.status != 401:
                answer = self._post(fault, answer, host)
            elif fault:
                fault = None
        if fault:
            self._consume(fault)
        self._write(h, method, answer, fault)

    def _pre(self, fault: Fault, host: str, path: str) -> _Answer | None:
        """Faults that answer instead of the registry."""
        if fault.action == "status":
            return _Answer(int(fault.arg))
        if fault.action == "redirect":
            target = fault.arg
            if target == "downgrade":
                target = f"http://{host}{path}"
            # with a small body, as registries send one (Docker Hub's is an HTML link)
            return _Answer(307, {"Location": target, "Content-Type": "text/html"},
                           f'<a href="{target}">Temporary Redirect</a>.\n'.encode())
        if fault.action == "gzip-bomb":
            mib = int(fault.arg or 200)
            if mib not in self._bombs:
                self._bombs[mib] = _bomb(mib)
            return _Answer(200, {"Content-Type": OCI_INDEX, "Content-Encoding": "gzip"},
                           self._bombs[mib])
        if fault.action == "oversized":
            size = int(fault.arg or 5 << 20)
            return _Answer(200, {"Content-Type": OCI_INDEX}, b"{" + b" " * (size - 2) + b"}")
        if fault.action == "oversized-stream":
            return _Answer(200, {"Content-Type": OCI_INDEX}, stream=int(fault.arg or 5 << 20))
        if fault.action == "huge-error":
            return _Answer(404, {"Content-Type": "application/json"},
                           stream=int(fault.arg or 200 << 20))
        return None

    def _post(self, fault: Fault, answer: _Answer, host: str) -> _Answer:
        """Faults that change the registry's own answer."""
        action = fault.action
        if action in ("downgrade", "rehost"):
            for name in ("Location", "Link"):
                if name in answer.headers:
                    base = f"{self.scheme}://{host}"
                    answer.headers[name] = _rewrite(answer.headers[name], base, action, fault.arg)
        elif action in ("drop", "set"):
            data = json.loads(answer.body)
            spec, _, value = fault.arg.partition("=")
            *parents, last = spec.split(".")
            node = data
            for key in parents:
                node = node[int(key)] if isinstance(node, list) else node[key]
            if action == "drop":
                del node[int(last) if isinstance(node, list) else last]
            else:
                node[int(last) if isinstance(node, list) else last] = json.loads(value)
            answer.body = json.dumps(data).encode()
            answer.headers["Docker-Content-Digest"] = _digest(answer.body)
        elif action == "lie-digest":
            answer.headers["Docker-Content-Digest"] = fault.arg or _digest(b"a lie")
        elif action == "store-then-503":
            return _Answer(503)
        return answer

    def _write(self, h: http.server.BaseHTTPRequestHandler, method: str, answer: _Answer,
               fault: Fault | None) -> None:
        h.send_response(answer.status)
        no_length = fault is not None and fault.action == "no-length"
        for k, v in answer.headers.items():
            if not (no_length and k == "Content-Length"):
                h.send_header(k, v)
        if answer.stream:
            h.send_header("Connection", "close")
            h.end_headers()
            h.close_connection = True
            chunk = b" " * (1 << 16)
            h.wfile.write(b"{")
            for _ in range(answer.stream >> 16):
                h.wfile.write(chunk)
            return
        if no_length:
            h.close_connection = True
        elif answer.file is None:
            h.send_header("Content-Length", str(len(answer.body)))
        h.end_headers()
        if method == "HEAD":
            return
        if answer.file is None:
            h.wfile.write(answer.body)
            return
        with answer.file.open("rb") as fh:
            while chunk := fh.read(1 << 16):
                h.wfile.write(chunk)

    def _authorized(self, headers: dict[str, str]) -> bool:
        got = headers.get("authorization", "")
        if self.auth == "basic":
            assert self.credentials is not None
            return got == "Basic " + base64.b64encode(":".join(self.credentials).encode()).decode()
        if self.auth == "bearer":
            return got.startswith("Bearer ") and got[7:] in self.tokens_issued
        return True

    def _answer(self, method: str, path: str, headers: dict[str, str], body: bytes,
                host: str) -> _Answer:
        url = urllib.parse.urlsplit(path)
        query = dict(urllib.parse.parse_qsl(url.query))
        if url.path == "/token":
            return self._token(headers)
        # Another name for this server plays a storage backend (a CDN, a presigned URL): no
        # auth there, so a client that follows a Location or redirect to it gets an answer.
        other = host.rpartition(":")[0] != "127.0.0.1"
        if not other and not self._authorized(headers):
            if self.auth == "basic":
                challenge = 'Basic realm="hostile"'
            else:
                scope = ""
                m = _PATH.match(url.path)
                if m:
                    scope = f',scope="repository:{m["repo"]}:pull"'
                challenge = f'Bearer realm="{self.realm}",service="hostile"{scope}'
            denied = b'{"errors":[{"code":"UNAUTHORIZED"}]}'
            return _Answer(401, {"WWW-Authenticate": challenge}, denied)
        if url.path == "/v2/":
            return _Answer(200, {}, b"{}")
        m = _PATH.match(url.path)
        if not m:
            return _not_found("NAME_UNKNOWN")
        repo, kind, rest = m["repo"], m["kind"], m["rest"]
        base = f"{self.scheme}://{host}/v2/{repo}"
        if kind == "manifests":
            return self._manifests(method, repo, rest, headers, body)
        if kind == "tags":
            return self._tag_list(repo, query)
        if rest.startswith("uploads/"):
            return self._uploads(method, repo, rest[len("uploads/"):], query, body, base)
        blob = self.root / "blobs" / rest.partition(":")[2]
        if method in ("GET", "HEAD") and rest.startswith("sha256:") and blob.is_file():
            return _Answer(200, {"Content-Type": "application/octet-stream",
                                 "Docker-Content-Digest": rest,
                                 "Content-Length": str(blob.stat().st_size)}, file=blob)
        return _not_found("BLOB_UNKNOWN")

    def _token(self, headers: dict[str, str]) -> _Answer:
        if self.credentials is not None:
            want = "Basic " + base64.b64encode(":".join(self.credentials).encode()).decode()
            if headers.get("authorization") != want:
                return _Answer(401)
        token = uuid.uuid4().hex
        with self._lock:
            self.tokens_issued.add(token)
        return _Answer(200, {"Content-Type": "application/json"},
                       json.dumps({"token": token, "expires_in": 300}).encode())

    def _manifests(self, method: str, repo: str, ref: str, headers: dict[str, str],
                   body: bytes) -> _Answer:
        if method == "PUT":
            media_type = headers.get("content-type", OCI_MANIFEST)
            tag = "" if ref.startswith("sha256:") else ref
            digest = self.store_manifest(repo, body, media_type, tag)
            if ref.startswith("sha256:") and ref != digest:
                return _Answer(400, {}, b'{"errors":[{"code":"DIGEST_INVALID"}]}')
            return _Answer(201, {"Docker-Content-Digest": digest,
                                 "Location": f"/v2/{repo}/manifests/{digest}"})
        digest = ref if ref.startswith("sha256:") else self.tags(repo).get(ref, "")
        path = self._manifest_path(repo, digest) if digest else None
        if path is None or not path.is_file():
            return _not_found("MANIFEST_UNKNOWN")
        data = path.read_bytes()
        return _Answer(200, {"Content-Type": path.with_suffix(".type").read_text(),
                             "Docker-Content-Digest": digest}, data)

    def _tag_list(self, repo: str, query: dict[str, str]) -> _Answer:
        tags = sorted(self.tags(repo))
        if not tags:
            return _not_found("NAME_UNKNOWN")
        last = query.get("last", "")
        tags = [t for t in tags if t > last]
        headers = {"Content-Type": "application/json"}
        n = self.page_size or int(query.get("n") or 0)
        if n and len(tags) > n:
            tags = tags[:n]
            headers["Link"] = f'</v2/{repo}/tags/list?n={n}&last={tags[-1]}>; rel="next"'
        return _Answer(200, headers, json.dumps({"name": repo, "tags": tags}).encode())

    def _uploads(self, method: str, repo: str, session: str, query: dict[str, str],
                 body: bytes, base: str) -> _Answer:
        uploads = self.root / "uploads"
        uploads.mkdir(exist_ok=True)
        if method == "POST":
            mount = query.get("mount", "")
            if mount and (self.root / "blobs" / mount.partition(":")[2]).is_file():
                return _Answer(201, {"Location": f"{base}/blobs/{mount}",
                                     "Docker-Content-Digest": mount})
            sid = uuid.uuid4().hex
            (uploads / sid).write_bytes(b"")
            return _Answer(202, {"Location": f"{base}/blobs/uploads/{sid}",
                                 "Docker-Upload-UUID": sid, "Range": "0-0"})
        part = uploads / session
        if not re.fullmatch(r"[0-9a-f]{32}", session) or not part.is_file():
            return _not_found("BLOB_UPLOAD_UNKNOWN")
        if method == "DELETE":
            part.unlink()
            return _Answer(204)
        if method == "PATCH":
            with part.open("ab") as fh:
                fh.write(body)
            return _Answer(202, {"Location": f"{base}/blobs/uploads/{session}"})
        if method == "PUT":
            data = part.read_bytes() + body
            digest = query.get("digest", "")
            if _digest(data) != digest:
                return _Answer(400, {}, b'{"errors":[{"code":"DIGEST_INVALID"}]}')
            self.store_blob(data)
            part.unlink()
            return _Answer(201, {"Location": f"{base}/blobs/{digest}",
                                 "Docker-Content-Digest": digest})
        return _Answer(405)


def _not_found(code: str) -> _Answer:
    return _Answer(404, {"Content-Type": "application/json"},
                   json.dumps({"errors": [{"code": code}]}).encode())


def _rewrite(value: str, base: str, action: str, arg: str) -> str:
    """A Location, or a Link's ``<url>``, made absolute against ``base``, then downgraded to
    plain HTTP or moved to the ``host:port`` ``arg``."""

    def one(url: str) -> str:
        parts = urllib.parse.urlsplit(urllib.parse.urljoin(base + "/", url))
        if action == "downgrade":
            return urllib.parse.urlunsplit(parts._replace(scheme="http"))
        return urllib.parse.urlunsplit(parts._replace(netloc=arg))

    if value.startswith("<"):
        url, _, rest = value[1:].partition(">")
        return f"<{one(url)}>{rest}"
    return one(value)
