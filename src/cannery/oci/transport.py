"""The OCI client's transport: one session, TLS always verified, the auth handshake, redirects,
retries and bounded reads. :class:`~cannery.oci.client.OCIClient` builds the distribution API
(manifests, blobs, tags, referrers) on :class:`Transport`.

- Origins: a registry's origin is scheme, host and port. ``Authorization`` goes only to that
  origin; a ``Location`` (upload session, mount cancel), a tag-list ``Link`` or a redirect that
  names another origin is followed without it. Credentials go to a different origin only for
  the token realm the registry named, on the token request. Redirects are followed (GET and HEAD
  only, at most five) one hop at a time, each hop checked like the first.
- No downgrade: a URL on plain HTTP is refused (exit 2, naming it) when the registry speaks
  HTTPS, and anywhere for a host that is not loopback. Plain HTTP only for a loopback registry
  (``localhost``, 127.0.0.0/8, ``::1``) whose port does not speak TLS at all, as Docker does;
  never after a certificate failure.
- Bounded reads: every request asks for ``Accept-Encoding: identity`` and an answer in any other
  encoding is refused (a gzip bomb is never inflated). A manifest, index or tag-list page over
  4 MiB (the distribution spec's limit), a blob read into memory (an image config) over
  ``max_config`` bytes and a token answer over 1 MiB are refused; an error body is read up to
  64 KiB. :meth:`~cannery.oci.client.OCIClient.fetch_blob` streams a blob of any size to a file.
- Auth as registries expect it: anonymous first; on a 401, follow ``WWW-Authenticate`` (a Bearer
  token service, or Basic) with credentials from :class:`~cannery.oci.auth.Credentials`. Tokens
  are cached per (host, scope); a write asks for ``pull,push``.
- Retries: HTTP 429/500/502/503/504 and dropped or timed-out connections are retried with
  exponential backoff and full jitter, never sooner than ``Retry-After`` (seconds), for at most
  ``retry_budget`` seconds per request. A blob upload that fails half-way starts a new upload
  session. Other 4xx answers are not retried; a connection refused by a host that never answered
  is not either (nothing is listening there), nor is any refusal above.
"""

from __future__ import annotations

import contextlib
import logging
import random
import re
import ssl
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import httpx

from cannery.errors import NetworkError
from cannery.errors import NotFound as NotFound  # re-exported: where callers look for it
from cannery.oci.auth import Credentials, KeyedLocks, basic, challenge
from cannery.oci.manifest import load_json
from cannery.oci.reference import Reference
from cannery.util.bounded import read_http_body

log = logging.getLogger("cannery.oci")

RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
MANIFEST_CAP = 4 << 20  # the distribution spec's limit for a manifest a registry must accept
CONFIG_CAP = 8 << 20  # the default cap on a blob read into memory (an image config)
TOKEN_CAP = 1 << 20
ERROR_CAP = 64 << 10  # an error body past this is not read (only its first error code is used)
DRAIN_CAP = 4 << 10  # a redirect's body read only to keep its connection
MAX_REDIRECTS = 5
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_DEFAULT_PORT = {"https": 443, "http": 80}

T = TypeVar("T")
Body = bytes | Callable[[], Iterator[bytes]] | None


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


@dataclass(frozen=True)
class Answer:
    """A response whose body has been read within its cap (or streamed to a sink)."""

    status_code: int
    headers: httpx.Headers
    content: bytes
    url: str

    def json(self) -> object:
        return load_json(self.content)


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


def retry_after(resp: Answer | httpx.Response) -> float | None:
    """``Retry-After`` in seconds (the HTTP-date form is ignored: backoff applies instead)."""
    value = resp.headers.get("retry-after", "").strip()
    if value.isdigit():
        return float(value)
    return None


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """Exponential backoff with full jitter: uniform in [0, min(cap, base·2^attempt)]."""
    return rng.uniform(0.0, min(cap, base * 2**attempt))


