"""An OCI distribution client: manifests, blobs, tags, referrers and resolve, on the transport
of :mod:`cannery.oci.transport` (sessions, TLS, auth, redirects, retries, bounded reads; its
docstring says how each behaves). TLS is always verified.

- Every manifest and blob read is checked against its digest, computed from the bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import TracebackType

import httpx

from cannery.errors import NetworkError
from cannery.errors import NotFound as NotFound  # re-exported: where callers look for it
from cannery.oci.manifest import (
    MANIFEST_TYPES,
    Descriptor,
    MalformedManifest,
    digest_of,
    load_json,
    matches,
    parse_config,
    parse_manifest,
)
from cannery.oci.reference import Reference, valid_digest
from cannery.oci.transport import CONFIG_CAP as CONFIG_CAP
from cannery.oci.transport import ERROR_CAP as ERROR_CAP
from cannery.oci.transport import MANIFEST_CAP as MANIFEST_CAP
from cannery.oci.transport import MAX_REDIRECTS as MAX_REDIRECTS
from cannery.oci.transport import RETRY_STATUS as RETRY_STATUS
from cannery.oci.transport import TOKEN_CAP as TOKEN_CAP
from cannery.oci.transport import Answer as Answer
from cannery.oci.transport import AuthError as AuthError
from cannery.oci.transport import Body, Transport
from cannery.oci.transport import DigestMismatch as DigestMismatch
from cannery.oci.transport import backoff_delay as backoff_delay
from cannery.oci.transport import http_reason as http_reason
from cannery.oci.transport import origin as origin
from cannery.oci.transport import retry_after as retry_after
from cannery.oci.transport import shown as shown
from cannery.util.bounded import CHUNK as _CHUNK

log = logging.getLogger("cannery.oci")


def malformed(ref: Reference, exc: Exception) -> NetworkError:
    """The one wording for a registry answer that lacks a field or has one of the wrong type
    (``exc`` is a :class:`~cannery.oci.manifest.MalformedManifest` naming the field)."""
    return NetworkError(f"{ref.host}: malformed answer: {exc}")


class OCIClient(Transport):
    """One client per command run: the distribution API on :class:`Transport` (which says how
    requests, and the threads that make them, share its session and tokens)."""

    def __enter__(self) -> OCIClient:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ the public API

    def resolve(self, image: str) -> str:
        """``host/repo:tag`` → ``sha256:…`` of the manifest (or index) the tag points to now."""
        try:
            ref = Reference.parse(image)
        except ValueError as exc:
            raise NetworkError(str(exc)) from None
        if ref.digest:
            raise NetworkError(f"{image}: already a digest reference")
        try:
            return self.get_manifest(ref)[1].digest
        except NotFound:
            raise NotFound(f"{image}: no such tag in the registry") from None

    def head_manifest(self, ref: Reference) -> Descriptor | None:
        """The descriptor of ``ref`` (by tag or digest), or None when the registry has none.
        When the HEAD answer lacks the digest, the size (``Content-Length``) or the media
        type, the manifest is fetched instead: a size is never guessed."""
        what = str(ref)

        def attempt() -> Answer:
            resp = self._once("HEAD", ref, f"manifests/{ref.reference}", _pull(ref), ACCEPT)
            return self._check(resp, what, {200})

        try:
            resp = self._retry(ref, what, attempt)
        except NotFound:
            return None
        digest = resp.headers.get("docker-content-digest")
        if digest is not None and not valid_digest(digest):
            raise NetworkError(f"{ref.host}: malformed answer: {what} Docker-Content-Digest is "
                               "not a valid digest")
        if ref.digest and digest and digest != ref.digest:
            raise DigestMismatch(f"{what}: registry names it {digest}")
        media_type = resp.headers.get("content-type", "").partition(";")[0].strip()
        size = _length(resp)
        if size is None or not media_type or not (digest or ref.digest):
            return self.get_manifest(ref)[1]
        return Descriptor(media_type, digest or str(ref.digest), size)

    def get_manifest(self, ref: Reference) -> tuple[bytes, Descriptor]:
        """The manifest bytes (at most 4 MiB), checked: their digest equals the registry's
        ``Docker-Content-Digest`` and the reference's digest, when given."""
        what = str(ref)

        def attempt() -> Answer:
            path = f"manifests/{ref.reference}"
            resp = self._once("GET", ref, path, _pull(ref), ACCEPT, cap=MANIFEST_CAP)
            return self._check(resp, what, {200})

        resp = self._retry(ref, what, attempt)
        body = resp.content
        computed = digest_of(body)
        header = resp.headers.get("docker-content-digest")
        if header and not matches(body, header):
            raise DigestMismatch(
                f"{what}: registry digest {header[:80]} does not match content {computed}"
            )
        if ref.digest and not matches(body, ref.digest):
            raise DigestMismatch(f"{what}: content hashes to {computed}, not the digest asked for")
        media_type = resp.headers.get("content-type", "").partition(";")[0].strip()
        try:
            data = load_json(body)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise NetworkError(f"{ref.host}: malformed answer: {what} manifest is not a JSON "
                               "object")
        declared = data.get("mediaType")
        if declared is not None and not isinstance(declared, str):
            raise NetworkError(f"{ref.host}: malformed answer: {what} mediaType is not a string")
        if declared:
            media_type = declared
        return body, Descriptor(media_type, ref.digest or computed, len(body))

    def image_config(self, ref: Reference) -> tuple[Descriptor, dict[str, object]]:
        """A platform manifest (``ref`` by digest) and its image config, both read strictly:
        the descriptor has the digest of the bytes, their size, the media type, and the
        platform the config names. A field missing or of the wrong type is a NetworkError
        naming the registry and the field."""
        body, desc = self.get_manifest(ref)
        try:
            config, _ = parse_manifest(body, str(ref))
            data = self.get_blob(ref, config.digest)
            cfg, platform = parse_config(data, f"{ref.name}@{config.digest} (config)")
        except MalformedManifest as exc:
            raise malformed(ref, exc) from None
        return replace(desc, platform=platform), cfg

    def put_manifest(self, ref: Reference, body: bytes, media_type: str) -> str:
        """PUT ``body`` under ``ref.digest`` if set, else ``ref.tag``; return its digest after
        checking the registry's ``Docker-Content-Digest`` names the same bytes."""
        digest = digest_of(body)
        if ref.digest and not matches(body, ref.digest):
            raise ValueError(f"{ref}: manifest bytes do not hash to the reference's digest")
        what = f"{ref} (manifest push)"
        headers = {"Content-Type": media_type}

        def attempt() -> Answer:
            path = f"manifests/{ref.reference}"
            resp = self._once("PUT", ref, path, _push(ref), headers, body)
            return self._check(resp, what, {200, 201})

        resp = self._retry(ref, what, attempt)
        header = resp.headers.get("docker-content-digest")
        if header and header != digest:
            raise DigestMismatch(f"{what}: registry stored {header[:80]}, we sent {digest}")
        log.debug("pushed manifest %s as %s", digest, ref)
        return digest

    def blob_exists(self, ref: Reference, digest: str) -> bool:
        what = f"{ref.name}@{digest} (blob)"

        def attempt() -> Answer:
            resp = self._once("HEAD", ref, f"blobs/{digest}", _pull(ref))
            return self._check(resp, what, {200})

        try:
            self._retry(ref, what, attempt)
        except NotFound:
            return False
        return True

    def get_blob(self, ref: Reference, digest: str) -> bytes:
        """A small blob (an image config) read into memory, at most ``max_config`` bytes, and
        checked against its digest. Layers go through :meth:`fetch_blob`."""
        what = f"{ref.name}@{digest} (blob)"

        def attempt() -> Answer:
            resp = self._once("GET", ref, f"blobs/{digest}", _pull(ref), cap=self.max_config)
            return self._check(resp, what, {200})

        data = self._retry(ref, what, attempt).content
        if not matches(data, digest):
            raise DigestMismatch(f"{what}: content hashes to {digest_of(data)}")
        return data

    def fetch_blob(self, ref: Reference, digest: str, dest: Path, size: int | None = None) -> int:
        """Stream a blob to ``dest`` and return its size. The bytes are hashed as they arrive
        and land at ``dest`` (an atomic rename) only when they match ``digest``; with ``size``,
        an answer of any other length is refused. Never holds the blob in memory."""
        what = f"{ref.name}@{digest} (blob)"
        if not valid_digest(digest):
            raise NetworkError(f"{ref.host}: malformed answer: invalid blob digest {digest[:80]!r}")
        partial = dest.with_name(f".{dest.name}.partial")
        cap = size if size is not None else 1 << 62

        def attempt() -> int:
            hasher = hashlib.new(digest.partition(":")[0])
            with partial.open("wb") as fh:

                def sink(chunk: bytes) -> None:
                    hasher.update(chunk)
                    fh.write(chunk)

                resp = self._once("GET", ref, f"blobs/{digest}", _pull(ref), cap=cap, sink=sink)
                self._check(resp, what, {200})
                got = fh.tell()
            if size is not None and got != size:
                raise NetworkError(f"{what}: registry sent {got} bytes, the descriptor says {size}")
            if f"{digest.partition(':')[0]}:{hasher.hexdigest()}" != digest:
                raise DigestMismatch(f"{what}: content hashes to another digest")
            return got

        try:
            got = self._retry(ref, what, attempt)
            os.replace(partial, dest)
        finally:
            partial.unlink(missing_ok=True)
        return got

    def push_blob(self, ref: Reference, path_or_bytes: Path | bytes, digest: str) -> None:
        """Upload a blob unless the repository has it: one POST, then one PUT with the whole
        body (streamed from a file). A failed attempt starts over with a new upload session."""
        if self.blob_exists(ref, digest):
            return
        what = f"{ref.name}@{digest} (blob upload)"
        src = path_or_bytes
        size = len(src) if isinstance(src, bytes) else src.stat().st_size
        body: Body = src if isinstance(src, bytes) else (lambda: _read_chunks(src))
        tries = 0

        def attempt() -> None:
            nonlocal tries
            tries += 1
            # A lost answer to an earlier PUT may hide a finished upload.
            if tries > 1 and self._check_exists(ref, digest):
                return
            start = self._once("POST", ref, "blobs/uploads/", _push(ref))
            self._check(start, what, {202})
            url = _with_query(self._location(ref, start, what), digest=digest)
            headers = {"Content-Type": "application/octet-stream", "Content-Length": str(size)}
            put = self._once("PUT", ref, url, _push(ref), headers, body)
            self._check(put, what, {201})

        self._retry(ref, what, attempt)
        log.debug("pushed blob %s to %s", digest, ref.name)

    def mount_blob(self, ref: Reference, digest: str, from_repository: str) -> bool:
        """Ask the registry to link a blob from another repository on the same host. False
        when it started an ordinary upload instead (that session is cancelled)."""
        what = f"{ref.name}@{digest} (mount from {from_repository})"
        query = urllib.parse.urlencode({"mount": digest, "from": from_repository})
        path = f"blobs/uploads/?{query}"
        scopes = (*_push(ref), f"repository:{from_repository}:pull")

        def attempt() -> Answer:
            return self._check(self._once("POST", ref, path, scopes), what, {201, 202})

        resp = self._retry(ref, what, attempt)
        if resp.status_code == 201:
            return True
        # Courtesy: the registry would expire the session anyway. Its URL is checked first
        # (a downgrade is refused, not silently skipped); only the cancel's failure is ignored.
        cancel = self._location(ref, resp, what)
        self._allowed(ref, cancel)
        with contextlib.suppress(httpx.HTTPError, NetworkError):
            self._once("DELETE", ref, cancel, _push(ref))
        return False

    def list_tags(self, ref: Reference) -> list[str]:
        """Every tag of the repository (following ``Link`` pagination, each page at most
        4 MiB); [] for an unknown one."""
        tags: list[str] = []
        target = "tags/list?n=1000"
        what = f"{ref.name} (tags)"
        for _ in range(1000):  # bounded: 10^6 tags

            def attempt(target: str = target) -> Answer:
                resp = self._once("GET", ref, target, _pull(ref), cap=MANIFEST_CAP)
                return self._check(resp, what, {200})

            try:
                resp = self._retry(ref, what, attempt)
            except NotFound:
                return tags
            try:
                page = resp.json()
            except ValueError:
                page = None
            found = page.get("tags") if isinstance(page, dict) else None
            if found is not None and not (
                isinstance(found, list) and all(isinstance(t, str) for t in found)
            ):
                raise NetworkError(f"{ref.host}: malformed answer: {what} tags is not a list of "
                                   "strings")
            if not isinstance(page, dict):
                raise NetworkError(f"{ref.host}: malformed answer: {what} is not a JSON object")
            tags += found or []
            link = re.search(r'<([^>]+)>\s*;\s*rel="?next"?', resp.headers.get("link", ""))
            if not link:
                return tags
            target = urllib.parse.urljoin(resp.url, link.group(1))
        return tags

    # ------------------------------------------------------------------ requests, auth, retries

    def _check_exists(self, ref: Reference, digest: str) -> bool:
        resp = self._once("HEAD", ref, f"blobs/{digest}", _pull(ref))
        return self._check(resp, f"{ref.name}@{digest}", {200, 404}).status_code == 200


    def get_referrers(self, ref: Reference, digest: str) -> bytes | None:
        """The referrers API's image index for ``digest`` (``GET /v2/<name>/referrers/<digest>``),
        or None when the registry has no such API: it answers 404 as the spec says (or, as some
        registries do for a route they lack, 400, 405 or 501)."""
        what = f"{ref.name}@{digest} (referrers)"

        def attempt() -> Answer:
            resp = self._once("GET", ref, f"referrers/{digest}", _pull(ref), cap=MANIFEST_CAP)
            return self._check(resp, what, {200, 400, 405, 501})

        try:
            resp = self._retry(ref, what, attempt)
        except NotFound:
            return None
        return resp.content if resp.status_code == 200 else None

    def get_manifest_etag(self, ref: Reference) -> tuple[bytes, Descriptor, str | None] | None:
        """Like :meth:`get_manifest`, plus the ``ETag`` the registry gave; None on 404."""
        what = str(ref)

        def attempt() -> Answer:
            resp = self._once("HEAD", ref, f"manifests/{ref.reference}", _pull(ref), ACCEPT)
            return self._check(resp, what, {200})

        for _ in range(5):
            try:
                body, desc = self.get_manifest(ref)
                # The digest check ran on these bytes; a HEAD gives their ETag cheaply.
                head = self._retry(ref, what, attempt)
            except NotFound:
                return None
            if head.headers.get("docker-content-digest", desc.digest) == desc.digest:
                return body, desc, head.headers.get("etag")
            # The tag moved between the two requests: read again.
        raise NetworkError(f"{what}: the tag kept moving while it was read")

    def put_manifest_if(
        self,
        ref: Reference,
        body: bytes,
        media_type: str,
        if_match: str | None = None,
        create_only: bool = False,
    ) -> tuple[bool, str | None]:
        """PUT a manifest (as :meth:`put_manifest`), with ``If-Match`` when given (or
        ``If-None-Match: *`` with ``create_only``). Returns (stored, the ``OCI-Subject``
        header): stored is False when the registry answered 412 (the tag changed since it was
        read)."""
        digest = digest_of(body)
        what = f"{ref} (manifest push)"
        headers = {"Content-Type": media_type}
        if if_match:
            headers["If-Match"] = if_match
        elif create_only:
            headers["If-None-Match"] = "*"

        def attempt() -> Answer:
            path = f"manifests/{ref.reference}"
            resp = self._once("PUT", ref, path, _push(ref), headers, body)
            return self._check(resp, what, {200, 201, 412})

        resp = self._retry(ref, what, attempt)
        if resp.status_code == 412:
            return False, None
        header = resp.headers.get("docker-content-digest")
        if header and header != digest:
            raise DigestMismatch(f"{what}: registry stored {header[:80]}, we sent {digest}")
        return True, resp.headers.get("oci-subject")


ACCEPT = {"Accept": MANIFEST_TYPES}


def _pull(ref: Reference) -> tuple[str, ...]:
    return (f"repository:{ref.repository}:pull",)


def _push(ref: Reference) -> tuple[str, ...]:
    return (f"repository:{ref.repository}:pull,push",)


def _length(resp: Answer) -> int | None:
    """``Content-Length``, or None when it is missing or not a number."""
    value = resp.headers.get("content-length", "").strip()
    return int(value) if value.isdigit() else None


def _read_chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            yield chunk


def _with_query(url: str, **params: str) -> str:
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True) + list(params.items())
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))
