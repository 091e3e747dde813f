"""A STAND-IN for a registry with the OCI 1.1 referrers API, on 127.0.0.1.

Debian's docker-registry 2.8 has no referrers API and no registry that has one can be installed
here, so this small proxy adds the distribution spec's endpoint in front of a real
docker-registry: every request is forwarded, except ``GET /v2/<name>/referrers/<digest>``, which
it answers from the manifests with a ``subject`` that were PUT through it (an image index of
their descriptors with ``artifactType`` and annotations, filtered by ``?artifactType=`` with the
``OCI-Filters-Applied`` header, as the spec says). A PUT of such a manifest is answered with
``OCI-Subject``, which is how a client learns the registry keeps the list itself.

With ``api=False, conditional=True`` it is instead a stand-in for a registry without the API
that honours conditional manifest PUTs (docker-registry 2.8 ignores ``If-Match``): a PUT with
``If-Match`` or ``If-None-Match: *`` whose precondition no longer holds for the tag is answered
412, checked and forwarded under one lock, so the tag-schema fallback's read-modify-write can be
tested against real concurrent writers.
"""

from __future__ import annotations

import hashlib
import http.client
import http.server
import json
import threading
import urllib.parse

from tests.services.tlsca import QuietServer

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade"}
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


class ReferrersAPIStandIn:
    def __init__(self, target_port: int, api: bool = True, conditional: bool = False) -> None:
        self.target_port = target_port
        self.api = api
        self.conditional = conditional
        self.refused = 0  # 412 answers given
        self._put_lock = threading.Lock()
        self.referrers: dict[tuple[str, str], list[dict[str, object]]] = {}
        self.api_calls = 0
        self._lock = threading.Lock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                server._handle(self)

            do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = do_GET

        self.httpd = QuietServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _handle(self, h: http.server.BaseHTTPRequestHandler) -> None:
        body = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        parts = urllib.parse.urlsplit(h.path)
        name, sep, rest = parts.path.removeprefix("/v2/").rpartition("/referrers/")
        if self.api and h.command == "GET" and sep and rest.startswith("sha256:"):
            return self._referrers(h, name, rest, urllib.parse.parse_qs(parts.query))
        mname, msep, _ = parts.path.removeprefix("/v2/").rpartition("/manifests/")
        cond = h.headers.get("If-Match") or h.headers.get("If-None-Match")
        if self.conditional and h.command == "PUT" and msep and cond:
            with self._put_lock:
                head, _, head_headers = self._forward(h, "HEAD", b"", accept=OCI_INDEX)
                etag = dict((k.lower(), v) for k, v in head_headers).get("etag")
                if_match = h.headers.get("If-Match")
                ok = (head == 200 and etag == if_match) if if_match else head == 404
                if not ok:
                    self.refused += 1
                    h.send_response(412)
                    h.send_header("Content-Length", "0")
                    h.end_headers()
                    return None
                status, data, out = self._forward(h, h.command, body)
        else:
            status, data, out = self._forward(h, h.command, body)
        if self.api and h.command == "PUT" and msep and status == 201:
            subject = self._record(mname, body, h.headers.get("Content-Type", ""))
            if subject:
                out.append(("OCI-Subject", subject))
        h.send_response(status)
        for k, v in out:
            if h.command == "HEAD" or k.lower() != "content-length":
                h.send_header(k, v)
        if h.command != "HEAD":
            h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(data)

    def _forward(
        self, h: http.server.BaseHTTPRequestHandler, method: str, body: bytes,
        accept: str | None = None,
    ) -> tuple[int, bytes, list[tuple[str, str]]]:
        conn = http.client.HTTPConnection("127.0.0.1", self.target_port, timeout=60)
        try:
            headers = {k: v for k, v in h.headers.items() if k.lower() not in HOP_BY_HOP}
            headers["Content-Length"] = str(len(body))
            if accept:
                headers["Accept"] = accept
            conn.request(method, h.path, body=body or None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            out = [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP_BY_HOP]
            return resp.status, data, out
        finally:
            conn.close()

    def _record(self, name: str, body: bytes, media_type: str) -> str | None:
        try:
            manifest = json.loads(body)
            subject = manifest["subject"]["digest"]
        except (ValueError, KeyError, TypeError):
            return None
        entry: dict[str, object] = {
            "mediaType": media_type,
            "digest": "sha256:" + hashlib.sha256(body).hexdigest(),
            "size": len(body),
            "artifactType": manifest.get("artifactType") or manifest["config"]["mediaType"],
        }
        if manifest.get("annotations"):
            entry["annotations"] = manifest["annotations"]
        with self._lock:
            have = self.referrers.setdefault((name, subject), [])
            if entry not in have:
                have.append(entry)
        return str(subject)

    def _referrers(
        self, h: http.server.BaseHTTPRequestHandler, name: str, digest: str,
        query: dict[str, list[str]],
    ) -> None:
        with self._lock:
            self.api_calls += 1
            entries = list(self.referrers.get((name, digest), []))
        wanted = query.get("artifactType")
        if wanted:
            entries = [e for e in entries if e["artifactType"] in wanted]
        data = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries})
        h.send_response(200)
        h.send_header("Content-Type", OCI_INDEX)
        if wanted:
            h.send_header("OCI-Filters-Applied", "artifactType")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data.encode())