def _error_detail(resp: Answer) -> str:
    """The first error code of a distribution-spec error body, if there is one."""
    try:
        errors = resp.json().get("errors") or []  # type: ignore[attr-defined]
        code = str(errors[0]["code"]) if errors else ""
    except (ValueError, AttributeError, KeyError, TypeError, IndexError):
        return ""
    return f" ({code[:60]})" if re.fullmatch(r"[A-Z0-9_]+", code) else ""


def origin(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of ``url``, the default port filled in: two URLs are one origin
    when these are equal."""
    u = httpx.URL(url)
    return u.scheme, u.host.lower(), u.port or _DEFAULT_PORT.get(u.scheme, 0)


def shown(url: str) -> str:
    """``url`` for a message: without its query (a signed URL carries credentials there) and
    without a ``user:password@`` (a ``Location`` may carry one)."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query="", fragment=""))


def _loopback(url: str) -> bool:
    return Reference(httpx.URL(url).netloc.decode() or "-", "probe").loopback




class Transport:
    """One client per command run. Requests (reads, blob uploads) may run side by side (httpx's
    pool is thread-safe). Threads that meet the same Bearer challenge (host and scopes) take
    turns at the token service: the first asks, the others take its token, so one token
    request per scope is in flight. The scheme cache is a plain dict write: a race on a
    host's first answer costs a handshake more per thread, at most."""

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
        max_config: int = CONFIG_CAP,
    ) -> None:
        """``max_config``: the largest blob :meth:`get_blob` reads into memory."""
        # The context is the caller's; refuse one that would skip the certificate or host check.
        if verify.verify_mode != ssl.CERT_REQUIRED or not verify.check_hostname:
            raise ValueError("OCIClient needs an SSL context that verifies certificates and names")
        # Redirects are followed by _send, one checked hop at a time.
        self._http = httpx.Client(verify=verify, timeout=timeout, follow_redirects=False)
        self.retry_budget = retry_budget
        self.max_config = max_config
        self._creds = credentials if credentials is not None else Credentials()
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._backoff = backoff
        self._backoff_cap = backoff_cap
        self._scheme: dict[str, str] = {}  # host -> "https" | "http", learnt on first answer
        self._tokens: dict[tuple[str, tuple[str, ...]], tuple[str, float]] = {}
        self._token_turns = KeyedLocks()  # one token request per (host, scopes) at a time
        self._basic: dict[str, str] = {}

    @property
    def credentials(self) -> Credentials:
        """Where this client's logins come from (for a child that needs the same ones)."""
        return self._creds

    def close(self) -> None:
        self._http.close()

    def plain_http(self, host: str) -> bool:
        """True when this client fell back to plain HTTP for ``host`` (a loopback registry
        that does not speak TLS): other tools pulling from it must be told the same."""
        return self._scheme.get(host) == "http"


    # ------------------------------------------------------------------ requests, auth, retries

    def _base(self, ref: Reference) -> str:
        return f"{self._scheme.get(ref.host, 'https')}://{ref.host}"

    def _url(self, ref: Reference, target: str) -> str:
        if target.startswith(("https://", "http://")):
            return target
        return f"{self._base(ref)}/v2/{ref.repository}/{target}"

    def _location(self, ref: Reference, resp: Answer, what: str) -> str:
        location = resp.headers.get("location")
        if not location:
            raise NetworkError(f"{what}: registry gave no upload location")
        return urllib.parse.urljoin(resp.url, str(location))

    def _allowed(self, ref: Reference, url: str) -> None:
        """Refuse a URL the registry named (Location, Link, redirect, token realm) that would
        leave TLS: plain HTTP when the registry speaks HTTPS, or plain HTTP to a host that is
        not loopback. Not retried: asking again gets the same answer."""
        scheme = urllib.parse.urlsplit(url).scheme.lower()
        if scheme == "https":
            return
        if scheme != "http":
            raise NetworkError(f"{ref.host}: registry named {shown(url)}: not an HTTP(S) URL")
        if self._scheme.get(ref.host, "https") == "https":
            raise NetworkError(
                f"{ref.host}: refusing {shown(url)}: a downgrade from HTTPS to plain HTTP"
            )
        if not _loopback(url):
            raise NetworkError(
                f"{ref.host}: refusing {shown(url)}: plain HTTP to a host that is not loopback"
            )

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

    def _check(self, resp: Answer, what: str, ok: set[int]) -> Answer:
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
        *,
        cap: int = ERROR_CAP,
        sink: Callable[[bytes], None] | None = None,
    ) -> Answer:
        """One request, with the auth handshake (at most one challenge answered), no retry.
        ``cap``: the largest successful body read; ``sink`` takes a successful body instead."""
        url = self._url(ref, target)
        sent = self._cached_auth(ref.host, scopes)  # _send decides which hops carry it
        resp = self._send(method, ref, url, headers, body, sent, cap, sink)
        if resp.status_code != 401 or origin(resp.url) != origin(self._base(ref)):
            return resp  # another origin's 401 is not the registry's challenge
        auth, with_creds = self._authorize(
            ref, resp.headers.get("www-authenticate", ""), scopes, sent
        )
        if auth is not None and auth != sent:
            url = self._url(ref, target)  # the first answer may have settled the scheme
            resp = self._send(method, ref, url, headers, body, auth, cap, sink)
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
        cap: int,
        sink: Callable[[bytes], None] | None,
    ) -> Answer:
        """One request and the redirects of a GET or HEAD, each hop checked by
        :meth:`_allowed`; ``auth`` goes only to hops on the registry's own origin."""
        for _ in range(MAX_REDIRECTS + 1):
            self._allowed(ref, url)
            hdrs = {"Accept-Encoding": "identity", **(headers or {})}
            if auth and origin(url) == origin(self._base(ref)):
                hdrs["Authorization"] = auth
            resp = self._request(method, ref, url, hdrs, body)
            try:
                location = resp.headers.get("location")
                if resp.status_code in _REDIRECTS and location and method in ("GET", "HEAD"):
                    _drain(resp, method)
                    url = urllib.parse.urljoin(str(resp.url), location)
                    log.debug("%s %s -> %d", method, shown(str(resp.url)), resp.status_code)
                    continue
                ok = 200 <= resp.status_code < 300
                if method == "HEAD":
                    # Read its (empty) body: an answer closed unread closes its connection
                    # too, and the next request pays a new TCP and TLS handshake.
                    resp.read()
                    data = b""
                else:
                    data = _read(resp, cap if ok else ERROR_CAP, sink if ok else None, ok)
                log.debug("%s %s -> %d", method, shown(str(resp.url)), resp.status_code)
                return Answer(resp.status_code, resp.headers, data, str(resp.url))
            finally:
                resp.close()
        raise NetworkError(f"{ref.host}: more than {MAX_REDIRECTS} redirects from {shown(url)}")

    def _request(
        self, method: str, ref: Reference, url: str, headers: dict[str, str], body: Body
    ) -> httpx.Response:
        """Send, streaming the answer; the loopback plain-HTTP fallback happens here."""
        try:
            req = self._http.build_request(method, url, headers=headers, content=_content(body))
            resp = self._http.send(req, stream=True)
        except httpx.TransportError as exc:
            # Like Docker: a registry on this machine may speak plain HTTP. Only a server that
            # does not speak TLS at all falls back; a certificate that fails to verify does not.
            first = ref.host not in self._scheme and url.startswith("https://")
            if not (first and ref.loopback and _speaks_plain_http(exc)):
                raise
            self._scheme[ref.host] = "http"  # it answered, in plain HTTP
            url = "http://" + url.removeprefix("https://")
            req = self._http.build_request(method, url, headers=headers, content=_content(body))
            resp = self._http.send(req, stream=True)
        self._scheme.setdefault(ref.host, url.partition(":")[0])
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
        self, ref: Reference, header: str, scopes: tuple[str, ...], sent: str | None
    ) -> tuple[str | None, bool]:
        """Answer a 401 challenge: a Basic header, or a Bearer token from the token service.
        Also say whether credentials were used (to word a refusal). ``sent``: the Authorization
        the refused request carried; a cached token other than it was fetched by another
        thread while this one waited its turn, and is taken instead of asking again."""
        scheme, params = challenge(header)
        creds = self._creds.lookup(ref.host)
        if scheme == "basic":
            if creds is None:
                return None, False
            self._basic[ref.host] = basic(creds)
            return self._basic[ref.host], True
        if scheme != "bearer" or "realm" not in params:
            return None, False
        with self._token_turns.hold((ref.host, scopes)):
            cached = self._tokens.get((ref.host, scopes))
            if cached and cached[1] > time.monotonic() and cached[0] != sent:
                return cached[0], creds is not None
            return self._token(ref, params, scopes, creds), creds is not None

    def _token(
        self,
        ref: Reference,
        params: dict[str, str],
        scopes: tuple[str, ...],
        creds: tuple[str, str] | None,
    ) -> str:
        """Ask the token service the challenge named for a token for ``scopes``; cache it."""
        realm = params["realm"]
        if urllib.parse.urlsplit(realm).scheme == "http" and creds and not _loopback(realm):
            raise AuthError(
                f"{ref.host}: token service {shown(realm)} is not HTTPS; not sending credentials"
            )
        self._allowed(ref, realm)
        wanted = list(scopes)
        if params.get("scope") and params["scope"] not in wanted:
            wanted.append(params["scope"])
        query: dict[str, str | list[str]] = {"scope": wanted}
        if params.get("service"):
            query["service"] = params["service"]
        # The one request credentials go to off the registry's origin: the realm it named.
        # Not redirected (a redirect is a refusal here), its answer read within TOKEN_CAP.
        headers = {"Accept-Encoding": "identity"}
        if creds:
            headers["Authorization"] = basic(creds)
        try:
            req = self._http.build_request("GET", realm, params=query, headers=headers)
            resp = self._http.send(req, stream=True)
            try:
                ok = resp.status_code == 200
                data = _read(resp, TOKEN_CAP if ok else ERROR_CAP, None, ok)
            finally:
                resp.close()
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
            answer = load_json(data)
            token = answer.get("token") or answer.get("access_token")
            expires = float(answer.get("expires_in") or 60)
        except (ValueError, AttributeError, TypeError):
            token = None
        if not isinstance(token, str) or not token:
            raise AuthError(f"{ref.host}: token service sent a malformed answer (no token)")
        value = f"Bearer {token}"
        # Renew a little early; a token the registry still refuses is fetched again once.
        self._tokens[(ref.host, scopes)] = (value, time.monotonic() + max(expires - 5, 1))
        return value

    # ------------------------------------------------------------------ OCI 1.1 referrers
    # Primitives for cannery.oci.referrers (which owns the referrers logic): the API's GET,
    # and a manifest GET/PUT that expose ETag / If-Match and the OCI-Subject answer.


