"""Credentials stay on their origin, over TLS (issue 13, item 1), against the hostile registry
(tests/services/hostile.py): every request it saw is checked for where ``Authorization`` went.

Each refusal is a NetworkError (exit status 2) whose message is one line naming the URL.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from cannery.errors import NetworkError
from cannery.oci import AuthError, Credentials, OCIClient, Reference
from cannery.tls import ssl_context
from tests.services.hostile import HostileRegistry, loopback_aliases
from tests.services.tlsca import LocalCA

pytestmark = pytest.mark.e2e

USER, PASSWORD = "pusher", "s3cret-Orig1n-pw"
DATA = b"a blob that goes through a hostile registry"
DIGEST = "sha256:" + hashlib.sha256(DATA).hexdigest()


def _alias() -> str:
    names = loopback_aliases()
    if not names:
        pytest.skip("/etc/hosts names 127.0.0.1 only as localhost")
    return names[0]


def _client(tmp_path: Path, ca: LocalCA) -> OCIClient:
    env = {"CANNERY_REGISTRY_USER": USER, "CANNERY_REGISTRY_PASSWORD": PASSWORD}
    return OCIClient(ssl_context(ca.ca_cert), retry_budget=2, backoff=0.01,
                     credentials=Credentials(env, tmp_path))


@pytest.fixture
def tls(tmp_path: Path, test_ca: LocalCA) -> Iterator[HostileRegistry]:
    reg = HostileRegistry(tmp_path / "tls", test_ca, auth="basic", credentials=(USER, PASSWORD))
    yield reg
    reg.stop()


@pytest.fixture
def plain(tmp_path: Path) -> Iterator[HostileRegistry]:
    reg = HostileRegistry(tmp_path / "plain", auth="basic", credentials=(USER, PASSWORD))
    yield reg
    reg.stop()


def _refused(exc: pytest.ExceptionInfo[NetworkError], url_start: str) -> str:
    msg = str(exc.value)
    assert exc.value.exit_code == 2 and "\n" not in msg
    assert url_start in msg and "?" not in msg, msg  # the URL, without its query
    return msg


def _plain_http(reg: HostileRegistry) -> list[str]:
    return [s.url for s in reg.seen if s.url.startswith("http://")]


def test_upload_location_downgraded_to_http_is_refused(tmp_path, tls, test_ca) -> None:  # type: ignore[no-untyped-def]
    """An https registry's upload Location on http:// of the same host and port (a proxy that
    answers both): refused before any plain-HTTP request; nothing stored."""
    repo = Reference.parse(f"{tls.host}/team/app:t")
    tls.fault("downgrade", "POST", "/blobs/uploads/$")
    with _client(tmp_path, test_ca) as c, pytest.raises(NetworkError) as exc:
        c.push_blob(repo, DATA, DIGEST)
    msg = _refused(exc, f"http://{tls.host}/v2/team/app/blobs/uploads/")
    assert "downgrade from HTTPS to plain HTTP" in msg
    assert _plain_http(tls) == [] and DIGEST not in tls.blobs()
    assert all(s.url.startswith("https://") for s in tls.authorized())


def test_tag_list_link_downgraded_or_elsewhere(tmp_path, tls, test_ca) -> None:  # type: ignore[no-untyped-def]
    """Tag-list pagination: a ``Link`` on http:// is refused; a ``Link`` on another origin is
    followed without credentials."""
    for n in range(3):
        tls.store_image("team/app", "amd64", str(n), tag=f"v{n}")
    tls.page_size = 1
    repo = Reference.parse(f"{tls.host}/team/app:t")
    tls.fault("downgrade", "GET", "/tags/list")
    with _client(tmp_path, test_ca) as c, pytest.raises(NetworkError) as exc:
        c.list_tags(repo)
    _refused(exc, f"http://{tls.host}/v2/team/app/tags/list")
    assert _plain_http(tls) == []

    other = f"{_alias()}:{tls.port}"
    tls.fault("rehost", "GET", "/tags/list", arg=other, times=0)
    tls.seen.clear()
    with _client(tmp_path, test_ca) as c:
        assert c.list_tags(repo) == ["v0", "v1", "v2"]
    elsewhere = [s for s in tls.seen if other in s.url]
    assert len(elsewhere) == 2 and not any("authorization" in s.headers for s in elsewhere)


def test_mount_cancel_location_downgraded_is_refused(tmp_path, tls, test_ca) -> None:  # type: ignore[no-untyped-def]
    """A mount the registry turns into an upload: the session it names for the cancel is on
    http:// — refused (exit 2), not quietly skipped; no DELETE reaches plain HTTP."""
    repo = Reference.parse(f"{tls.host}/team/app:t")
    tls.fault("downgrade", "POST", "mount=")
    with _client(tmp_path, test_ca) as c, pytest.raises(NetworkError) as exc:
        c.mount_blob(repo, DIGEST, "team/other")
    _refused(exc, f"http://{tls.host}/v2/team/app/blobs/uploads/")
    assert _plain_http(tls) == []
    assert [s.method for s in tls.seen if s.method == "DELETE"] == []


