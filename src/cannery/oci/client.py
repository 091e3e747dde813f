"""An OCI distribution client: manifests, blobs, tags; auth; retries. TLS is always verified.

- Auth as registries expect it: anonymous first; on a 401, follow ``WWW-Authenticate`` (a Bearer
  token service, or Basic) with credentials from :class:`~cannery.oci.auth.Credentials`. Tokens
  are cached per (host, scope); a write asks for ``pull,push``.
- Retries: HTTP 429/500/502/503/504 and dropped or timed-out connections are retried with
  exponential backoff and full jitter, never sooner than ``Retry-After`` (seconds), for at most
  ``retry_budget`` seconds per request. A blob upload that fails half-way starts a new upload
  session. Other 4xx answers are not retried; a connection refused by a host that never answered
  is not either (nothing is listening there).
- Plain HTTP only for a loopback registry (``localhost``, 127.0.0.0/8, ``::1``) whose port does
  not speak TLS at all, as Docker does; never after a certificate failure.
- Every manifest and blob read is checked against its digest, computed from the bytes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import re
import ssl
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import TypeVar

import httpx

from cannery.errors import NetworkError
from cannery.oci.auth import Credentials, basic, challenge
from cannery.oci.manifest import MANIFEST_TYPES, Descriptor, digest_of, matches
from cannery.oci.reference import Reference

log = logging.getLogger("cannery.oci")

RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_CHUNK = 1 << 20

T = TypeVar("T")
Body = bytes | Callable[[], Iterator[bytes]] | None


class NotFound(NetworkError):
    """The registry answered 404: no such manifest, blob or repository."""


class DigestMismatch(NetworkError):
    """Content did not hash to the digest the registry or the reference named."""


class AuthError(NetworkError):
    """The registry (or its token service) refused access."""


class _Transient(Exception):
    """A failure worth retrying; ``retry_after`` is the server's wish in seconds."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


def http_reason(exc: Exception) -> str:
    """One line for a transport failure, saying what to do about an untrusted certificate."""
    text = str(exc) or type(exc).__name__
    if _speaks_plain_http(exc):
        return "server speaks plain HTTP, not TLS (allowed only for localhost, 127.0.0.0/8, ::1)"
    if "CERTIFICATE_VERIFY_FAILED" in text:
        if "mismatch" in text or "not valid for" in text:
            return "TLS certificate is for another host name"
        return "TLS certificate not trusted (give its CA with --ca-cert or CANNERY_CA_CERT)"
    return text.splitlines()[0]