def _read(
    resp: httpx.Response,
    cap: int,
    sink: Callable[[bytes], None] | None,
    strict: bool,
) -> bytes:
    """The body as sent, at most ``cap`` bytes (``strict``: a larger one is refused; else it
    is cut): :func:`cannery.util.bounded.read_http_body`, named by the URL it came from."""
    return read_http_body(resp, limit=cap, what=shown(str(resp.url)), sink=sink, strict=strict)


def _drain(resp: httpx.Response, method: str) -> None:
    """Read the body of an answer that is not used (a redirect's) when it says it is small, so
    its connection goes back to the pool: one closed unread is dropped, and a registry that
    sends every blob to a CDN would cost a new TCP and TLS handshake per blob. A body with no
    ``Content-Length`` or one over ``DRAIN_CAP`` is not waited for (its connection is dropped,
    as before); one that does not arrive costs the read timeout, as any answer's body does.
    A HEAD's answer has no body, whatever its ``Content-Length`` says: its end is read."""
    if method == "HEAD":
        with contextlib.suppress(httpx.HTTPError):
            resp.read()
        return
    length = resp.headers.get("content-length", "").strip()
    if not length.isdigit() or int(length) > DRAIN_CAP:
        return
    with contextlib.suppress(httpx.HTTPError, NetworkError):
        read_http_body(resp, limit=DRAIN_CAP, what=shown(str(resp.url)), strict=True)


def _content(body: Body) -> bytes | Iterator[bytes] | None:
    return body() if callable(body) else body
