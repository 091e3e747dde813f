"""What a build takes from an answer the registry gave earlier in the same run, against Debian's
real docker-registry on 127.0.0.1: the layers the export left out (``Presence``, then
``push_image_dir(..., known=...)``) and the tag read while the lock settles (``read_ahead``)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from cannery.builder.execute import Presence, Target, current_children, read_ahead
from cannery.errors import InputError
from cannery.oci import Descriptor, OCIClient, Reference, merge_index, push_image_dir
from cannery.oci.manifest import digest_of
from cannery.tls import ssl_context
from tests.services.registry import LocalRegistry, write_dir_layout

pytestmark = pytest.mark.e2e


def _layer(layout: Path) -> Descriptor:
    manifest = json.loads((layout / "manifest.json").read_bytes())
    return Descriptor.from_json(manifest["layers"][0])


def test_a_layer_left_out_must_be_one_the_registry_said_it_has(
    registry: LocalRegistry, tmp_path: Path
) -> None:
    """Only the registry's yes answers are remembered, and the upload trusts nothing else: a
    layout that leaves out a layer the registry lacks is refused before anything is written,
    though another left-out layer was answered for."""
    repo = Reference.parse(f"{registry.host}/reads/{uuid.uuid4().hex[:8]}")
    with OCIClient(ssl_context()) as client:
        there = write_dir_layout(tmp_path / "there", "amd64", "there")
        push_image_dir(client, repo, there)
        new = write_dir_layout(tmp_path / "new", "amd64", "new")
        have, lack = _layer(there), _layer(new)
        presence = Presence(Target(client=client), repo)
        assert presence(have) is True
        assert presence(lack) is False
        assert presence.seen == {have.digest}
        # An export that wrote neither layer (both taken as present): the manifest names both.
        manifest = json.loads((new / "manifest.json").read_bytes())
        manifest["layers"] = [have.to_json(), lack.to_json()]
        body = json.dumps(manifest).encode()
        (new / "manifest.json").write_bytes(body)
        (new / lack.digest.partition(":")[2]).unlink()
        with pytest.raises(InputError, match=f"blob {lack.digest} missing"):
            push_image_dir(client, repo, new, frozenset(presence.seen))
        assert client.head_manifest(repo.with_digest(digest_of(body))) is None


def test_layers_asked_during_the_build_are_only_the_registrys_yes_answers(
    registry: LocalRegistry, tmp_path: Path
) -> None:
    """``Presence.ask_early`` (while buildah runs): the layers of the platform manifest the tag
    names now, kept only where the registry answers yes; a manifest it cannot read there gives
    nothing, and the asking after the build answers as before."""
    name = uuid.uuid4().hex[:8]
    repo = Reference.parse(f"{registry.host}/reads/{name}")
    other = Reference.parse(f"{registry.host}/reads/{name}-other")
    with OCIClient(ssl_context()) as client:
        there = write_dir_layout(tmp_path / "there", "amd64", "there")
        previous = push_image_dir(client, repo, there)
        layer = _layer(there)
        early = Presence(Target(client=client), repo)
        early.ask_early(previous)
        early.settle()
        assert early.seen == {layer.digest}
        assert early(layer) is True
        elsewhere = Presence(Target(client=client), other)
        elsewhere.ask_early(previous)  # not in this repository: the GET is refused
        elsewhere.settle()
        assert elsewhere.seen == set()
        assert elsewhere(layer) is False


def test_a_layer_asked_during_the_build_that_the_registry_lacks_is_not_taken(
    registry: LocalRegistry, tmp_path: Path
) -> None:
    """The same, with a registry that says no for one of the layers (the real registry,
    behind a client whose ``blob_exists`` answers no for that digest, as after a GC): only the
    yes answers are kept, so that layer is asked again after the build, and exported."""
    repo = Reference.parse(f"{registry.host}/reads/{uuid.uuid4().hex[:8]}")
    with OCIClient(ssl_context()) as real:
        there = write_dir_layout(tmp_path / "there", "amd64", "there")
        previous = push_image_dir(real, repo, there)
        layer = _layer(there)
        body, _ = real.get_manifest(repo.with_digest(previous.digest))
        config = json.loads(body)["config"]["digest"]
        gone = "sha256:" + "0" * 64
        manifest = json.loads(body)
        manifest["layers"] = [layer.to_json(), {**layer.to_json(), "digest": gone}]

        class Forgetful:
            """The registry's answers, but for ``gone`` (and a manifest naming it)."""

            def __init__(self) -> None:
                self.asked: list[str] = []

            def get_manifest(self, ref: Reference) -> tuple[bytes, Descriptor]:
                return json.dumps(manifest).encode(), previous

            def blob_exists(self, ref: Reference, digest: str) -> bool:
                self.asked.append(digest)
                return digest != gone and real.blob_exists(ref, digest)

        client = Forgetful()
        early = Presence(Target(client=client), repo)  # type: ignore[arg-type]
        early.ask_early(previous)
        early.settle()
        assert sorted(client.asked) == sorted([layer.digest, gone]) and config not in client.asked
        assert early.seen == {layer.digest}
        assert early(Descriptor(layer.media_type, gone, layer.size)) is False
        assert client.asked.count(gone) == 2  # asked again after the build, answered no


def test_the_tag_read_ahead_is_what_the_build_reads(
    registry: LocalRegistry, tmp_path: Path
) -> None:
    """``read_ahead`` gives, for each tag, what ``current_children`` reads itself: the index's
    entries by platform, or nothing for a tag that is not there."""
    repo = Reference.parse(f"{registry.host}/reads/{uuid.uuid4().hex[:8]}")
    with OCIClient(ssl_context()) as client:
        child = push_image_dir(client, repo, write_dir_layout(tmp_path / "a", "amd64", "a"))
        index = merge_index(client, repo, [child], {})
        client.put_manifest(repo.with_tag("v1"), client.get_manifest(
            repo.with_digest(index.digest))[0], index.media_type)
        pool, ahead = read_ahead(client, [(repo.name, "v1"), (repo.name, "absent")])
        try:
            early = {key: future.result(timeout=30) for key, future in ahead.items()}
        finally:
            pool.shutdown()
        assert early[(repo.name, "v1")] == current_children(client, repo, "v1")
        assert early[(repo.name, "v1")]["linux/amd64"].digest == child.digest
        assert early[(repo.name, "absent")] == {}
