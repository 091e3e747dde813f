"""verify's runtime pull works against every registry build can push to (issue 13, item 8):
real buildah pulling from Debian's docker-registry on 127.0.0.1 over plain HTTP (the client
fell back to it, so buildah is told --tls-verify=false) and over TLS with the test CA (never
told that). The full runtime checks on TLS with auth run in test_build.py; the plain-HTTP one
end to end is the demo against a hand-started registry (README)."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cannery.errors import CommandError
from cannery.oci import OCIClient, Reference, push_image_dir
from cannery.tls import ssl_context
from cannery.util.cmd import run
from cannery.verify.runtime import pull_argv
from tests.e2e.buildenv import cleanup_local_images, use_own_storage
from tests.services.bases import cert_dir_for
from tests.services.registry import LocalRegistry, write_dir_layout
from tests.services.tlsca import LocalCA

pytestmark = pytest.mark.e2e

if shutil.which("buildah") is None:
    pytest.skip("buildah is not installed (run scripts/test.sh)", allow_module_level=True)


@pytest.fixture(scope="module")
def storage(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    use_own_storage(tmp_path_factory.mktemp("containers"))
    yield
    cleanup_local_images()


def _push(client: OCIClient, host: str, tmp: Path) -> str:
    repo = Reference.parse(f"{host}/pull/{uuid.uuid4().hex[:8]}")
    desc = push_image_dir(client, repo, write_dir_layout(tmp / "l", "amd64", "pull"))
    return f"{host}/{repo.repository}@{desc.digest}"


def test_plain_http_loopback_pull(storage: None, registry: LocalRegistry, tmp_path: Path) -> None:
    with OCIClient(ssl_context()) as client:
        image = _push(client, registry.host, tmp_path)
        assert client.plain_http(registry.host)  # learnt by the client, asked, not re-derived
    with pytest.raises(CommandError, match=r"HTTP response to HTTPS client|https"):
        run(pull_argv(image, "linux/amd64", None, plain_http=False), timeout=120)
    ctr = run(pull_argv(image, "linux/amd64", None, plain_http=True), timeout=120).strip()
    run(["buildah", "rm", ctr])


def test_tls_pull_with_the_extra_ca(  # type: ignore[no-untyped-def]
    storage: None, tls_registry: LocalRegistry, test_ca: LocalCA, tmp_path: Path
) -> None:
    with OCIClient(ssl_context(test_ca.ca_cert)) as client:
        image = _push(client, tls_registry.host, tmp_path)
        assert not client.plain_http(tls_registry.host)
    argv = pull_argv(image, "linux/amd64", cert_dir_for(test_ca, tmp_path / "certs"), False)
    assert "--tls-verify=false" not in argv
    ctr = run(argv, timeout=120).strip()
    run(["buildah", "rm", ctr])
