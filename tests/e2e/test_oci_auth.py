"""Registry auth against the real registry: Basic (htpasswd, over TLS with the test CA) and
Bearer (the project's token service). A wrong password is one clear line, and the password is
in no error text, repr or log record; tokens are asked for the scope a write needs."""

from __future__ import annotations

import hashlib
import http.server
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cannery.errors import NetworkError
from cannery.oci import AuthError, Credentials, OCIClient, Reference, push_image_dir
from cannery.tls import ssl_context
from tests.services.faultproxy import FaultProxy
from tests.services.registry import LocalRegistry, password_registry, write_dir_layout
from tests.services.tlsca import LocalCA
from tests.services.token import TokenServer

pytestmark = pytest.mark.e2e

USER, PASSWORD, WRONG = "pusher", "c0rrect-H0rse-pw", "wr0ng-B4ttery-pw"


def _env(password: str) -> dict[str, str]:
    return {"CANNERY_REGISTRY_USER": USER, "CANNERY_REGISTRY_PASSWORD": password}


@pytest.fixture(scope="module")
def basic_registry(
    tmp_path_factory: pytest.TempPathFactory, test_ca: LocalCA
) -> Iterator[LocalRegistry]:
    reg = password_registry(tmp_path_factory.mktemp("basicreg"),
                            (test_ca.server_cert, test_ca.server_key), USER, PASSWORD)
    yield reg
    reg.stop()


def _assert_secret_absent(exc: BaseException, caplog: pytest.LogCaptureFixture) -> None:
    for text in (str(exc), repr(exc), caplog.text, *(r.getMessage() for r in caplog.records)):
        assert WRONG not in text and PASSWORD not in text


