"""Retries, through the project's fault proxy in front of the real registry, with scripted
faults: what is retried (429/5xx, dropped connections), how long it waits (Retry-After, backoff
with jitter, the time budget), what is not retried (other 4xx, a host that never answered), and
that an upload broken half-way starts a new upload session."""

from __future__ import annotations

import hashlib
import json
import random
import time
import uuid
from collections.abc import Iterator

import pytest

from cannery.errors import NetworkError
from cannery.oci import OCI_MANIFEST, OCIClient, Reference
from cannery.oci.client import backoff_delay
from cannery.tls import ssl_context
from tests.services.faultproxy import FaultProxy
from tests.services.registry import LocalRegistry, free_port, push_image

pytestmark = pytest.mark.e2e


class Sleeps(list[float]):
    """Records the waits instead of waiting (the budget counts them as time spent)."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def image(registry: LocalRegistry) -> tuple[str, str]:
    repo = f"retry/{uuid.uuid4().hex[:8]}"
    return repo, push_image(registry.url, repo, "t", note=repo)


def _proxy(registry: LocalRegistry, *script: str, **kw: object) -> FaultProxy:
    return FaultProxy(registry.port, script=list(script), **kw)  # type: ignore[arg-type]


def _client(sleeps: Sleeps, budget: float = 30) -> OCIClient:
    return OCIClient(ssl_context(), retry_budget=budget, sleep=sleeps, rng=random.Random(1))


@pytest.fixture
def proxies() -> Iterator[list[FaultProxy]]:
    made: list[FaultProxy] = []
    yield made
    for p in made:
        p.stop()


@pytest.mark.parametrize("fault", ["500", "502", "503", "504", "drop-before", "drop-after",
                                   "drop-mid-body"])
def test_transient_faults_are_retried(registry, image, sleeps, proxies, fault: str) -> None:  # type: ignore[no-untyped-def]
    repo, digest = image
    proxy = _proxy(registry, fault)
    proxies.append(proxy)
    with _client(sleeps) as c:
        assert c.resolve(f"{proxy.host}/{repo}:t") == digest
    assert len(sleeps) == 1
    assert len([a for _, _, a in proxy.log]) == 2


def test_retry_after_is_honoured(registry, image, sleeps, proxies) -> None:  # type: ignore[no-untyped-def]
    repo, digest = image
    proxy = _proxy(registry, "429:3", "429:0")
    proxies.append(proxy)
    with _client(sleeps) as c:
        assert c.resolve(f"{proxy.host}/{repo}:t") == digest
    assert sleeps[0] >= 3 and len(sleeps) == 2
    assert proxy.counts["429"] == 2


def test_budget_bounds_the_retries(registry, image, sleeps, proxies) -> None:  # type: ignore[no-untyped-def]
    repo, _ = image
    proxy = _proxy(registry, *["503"] * 1000)
    proxies.append(proxy)
    with _client(sleeps, budget=5) as c, pytest.raises(NetworkError) as exc:
        c.resolve(f"{proxy.host}/{repo}:t")
    msg = str(exc.value)
    assert "registry answered 503; gave up after" in msg and "\n" not in msg
    assert sum(sleeps) <= 5
    assert len(proxy.log) == len(sleeps) + 1 > 3  # backoff grows, jitter keeps some short


def test_retry_after_beyond_the_budget_gives_up_at_once(registry, image, sleeps, proxies) -> None:  # type: ignore[no-untyped-def]
    repo, _ = image
    proxy = _proxy(registry, "429:60")
    proxies.append(proxy)
    with _client(sleeps, budget=10) as c, pytest.raises(NetworkError, match="429"):
        c.resolve(f"{proxy.host}/{repo}:t")
    assert sleeps == []


def test_client_errors_are_not_retried(registry, image, sleeps, proxies) -> None:  # type: ignore[no-untyped-def]
    repo, _ = image
    proxy = _proxy(registry)
    proxies.append(proxy)
    ref = Reference.parse(f"{proxy.host}/{repo}:missing")
    with _client(sleeps) as c:
        assert c.head_manifest(ref) is None
        with pytest.raises(NetworkError, match=r"registry answered 400 \(MANIFEST_INVALID\)"):
            c.put_manifest(ref.with_tag("bad"), b'{"schemaVersion": 2, "layers": 1}',
                           OCI_MANIFEST)
    assert [m for m, _, _ in proxy.log] == ["HEAD", "PUT"] and sleeps == []


def test_refused_before_any_answer_fails_fast() -> None:
    start = time.monotonic()
    with OCIClient(ssl_context(), retry_budget=30) as c, \
            pytest.raises(NetworkError, match="registry unreachable"):
        c.resolve(f"127.0.0.1:{free_port()}/a/b:t")
    assert time.monotonic() - start < 5


def test_refused_mid_run_is_retried_then_gives_up(registry, image, sleeps) -> None:  # type: ignore[no-untyped-def]
    repo, digest = image
    proxy = _proxy(registry)
    with _client(sleeps, budget=4) as c:
        assert c.resolve(f"{proxy.host}/{repo}:t") == digest
        proxy.stop()
        with pytest.raises(NetworkError, match="gave up after"):
            c.resolve(f"{proxy.host}/{repo}:t")
    assert sleeps and sum(sleeps) <= 4


@pytest.mark.parametrize(("fault", "sessions"), [("drop-before", 2), ("drop-after", 1),
                                                 ("503", 2)])
def test_upload_broken_half_way(registry, sleeps, proxies, fault: str, sessions: int) -> None:  # type: ignore[no-untyped-def]
    """drop-before: the registry never saw the PUT, so a new session (a second POST) is
    started; drop-after: it finished the upload but the answer was lost, so the retry finds
    the blob there and uploads nothing."""
    proxy = _proxy(registry, fault,
                   when=lambda m, p: m == "PUT" and "/blobs/uploads/" in p)
    proxies.append(proxy)
    data = json.dumps({"blob": uuid.uuid4().hex}).encode() * 1000
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    ref = Reference.parse(f"{proxy.host}/retry/{uuid.uuid4().hex[:8]}:t")
    with _client(sleeps) as c:
        c.push_blob(ref, data, digest)
        assert c.get_blob(ref, digest) == data
    posts = [p for m, p, _ in proxy.log if m == "POST"]
    assert len(posts) == sessions and proxy.counts[fault] == 1


def test_backoff_is_full_jitter_and_capped() -> None:
    rng = random.Random(7)
    for attempt in range(12):
        bound = min(10.0, 0.5 * 2**attempt)
        values = [backoff_delay(attempt, 0.5, 10.0, rng) for _ in range(200)]
        assert all(0 <= v <= bound for v in values)
        assert max(values) > bound * 0.8 and min(values) < bound * 0.2