def test_redirect_to_http_is_refused(tmp_path, tls, test_ca) -> None:  # type: ignore[no-untyped-def]
    tls.store_image("team/app", "amd64", tag="t")
    repo = Reference.parse(f"{tls.host}/team/app:t")
    tls.fault("redirect", "GET", "/manifests/t", arg="downgrade", times=0)
    with _client(tmp_path, test_ca) as c, pytest.raises(NetworkError) as exc:
        c.get_manifest(repo)
    _refused(exc, f"http://{tls.host}/v2/team/app/manifests/t")
    assert _plain_http(tls) == []


def test_location_on_another_host_gets_no_credentials(tmp_path, tls, test_ca) -> None:  # type: ignore[no-untyped-def]
    """The upload goes where the registry says (another name, over TLS: a storage backend), the
    Basic credentials do not: only requests to the registry's own origin carry them."""
    other = f"{_alias()}:{tls.port}"
    repo = Reference.parse(f"{tls.host}/team/app:t")
    tls.fault("rehost", "POST", "/blobs/uploads/$", arg=other)
    with _client(tmp_path, test_ca) as c:
        c.push_blob(repo, DATA, DIGEST)
    assert DIGEST in tls.blobs()
    put = [s for s in tls.seen if s.method == "PUT"]
    assert [s.url.partition("?")[0].rsplit("/", 1)[0] for s in put] == [
        f"https://{other}/v2/team/app/blobs/uploads"]
    for seen in tls.seen:
        mine = seen.url.startswith(f"https://{tls.host}/")
        assert mine or "authorization" not in seen.headers, seen
    assert len(tls.authorized()) >= 2  # the registry itself did get them (POST, HEAD)


def test_redirect_to_another_host_is_followed_without_credentials(tmp_path, tls, test_ca) -> None:  # type: ignore[no-untyped-def]
    """A blob GET redirected to a CDN (another origin, TLS): followed, digest checked,
    Authorization left behind."""
    digest = tls.store_blob(DATA)
    other = f"https://{_alias()}:{tls.port}/v2/team/app/blobs/{digest}"
    tls.fault("redirect", "GET", f"/blobs/{digest}", arg=other)
    repo = Reference.parse(f"{tls.host}/team/app:t")
    with _client(tmp_path, test_ca) as c:
        assert c.blob_exists(repo, digest)  # logged in: the GET below carries Basic
        assert c.get_blob(repo, digest) == DATA
    get = [s for s in tls.seen if s.method == "GET"]
    assert [s.url for s in get] == [f"https://{tls.host}/v2/team/app/blobs/{digest}", other]
    assert "authorization" in get[0].headers and "authorization" not in get[1].headers


def test_a_redirect_answer_is_read_so_its_connection_serves_the_next_request(  # type: ignore[no-untyped-def]
    tmp_path, tls, test_ca
) -> None:
    """Blob GETs redirected to a CDN (another origin), one after another: the redirect's own
    answer (a small body, as registries send) is read to its end, so the registry's connection
    goes back to the pool, and so does the CDN's: two TLS connections in all, not one more
    for each blob."""
    digests = [tls.store_blob(DATA + bytes([n])) for n in range(4)]
    alias = _alias()
    tls.fault("redirect", "GET", "/team/app/blobs/", arg="", times=0)
    tls.faults[-1].arg = f"https://{alias}:{tls.port}/v2/cdn/app/blobs/"  # + the digest below
    repo = Reference.parse(f"{tls.host}/team/app:t")
    with _client(tmp_path, test_ca) as c:
        assert c.blob_exists(repo, digests[0])  # logs in: one connection to the registry
        before = tls.connections
        for n, digest in enumerate(digests):
            tls.faults[-1].arg = f"https://{alias}:{tls.port}/v2/cdn/app/blobs/{digest}"
            assert c.get_blob(repo, digest) == DATA + bytes([n])
    assert tls.connections - before == 1  # the CDN's; the registry's was kept
    cdn = [s for s in tls.seen if s.method == "GET" and alias in s.url]
    assert len(cdn) == 4 and not any("authorization" in s.headers for s in cdn)