def test_basic_auth_push_and_wrong_password(  # type: ignore[no-untyped-def]
    basic_registry, test_ca: LocalCA, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    repo = Reference.parse(f"{basic_registry.host}/team/app:latest")
    layout = write_dir_layout(tmp_path / "l", "amd64", "basic")
    ctx = ssl_context(test_ca.ca_cert)
    wrong = Credentials(_env(WRONG), tmp_path)
    with OCIClient(ctx, credentials=wrong) as c, pytest.raises(AuthError) as exc:
        push_image_dir(c, repo, layout)
    assert str(exc.value) == f"registry refused the credentials for {basic_registry.host} (401)"
    _assert_secret_absent(exc.value, caplog)

    with OCIClient(ctx, credentials=Credentials(_env(PASSWORD), tmp_path)) as c:
        desc = push_image_dir(c, repo, layout)
        assert c.head_manifest(repo.with_digest(desc.digest)) is not None
    _assert_secret_absent(exc.value, caplog)

    # No credentials at all: the 401 names what to do.
    with OCIClient(ctx, credentials=Credentials({}, tmp_path)) as c, \
            pytest.raises(AuthError, match=r"refused access \(401\).*CANNERY_REGISTRY_USER"):
        c.head_manifest(repo)


@pytest.fixture
def token_registry(tmp_path: Path) -> Iterator[tuple[LocalRegistry, TokenServer]]:
    tokens = TokenServer(tmp_path / "token", credentials=(USER, PASSWORD))
    (tmp_path / "reg").mkdir()
    reg = LocalRegistry(tmp_path / "reg", auth=tokens.registry_auth())
    yield reg, tokens
    reg.stop()
    tokens.stop()


def test_bearer_push_asks_for_push_scope_and_caches_tokens(  # type: ignore[no-untyped-def]
    token_registry, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    reg, tokens = token_registry
    # A slow token service: the blob uploads (side by side) all meet the registry's challenge
    # before the first token comes back, so each would ask for one if the client let them.
    tokens.delay = 0.5
    repo = Reference.parse(f"{reg.host}/team/app:latest")
    layout = write_dir_layout(tmp_path / "l", "arm64", "bearer")
    with OCIClient(ssl_context(), credentials=Credentials(_env(PASSWORD), tmp_path)) as c:
        desc = push_image_dir(c, repo, layout)
        assert c.get_manifest(repo.with_digest(desc.digest))[1].digest == desc.digest
    # The scope comes from the registry's challenge, whose action order is not fixed
    # (distribution builds it from a map): compare actions as sets.
    scopes = []
    for r in tokens.requests:
        resource, _, actions = r["scope"].rpartition(":")
        scopes.append(f"{resource}:{','.join(sorted(actions.split(',')))}")
    # One token per scope, reused for every blob and the manifest.
    assert sorted(scopes) == ["repository:team/app:pull", "repository:team/app:pull,push"]
    assert all(r["authorization"] == "Basic" for r in tokens.requests)

    wrong = Credentials(_env(WRONG), tmp_path)
    with OCIClient(ssl_context(), credentials=wrong) as c, pytest.raises(AuthError) as exc:
        c.head_manifest(repo)
    assert str(exc.value) == (
        f"registry refused the credentials for {reg.host} (token service answered 401)")
    _assert_secret_absent(exc.value, caplog)


class _JunkTokens(http.server.BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body = b'{"not_a_token": 1}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_malformed_token_answer_is_one_line(tmp_path: Path) -> None:
    signer = TokenServer(tmp_path / "signer")
    junk = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _JunkTokens)
    threading.Thread(target=junk.serve_forever, daemon=True).start()
    realm = f"http://127.0.0.1:{junk.server_address[1]}/token"
    (tmp_path / "reg").mkdir()
    reg = LocalRegistry(tmp_path / "reg", auth=signer.registry_auth().replace(signer.realm, realm))
    try:
        with OCIClient(ssl_context(), credentials=Credentials({}, tmp_path)) as c, \
                pytest.raises(NetworkError) as exc:
            c.resolve(f"{reg.host}/a/b:t")
        assert str(exc.value) == f"{reg.host}: token service sent a malformed answer (no token)"
    finally:
        reg.stop()
        signer.stop()
        junk.shutdown()
        junk.server_close()


def test_credentials_stay_with_the_registry_origin(token_registry, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """An upload Location on another origin gets no Authorization header: the token for the
    registry is not handed to whatever host a Location names."""
    reg, _ = token_registry
    front = FaultProxy(reg.port)  # the registry as the client knows it
    other = FaultProxy(reg.port)  # a different origin (port) in front of the same registry
    front.location_to = other.host
    try:
        repo = Reference.parse(f"{front.host}/team/app:latest")
        with OCIClient(ssl_context(), credentials=Credentials(_env(PASSWORD), tmp_path)) as c, \
                pytest.raises(AuthError, match="refused access"):
            c.push_blob(repo, b"data", "sha256:" + hashlib.sha256(b"data").hexdigest())
        assert front.authorized  # the registry's own origin did get the token
        assert other.log and other.authorized == []
    finally:
        front.stop()
        other.stop()


def test_no_credentials_to_a_plain_http_token_service_elsewhere(tmp_path: Path) -> None:
    """A realm on plain HTTP is accepted only on loopback (a test token service). 0.0.0.0
    reaches this machine but is not a loopback address: credentials are withheld."""
    signer = TokenServer(tmp_path / "signer", credentials=(USER, PASSWORD))
    realm = signer.realm.replace("127.0.0.1", "0.0.0.0")
    (tmp_path / "reg").mkdir()
    reg = LocalRegistry(tmp_path / "reg", auth=signer.registry_auth().replace(signer.realm, realm))
    try:
        with OCIClient(ssl_context(), credentials=Credentials(_env(PASSWORD), tmp_path)) as c, \
                pytest.raises(AuthError, match="not HTTPS; not sending credentials"):
            c.resolve(f"{reg.host}/a/b:t")
        assert signer.requests == []
    finally:
        reg.stop()
        signer.stop()


def test_lock_with_a_wrong_password_is_one_line_without_it(  # type: ignore[no-untyped-def]
    basic_registry, test_ca: LocalCA, tmp_path: Path, cli, monkeypatch, caplog
) -> None:
    """Through the CLI (`cannery lock`): exit 2, one line, the password nowhere in stdout,
    stderr or the log records (debug level, captured), and no lock file is written."""
    from tests.catalogs import minimal

    caplog.set_level(logging.DEBUG)
    catalog = tmp_path / "catalog.toml"
    catalog.write_text(minimal(registry=basic_registry.host))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "no-docker-config"))
    monkeypatch.setenv("CANNERY_REGISTRY_USER", USER)
    monkeypatch.setenv("CANNERY_REGISTRY_PASSWORD", WRONG)
    res = cli("lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert))
    assert res.code == 2, res.err
    assert any(r.name == "cannery.oci" for r in caplog.records)
    assert f"registry refused the credentials for {basic_registry.host} (401)" in res.err
    for text in (res.out, res.err, caplog.text):
        assert WRONG not in text
    assert not (tmp_path / "cannery.lock").exists()