def _ssl_errors(exc: BaseException) -> Iterator[ssl.SSLError]:
    """The ssl errors behind a transport error (httpx and httpcore chain them as causes)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ssl.SSLError):
            yield cur
        cur = cur.__cause__


def _speaks_plain_http(exc: BaseException) -> bool:
    """The TLS handshake failed because the server answered in plain HTTP (not a cert error)."""
    plain = {"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "HTTP_REQUEST"}
    return any(
        getattr(e, "reason", None) in plain
        and not isinstance(e, ssl.SSLCertVerificationError)
        for e in _ssl_errors(exc)
    ) or any(word in str(exc) for word in ("WRONG_VERSION_NUMBER", "record layer failure"))


def _is_tls_failure(exc: BaseException) -> bool:
    return any(True for _ in _ssl_errors(exc)) or "CERTIFICATE_VERIFY_FAILED" in str(exc)


def retry_after(resp: httpx.Response) -> float | None:
    """``Retry-After`` in seconds (the HTTP-date form is ignored: backoff applies instead)."""
    value = resp.headers.get("retry-after", "").strip()
    if value.isdigit():
        return float(value)
    return None


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """Exponential backoff with full jitter: uniform in [0, min(cap, base·2^attempt)]."""
    return rng.uniform(0.0, min(cap, base * 2**attempt))


def _error_detail(resp: httpx.Response) -> str:
    """The first error code of a distribution-spec error body, if there is one."""
    try:
        errors = resp.json().get("errors") or []
        return f" ({errors[0]['code']})" if errors else ""
    except (ValueError, AttributeError, KeyError, TypeError, IndexError):
        return ""


class OCIClient:
    """One client per command run; not thread-safe (tokens and host state are cached)."""

    def __init__(
        self,
        verify: ssl.SSLContext,
        *,
        timeout: float = 30.0,
        retry_budget: float = 60.0,
        credentials: Credentials | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        backoff: float = 0.5,
        backoff_cap: float = 10.0,
    ) -> None:
        # The context is the caller's; refuse one that would skip the certificate or host check.
        if verify.verify_mode != ssl.CERT_REQUIRED or not verify.check_hostname:
            raise ValueError("OCIClient needs an SSL context that verifies certificates and names")
        self._http = httpx.Client(verify=verify, timeout=timeout, follow_redirects=True)
        self.retry_budget = retry_budget
        self._creds = credentials if credentials is not None else Credentials()
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._backoff = backoff
        self._backoff_cap = backoff_cap
        self._scheme: dict[str, str] = {}  # host -> "https" | "http", learnt on first answer
        self._tokens: dict[tuple[str, tuple[str, ...]], tuple[str, float]] = {}
        self._basic: dict[str, str] = {}

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> OCIClient:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def plain_http(self, host: str) -> bool:
        """True when this client fell back to plain HTTP for ``host`` (a loopback registry
        that does not speak TLS): other tools pulling from it must be told the same."""
        return self._scheme.get(host) == "http"

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
            raise NetworkError(f"{image}: no such tag in the registry") from None

    def head_manifest(self, ref: Reference) -> Descriptor | None:
        """The descriptor of ``ref`` (by tag or digest), or None when the registry has none."""
        what = str(ref)

        def attempt() -> httpx.Response:
            resp = self._once("HEAD", ref, f"manifests/{ref.reference}", _pull(ref), ACCEPT)
            return self._check(resp, what, {200})

        try:
            resp = self._retry(ref, what, attempt)
        except NotFound:
            return None
        digest = resp.headers.get("docker-content-digest")
        if ref.digest and digest and digest != ref.digest:
            raise DigestMismatch(f"{what}: registry names it {digest}")
        if not digest and not ref.digest:
            return self.get_manifest(ref)[1]
        media_type = resp.headers.get("content-type", "").partition(";")[0].strip()
        return Descriptor(media_type, digest or str(ref.digest), _length(resp))

    def get_manifest(self, ref: Reference) -> tuple[bytes, Descriptor]:
        """The manifest bytes, checked: their digest equals the registry's
        ``Docker-Content-Digest`` and the reference's digest, when given."""
        what = str(ref)

        def attempt() -> httpx.Response:
            resp = self._once("GET", ref, f"manifests/{ref.reference}", _pull(ref), ACCEPT)
            return self._check(resp, what, {200})

        resp = self._retry(ref, what, attempt)
        body = resp.content
        computed = digest_of(body)
        header = resp.headers.get("docker-content-digest")
        if header and not matches(body, header):
            raise DigestMismatch(
                f"{what}: registry digest {header} does not match content {computed}"
            )
        if ref.digest and not matches(body, ref.digest):
            raise DigestMismatch(f"{what}: content hashes to {computed}, not the digest asked for")
        media_type = resp.headers.get("content-type", "").partition(";")[0].strip()
        try:
            declared = json.loads(body).get("mediaType")
        except (ValueError, AttributeError):
            raise NetworkError(f"{what}: manifest is not a JSON object") from None
        if isinstance(declared, str) and declared:
            media_type = declared
        return body, Descriptor(media_type, ref.digest or computed, len(body))

    def put_manifest(self, ref: Reference, body: bytes, media_type: str) -> str:
        """PUT ``body`` under ``ref.digest`` if set, else ``ref.tag``; return its digest after
        checking the registry's ``Docker-Content-Digest`` names the same bytes."""
        digest = digest_of(body)
        if ref.digest and not matches(body, ref.digest):
            raise ValueError(f"{ref}: manifest bytes do not hash to the reference's digest")
        what = f"{ref} (manifest push)"
        headers = {"Content-Type": media_type}

        def attempt() -> httpx.Response:
            path = f"manifests/{ref.reference}"
            resp = self._once("PUT", ref, path, _push(ref), headers, body)
            return self._check(resp, what, {200, 201})

        resp = self._retry(ref, what, attempt)
        header = resp.headers.get("docker-content-digest")
        if header and header != digest:
            raise DigestMismatch(f"{what}: registry stored {header}, we sent {digest}")
        log.debug("pushed manifest %s as %s", digest, ref)
        return digest

    def blob_exists(self, ref: Reference, digest: str) -> bool:
        what = f"{ref.name}@{digest} (blob)"

        def attempt() -> httpx.Response:
            resp = self._once("HEAD", ref, f"blobs/{digest}", _pull(ref))
            return self._check(resp, what, {200})

        try:
            self._retry(ref, what, attempt)
        except NotFound:
            return False
        return True

    def get_blob(self, ref: Reference, digest: str) -> bytes:
        what = f"{ref.name}@{digest} (blob)"

        def attempt() -> httpx.Response:
            return self._check(self._once("GET", ref, f"blobs/{digest}", _pull(ref)), what, {200})

        data = self._retry(ref, what, attempt).content
        if not matches(data, digest):
            raise DigestMismatch(f"{what}: content hashes to {digest_of(data)}")
        return data

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

        def attempt() -> httpx.Response:
            return self._check(self._once("POST", ref, path, scopes), what, {201, 202})

        resp = self._retry(ref, what, attempt)
        if resp.status_code == 201:
            return True
        # Courtesy: the registry would expire the session anyway.
        with contextlib.suppress(httpx.HTTPError, NetworkError):
            self._once("DELETE", ref, self._location(ref, resp, what), _push(ref))
        return False

    def list_tags(self, ref: Reference) -> list[str]:
        """Every tag of the repository (following ``Link`` pagination); [] for an unknown one."""
        tags: list[str] = []
        target = "tags/list?n=1000"
        what = f"{ref.name} (tags)"
        for _ in range(1000):  # bounded: 10^6 tags

            def attempt(target: str = target) -> httpx.Response:
                return self._check(self._once("GET", ref, target, _pull(ref)), what, {200})

            try:
                resp = self._retry(ref, what, attempt)
            except NotFound:
                return tags
            try:
                tags += [str(t) for t in resp.json().get("tags") or []]
            except (ValueError, AttributeError, TypeError):
                raise NetworkError(f"{what}: malformed tag list") from None
            link = re.search(r'<([^>]+)>\s*;\s*rel="?next"?', resp.headers.get("link", ""))
            if not link:
                return tags
            target = urllib.parse.urljoin(self._base(ref), link.group(1))
        return tags

    # ------------------------------------------------------------------ requests, auth, retries

    def _base(self, ref: Reference) -> str:
        return f"{self._scheme.get(ref.host, 'https')}://{ref.host}"

    def _url(self, ref: Reference, target: str) -> str:
        if target.startswith(("https://", "http://")):
            return target
        return f"{self._base(ref)}/v2/{ref.repository}/{target}"

    def _location(self, ref: Reference, resp: httpx.Response, what: str) -> str:
        location = resp.headers.get("location")
        if not location:
            raise NetworkError(f"{what}: registry gave no upload location")
        return urllib.parse.urljoin(self._base(ref) + "/", str(location))

    def _check_exists(self, ref: Reference, digest: str) -> bool:
        resp = self._once("HEAD", ref, f"blobs/{digest}", _pull(ref))
        return self._check(resp, f"{ref.name}@{digest}", {200, 404}).status_code == 200

    def _retry(self, ref: Reference, what: str, attempt: Callable[[], T]) -> T:
        """Run ``attempt`` until it succeeds, retrying transient failures within the budget."""
        start = time.monotonic()
        slept = 0.0  # counted too, so a test's fake sleep still exhausts the budget
        tries = 0
        while True:
            try:
                return attempt()
            except _Transient as exc:
                reason, wait = exc.reason, exc.retry_after
            except httpx.TransportError as exc:
                reason, wait = http_reason(exc), None
                if not self._retryable(ref, exc):
                    raise NetworkError(f"{ref.host}: registry unreachable: {reason}") from None
            tries += 1
            jitter = backoff_delay(tries - 1, self._backoff, self._backoff_cap, self._rng)
            delay = max(wait or 0.0, jitter)
            spent = max(time.monotonic() - start, slept)
            if spent + delay > self.retry_budget:
                raise NetworkError(
                    f"{what}: {reason}; gave up after {tries} tries in {spent:.1f}s "
                    f"(retry budget {self.retry_budget:g}s)"
                )
            log.debug("%s: %s; retry %d in %.2fs", what, reason, tries, delay)
            self._sleep(delay)
            slept += delay

    def _retryable(self, ref: Reference, exc: httpx.TransportError) -> bool:
        if _is_tls_failure(exc):
            return False  # a certificate or protocol problem does not go away by asking again
        # Refused before the host ever answered: nothing is listening; fail fast.
        return not (isinstance(exc, httpx.ConnectError) and ref.host not in self._scheme)

    def _check(self, resp: httpx.Response, what: str, ok: set[int]) -> httpx.Response:
        status = resp.status_code
        if status in ok:
            return resp
        if status in RETRY_STATUS:
            raise _Transient(f"registry answered {status}", retry_after(resp))
        if status == 404:
            raise NotFound(f"{what}: not found in the registry{_error_detail(resp)}")
        if status in (401, 403):
            raise AuthError(
                f"{what}: registry refused access ({status}): add credentials to the Docker "
                "config file (`docker login`, DOCKER_CONFIG) or set CANNERY_REGISTRY_USER and "
                "CANNERY_REGISTRY_PASSWORD"
            )
        raise NetworkError(f"{what}: registry answered {status}{_error_detail(resp)}")

    def _once(
        self,
        method: str,
        ref: Reference,
        target: str,
        scopes: tuple[str, ...],
        headers: dict[str, str] | None = None,
        body: Body = None,
    ) -> httpx.Response:
        """One request, with the auth handshake (at most one challenge answered), no retry."""
        url = self._url(ref, target)
        # Credentials go only to the registry's own origin, never to a host a Location names.
        own = urllib.parse.urlsplit(url).netloc == ref.host
        sent = self._cached_auth(ref.host, scopes) if own else None
        resp = self._send(method, ref, url, headers, body, sent)
        if resp.status_code != 401 or not own:
            return resp
        auth, with_creds = self._authorize(ref, resp.headers.get("www-authenticate", ""), scopes)
        if auth is not None and auth != sent:
            url = self._url(ref, target)  # the first answer may have settled the scheme
            resp = self._send(method, ref, url, headers, body, auth)
        if resp.status_code == 401:
            self._forget(ref.host, scopes)
            if with_creds:
                raise AuthError(f"registry refused the credentials for {ref.host} (401)")
        return resp  # without credentials to offer, the caller reports the 401

    def _send(
        self,
        method: str,
        ref: Reference,
        url: str,
        headers: dict[str, str] | None,
        body: Body,
        auth: str | None,
    ) -> httpx.Response:
        hdrs = dict(headers or {})
        if auth:
            hdrs["Authorization"] = auth
        try:
            resp = self._http.request(method, url, headers=hdrs, content=_content(body))
        except httpx.TransportError as exc:
            # Like Docker: a registry on this machine may speak plain HTTP. Only a server that
            # does not speak TLS at all falls back; a certificate that fails to verify does not.
            first = ref.host not in self._scheme and url.startswith("https://")
            if not (first and ref.loopback and _speaks_plain_http(exc)):
                raise
            self._scheme[ref.host] = "http"  # it answered, in plain HTTP
            resp = None
        if resp is None:
            url = "http://" + url.removeprefix("https://")
            resp = self._http.request(method, url, headers=hdrs, content=_content(body))
        self._scheme.setdefault(ref.host, url.partition(":")[0])
        log.debug("%s %s -> %d", method, url, resp.status_code)
        return resp

    def _cached_auth(self, host: str, scopes: tuple[str, ...]) -> str | None:
        token = self._tokens.get((host, scopes))
        if token and token[1] > time.monotonic():
            return token[0]
        return self._basic.get(host)

    def _forget(self, host: str, scopes: tuple[str, ...]) -> None:
        self._tokens.pop((host, scopes), None)
        self._basic.pop(host, None)

    def _authorize(
        self, ref: Reference, header: str, scopes: tuple[str, ...]
    ) -> tuple[str | None, bool]:
        """Answer a 401 challenge: a Basic header, or a Bearer token from the token service.
        Also say whether credentials were used (to word a refusal)."""
        scheme, params = challenge(header)
        creds = self._creds.lookup(ref.host)
        if scheme == "basic":
            if creds is None:
                return None, False
            self._basic[ref.host] = basic(creds)
            return self._basic[ref.host], True
        if scheme != "bearer" or "realm" not in params:
            return None, False
        realm = params["realm"]
        realm_ref = Reference(urllib.parse.urlsplit(realm).netloc or ref.host, "token")
        if creds and not realm.startswith("https://") and not realm_ref.loopback:
            raise AuthError(
                f"{ref.host}: token service {realm} is not HTTPS; not sending credentials"
            )
        wanted = list(scopes)
        if params.get("scope") and params["scope"] not in wanted:
            wanted.append(params["scope"])
        query: dict[str, str | list[str]] = {"scope": wanted}
        if params.get("service"):
            query["service"] = params["service"]
        try:
            resp = self._http.get(
                realm, params=query, auth=httpx.BasicAuth(*creds) if creds else None
            )
        except httpx.TransportError as exc:
            raise _Transient(f"token service unreachable: {http_reason(exc)}") from None
        if resp.status_code in RETRY_STATUS:
            raise _Transient(f"token service answered {resp.status_code}", retry_after(resp))
        if resp.status_code in (401, 403) and creds:
            raise AuthError(
                f"registry refused the credentials for {ref.host} "
                f"(token service answered {resp.status_code})"
            )
        if resp.status_code != 200:
            raise AuthError(f"{ref.host}: token service refused ({resp.status_code})")
        try:
            data = resp.json()
            token = data.get("token") or data.get("access_token")
            expires = float(data.get("expires_in") or 60)
        except (ValueError, AttributeError, TypeError):
            token = None
        if not isinstance(token, str) or not token:
            raise AuthError(f"{ref.host}: token service sent a malformed answer (no token)")
        value = f"Bearer {token}"
        # Renew a little early; a token the registry still refuses is fetched again once.
        self._tokens[(ref.host, scopes)] = (value, time.monotonic() + max(expires - 5, 1))
        return value, creds is not None


ACCEPT = {"Accept": MANIFEST_TYPES}


def _pull(ref: Reference) -> tuple[str, ...]:
    return (f"repository:{ref.repository}:pull",)


def _push(ref: Reference) -> tuple[str, ...]:
    return (f"repository:{ref.repository}:pull,push",)


def _length(resp: httpx.Response) -> int:
    try:
        return int(resp.headers.get("content-length", "0"))
    except ValueError:
        return 0


def _content(body: Body) -> bytes | Iterator[bytes] | None:
    return body() if callable(body) else body


def _read_chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            yield chunk


def _with_query(url: str, **params: str) -> str:
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True) + list(params.items())
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))