def test_plain_registry_location_to_a_name_that_is_not_loopback_is_refused(  # type: ignore[no-untyped-def]
    tmp_path, plain, test_ca
) -> None:
    """A plain-HTTP loopback registry may send the client to another loopback origin over
    plain HTTP (without credentials), but not to a name that is not loopback by its form,
    even though /etc/hosts maps it to 127.0.0.1."""
    alias = _alias()
    repo = Reference.parse(f"{plain.host}/team/app:t")
    plain.fault("rehost", "POST", "/blobs/uploads/$", arg=f"{alias}:{plain.port}")
    with _client(tmp_path, test_ca) as c, pytest.raises(NetworkError) as exc:
        c.push_blob(repo, DATA, DIGEST)
    msg = _refused(exc, f"http://{alias}:{plain.port}/v2/team/app/blobs/uploads/")
    assert "not loopback" in msg
    assert [s for s in plain.seen if alias in s.url] == [] and DIGEST not in plain.blobs()

    plain.fault("rehost", "POST", "/blobs/uploads/$", arg=f"localhost:{plain.port}")
    with _client(tmp_path, test_ca) as c:
        c.push_blob(repo, DATA, DIGEST)
    assert DIGEST in plain.blobs()
    for seen in plain.seen:
        if seen.url.startswith(f"http://localhost:{plain.port}/"):
            assert "authorization" not in seen.headers, seen


def test_credentials_go_to_the_token_realm_only_on_the_token_request(  # type: ignore[no-untyped-def]
    tmp_path, test_ca
) -> None:
    """Bearer auth with the realm on another origin (another name, TLS): the Basic credentials
    go there, on the token request only; the registry sees only the Bearer token; the token
    service sees no registry request."""
    alias = _alias()
    reg = HostileRegistry(tmp_path / "bearer", test_ca, auth="bearer", credentials=(USER, PASSWORD))
    reg._realm = f"https://{alias}:{reg.port}/token"
    try:
        digest, _ = reg.store_image("team/app", "arm64", tag="t")
        repo = Reference.parse(f"{reg.host}/team/app:t")
        with _client(tmp_path, test_ca) as c:
            assert c.resolve(str(repo)) == digest
            c.push_blob(repo, DATA, DIGEST)
        basic = [s for s in reg.seen if s.headers.get("authorization", "").startswith("Basic ")]
        assert basic and all(s.url.startswith(f"https://{alias}:{reg.port}/token?") for s in basic)
        on_registry = [s for s in reg.seen if s.url.startswith(f"https://{reg.host}/")]
        assert all(not s.url.startswith(f"https://{reg.host}/token") for s in on_registry)
        assert any(s.headers.get("authorization", "").startswith("Bearer ") for s in on_registry)
        assert all(s.url.partition("?")[0].endswith("/token") for s in reg.seen
                   if alias in s.url)
    finally:
        reg.stop()


def test_token_realm_on_http_from_an_https_registry_is_refused(tmp_path, test_ca) -> None:  # type: ignore[no-untyped-def]
    reg = HostileRegistry(tmp_path / "bearer", test_ca, auth="bearer", credentials=(USER, PASSWORD))
    reg._realm = f"http://127.0.0.1:{reg.port}/token"
    try:
        repo = Reference.parse(f"{reg.host}/team/app:t")
        with _client(tmp_path, test_ca) as c, pytest.raises(NetworkError) as exc:
            c.head_manifest(repo)
        _refused(exc, f"http://127.0.0.1:{reg.port}/token")
        assert _plain_http(reg) == [] and reg.authorized() == []
    finally:
        reg.stop()


def test_a_redirected_token_request_is_not_followed(tmp_path, test_ca) -> None:  # type: ignore[no-untyped-def]
    """The realm answers 307 to another origin: the credentials are not carried there."""
    alias = _alias()
    reg = HostileRegistry(tmp_path / "bearer", test_ca, auth="bearer", credentials=(USER, PASSWORD))
    reg.fault("redirect", "GET", "^/token", arg=f"https://{alias}:{reg.port}/token", times=0)
    try:
        repo = Reference.parse(f"{reg.host}/team/app:t")
        with _client(tmp_path, test_ca) as c, pytest.raises(AuthError) as exc:
            c.head_manifest(repo)
        assert str(exc.value) == f"{reg.host}: token service refused (307)"
        assert [s for s in reg.seen if alias in s.url] == []
    finally:
        reg.stop()


def test_a_location_with_userinfo_stays_out_of_the_message(tmp_path, tls, test_ca) -> None:  # type: ignore[no-untyped-def]
    """Review: a redirect to ``http://user:password@…`` is refused (a downgrade) without
    repeating the password the registry put in it."""
    tls.store_image("team/app", "amd64", tag="t")
    target = f"http://cdn-user:cdn-Pw-9@{tls.host}/v2/team/app/manifests/t"
    tls.fault("redirect", "GET", "/manifests/t", arg=target, times=0)
    with _client(tmp_path, test_ca) as c, pytest.raises(NetworkError) as exc:
        c.get_manifest(Reference.parse(f"{tls.host}/team/app:t"))
    msg = _refused(exc, f"http://{tls.host}/v2/team/app/manifests/t")
    assert "cdn-Pw-9" not in msg and "cdn-user" not in msg
    assert _plain_http(tls) == []
