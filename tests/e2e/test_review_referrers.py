"""Referrers lists a registry (or anyone with push rights) wrote to trip the client, on the real
docker-registry 2.8 (the tag-schema fallback): found in review of #18."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cannery.attest.attach import PROVENANCE_TYPE
from cannery.attest.sign import ENVELOPE_MEDIA_TYPE
from cannery.errors import NetworkError
from cannery.oci import OCI_INDEX, Descriptor, OCIClient, Reference, push_image_dir
from cannery.oci.manifest import OCI_MANIFEST
from cannery.oci.referrers import (
    Referrer,
    attach,
    copy_referrers,
    fallback_tag,
    referrers_index,
)
from cannery.tls import ssl_context
from tests.services.hostile import HostileRegistry
from tests.services.registry import LocalRegistry, write_dir_layout
from tests.services.tlsca import LocalCA

pytestmark = pytest.mark.e2e


@pytest.fixture
def client() -> Iterator[OCIClient]:
    with OCIClient(ssl_context(), retry_budget=5, backoff=0.01) as c:
        yield c


def _subject(tmp: Path, client: OCIClient, host: str) -> tuple[Reference, Descriptor]:
    repo = Reference.parse(f"{host}/review/{uuid.uuid4().hex[:10]}:latest")
    return repo, push_image_dir(client, repo, write_dir_layout(tmp / "amd64", "amd64", "x"))


def test_copy_referrers_stops_at_a_cycle_in_the_lists(
    tmp_path: Path, registry: LocalRegistry, client: OCIClient
) -> None:
    src, subject = _subject(tmp_path, client, registry.host)
    a = attach(client, src, subject, PROVENANCE_TYPE, b'{"p":1}', ENVELOPE_MEDIA_TYPE)
    # The fallback list of A names A itself: following referrers of referrers never ends.
    client.put_manifest(src.with_tag(fallback_tag(a.descriptor.digest)), referrers_index([a]),
                        OCI_INDEX)
    dst = Reference.parse(f"{registry.host}/review/{uuid.uuid4().hex[:10]}:latest")
    copied = copy_referrers(client, src, client, dst, subject.digest)
    assert [c.descriptor.digest for c in copied] == [a.descriptor.digest]


def test_copy_referrers_names_an_artifact_without_config(
    tmp_path: Path, registry: LocalRegistry, client: OCIClient, test_ca: LocalCA
) -> None:
    # docker-registry refuses such a manifest; a hostile registry serves one.
    reg = HostileRegistry(tmp_path / "reg", test_ca)
    try:
        digest, size = reg.store_image("team/app", "amd64")
        body = json.dumps({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": PROVENANCE_TYPE,
            "layers": [], "subject": Descriptor(OCI_MANIFEST, digest, size).to_json(),
        }).encode()
        desc = Descriptor(OCI_MANIFEST, reg.store_manifest("team/app", body, OCI_MANIFEST),
                          len(body))
        reg.store_manifest("team/app", referrers_index([Referrer(desc, PROVENANCE_TYPE)]),
                           OCI_INDEX, fallback_tag(digest))
        src = Reference.parse(f"{reg.host}/team/app")
        dst = Reference.parse(f"{registry.host}/review/{uuid.uuid4().hex[:10]}:latest")
        with OCIClient(ssl_context(test_ca.ca_cert), retry_budget=2, backoff=0.01) as hc, \
                pytest.raises(NetworkError, match=r"malformed answer: .*\.config: "):
            copy_referrers(hc, src, client, dst, digest)
    finally:
        reg.stop()
