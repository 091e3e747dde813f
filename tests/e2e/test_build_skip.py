"""The no-op skip decision (``builder.execute.unchanged_child``) against Debian's real
docker-registry on 127.0.0.1: a platform is skipped only when the tag's current entry was built
from exactly the planned inputs AND its manifest is still in the registry (garbage collection
on quay.io or SWR deletes untagged manifests; a skipped platform must not point at nothing)."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest

from cannery.builder.execute import unchanged_child
from cannery.builder.jobs import INPUTS_LABEL, PlatformJob
from cannery.oci import Descriptor, OCIClient, Reference, push_image_dir
from cannery.tls import ssl_context
from tests.services.registry import LocalRegistry, write_dir_layout

pytestmark = pytest.mark.e2e

PLANNED = "sha256:" + "1" * 64


def _pushed(registry: LocalRegistry, client: OCIClient, tmp: Path) -> tuple[Reference, Descriptor]:
    repo = Reference.parse(f"{registry.host}/skip/{uuid.uuid4().hex[:8]}")
    desc = push_image_dir(client, repo, write_dir_layout(tmp / "l", "amd64", "skip"))
    entry = Descriptor(desc.media_type, desc.digest, desc.size, desc.platform,
                       {INPUTS_LABEL: PLANNED})
    return repo, entry


def _job(digest: str) -> PlatformJob:
    return PlatformJob("img", "linux/amd64", digest, "localhost/x:y")


def test_skipped_only_with_equal_inputs(registry: LocalRegistry, tmp_path: Path) -> None:
    with OCIClient(ssl_context()) as client:
        repo, entry = _pushed(registry, client, tmp_path)
        assert unchanged_child(client, repo, _job(PLANNED), entry) == entry
        # Other inputs (a new pin, another clock): built again, though the manifest is there.
        assert unchanged_child(client, repo, _job("sha256:" + "2" * 64), entry) is None
        unlabelled = Descriptor(entry.media_type, entry.digest, entry.size, entry.platform)
        assert unchanged_child(client, repo, _job(PLANNED), unlabelled) is None
        assert unchanged_child(client, repo, _job(PLANNED), None) is None


def test_not_skipped_when_the_manifest_is_gone(registry: LocalRegistry, tmp_path: Path) -> None:
    with OCIClient(ssl_context()) as client:
        repo, entry = _pushed(registry, client, tmp_path)
        assert unchanged_child(client, repo, _job(PLANNED), entry) == entry
        gone = httpx.delete(f"{registry.url}/v2/{repo.repository}/manifests/{entry.digest}")
        assert gone.status_code == 202
        assert unchanged_child(client, repo, _job(PLANNED), entry) is None
