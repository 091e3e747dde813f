"""Layer sizes, wasted bytes and budgets, read from real gzip'd tar layers in an OCI layout on
disk (the same reads `cannery size` makes of a registry, through `Layout`): whiteouts and opaque
directories hide what earlier layers wrote, an overwrite wastes the earlier copy, each layer
is named from the rendered Dockerfile's steps, and a budget fails naming the layer and step."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from cannery.errors import InputError
from cannery.oci import Reference
from cannery.plan import BudgetSpec
from cannery.verify.layout import LAYOUT_REF, Layout
from cannery.verify.size import layer_steps, platform_size

Entry = tuple[str, int | None]  # (path, size); None: a directory


def _layer(entries: list[Entry]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for path, size in entries:
            info = tarfile.TarInfo(path)
            if size is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = size
                tar.addfile(info, io.BytesIO(b"x" * size))
    return gzip.compress(raw.getvalue(), mtime=0)


def _blob(root: Path, data: bytes) -> dict[str, object]:
    digest = hashlib.sha256(data).hexdigest()
    (root / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    (root / "blobs" / "sha256" / digest).write_bytes(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def _image(root: Path, layers: list[list[Entry]],
           history: list[str] | None = None) -> tuple[bytes, dict[str, object]]:
    config: dict[str, object] = {
        "architecture": "amd64", "os": "linux", "config": {},
        "history": [{"created_by": h} for h in history or []]}
    cfg = _blob(root, json.dumps(config).encode())
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **cfg},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    **_blob(root, _layer(entries))} for entries in layers]}).encode()
    return manifest, config


def _size(tmp_path: Path, layers: list[list[Entry]], steps: list[str] | None = None,
          history: list[str] | None = None):  # type: ignore[no-untyped-def]
    manifest, config = _image(tmp_path, layers, history)
    return platform_size(Layout(tmp_path), LAYOUT_REF, manifest, "linux/amd64", config, steps,
                         contents=True)


BASE = [("usr", None), ("usr/bin/sh", 1000), ("etc/big", 5000)]


def test_removed_and_overwritten_bytes_are_wasted_by_the_layer_that_wrote_them(
    tmp_path: Path,
) -> None:
    size = _size(tmp_path, [
        BASE,
        [("opt", None), ("opt/big", 3000), ("opt/over", 1000), ("opt/keep", 10)],
        [("opt/.wh.big", 0)],  # rm /opt/big
        [("opt/over", 2000)],  # overwritten
    ])
    assert [la.wasted for la in size.layers] == [0, 4000, 0, 0]
    assert size.wasted == 4000
    assert size.file_bytes == 1000 + 5000 + 3000 + 1000 + 10 + 2000
    assert size.wasted_share == pytest.approx(4000 / 12010)
    # dive counts each copy of a path written twice, the surviving one too
    assert size.dive_wasted == 3000 + 0 + 1000 + 2000
    assert size.layers[1].biggest == [("/opt/big", 3000), ("/opt/over", 1000), ("/opt/keep", 10)]


def test_a_removed_directory_and_an_opaque_one_hide_everything_under_them(
    tmp_path: Path,
) -> None:
    size = _size(tmp_path, [
        [("etc/big", 5000), ("etc/small", 7), ("var/cache/a", 100), ("var/cache/b", 200)],
        [(".wh.etc", 0)],  # rm -rf /etc
        [("var/cache", None), ("var/cache/.wh..wh..opq", 0), ("var/cache/c", 1)],
    ])
    assert size.layers[0].wasted == 5000 + 7 + 100 + 200
    assert size.layers[2].wasted == 0  # its own file in the opaque directory stays


def test_uncompressed_size_is_the_layer_tar(tmp_path: Path) -> None:
    size = _size(tmp_path, [[("a", 10_000)]])
    (layer,) = size.layers
    assert layer.uncompressed is not None and layer.uncompressed >= 10_000 + 512
    assert layer.uncompressed % 512 == 0
    assert layer.compressed < layer.uncompressed  # 10 kB of "x" gzips small


DOCKERFILE = """\
# header
FROM base@sha256:aa AS arch-amd64
RUN echo stage-only
FROM arch-${TARGETARCH} AS image
ARG TARGETARCH
# System packages (change least often).
RUN set -eu; \\
    apt-get install -y jq
ENV A=1
# A catalog `run` step (linted with cannery's Dockerfile rules).
RUN head -c 3000000 /dev/urandom > /opt/big
COPY --from=tools /opt/x /opt/x
LABEL a=b
"""


NAMES = ["System packages (change least often)",
         "run: head -c 3000000 /dev/urandom > /opt/big",
         "COPY --from=tools /opt/x /opt/x"]


def test_layers_are_named_from_the_rendered_dockerfile(tmp_path: Path) -> None:
    steps = layer_steps(DOCKERFILE)
    assert [s.name for s in steps] == NAMES
    size = _size(tmp_path, [BASE, BASE, [("a", 1)], [("b", 1)], [("c", 1)]], steps)
    assert [la.step for la in size.layers] == ["base image", "base image", *NAMES]


@pytest.mark.parametrize("builder", ["buildah", "buildkit"])
def test_a_layer_the_builder_adds_shifts_no_name(tmp_path: Path, builder: str) -> None:
    """The history's created_by of each layer, as buildah and BuildKit write it: BuildKit adds
    a layer for a WORKDIR that makes its directory; it is named by its own text, and the steps
    after it keep theirs."""
    run = ("/bin/bash -o pipefail -c " if builder == "buildah"
           else "RUN /bin/bash -o pipefail -c ")
    tail = "" if builder == "buildah" else " # buildkit"
    history = ["/bin/sh -c #(nop) ADD file:0 in /", "/bin/sh -c apt-get update",
               f"{run}set -eu; apt-get install -y jq{tail}",
               f"WORKDIR /work{tail}",
               f"{run}head -c 3000000 /dev/urandom > /opt/big{tail}",
               ("/bin/sh -c #(nop) COPY dir:ab12 in /opt/x" if builder == "buildah"
                else "COPY /opt/x /opt/x # buildkit")]
    layers = [[("a", 1)] for _ in history]
    size = _size(tmp_path, layers, layer_steps(DOCKERFILE), history)
    assert [la.step for la in size.layers] == [
        "base image", "base image", NAMES[0], f"WORKDIR /work{tail}", NAMES[1], NAMES[2]]


def test_without_the_catalog_layers_are_named_from_history(tmp_path: Path) -> None:
    size = _size(tmp_path, [[("a", 1)], [("b", 1)]], None,
                 ["/bin/sh -c #(nop) ADD file:abc in /", "/bin/bash -o pipefail -c make"])
    assert [la.step for la in size.layers] == ["ADD file:abc in /",
                                               "/bin/bash -o pipefail -c make"]


def test_a_layer_whose_bytes_do_not_match_its_digest_is_refused(tmp_path: Path) -> None:
    manifest, config = _image(tmp_path, [[("a", 100)]])
    layer = json.loads(manifest)["layers"][0]["digest"].split(":")[1]
    (tmp_path / "blobs" / "sha256" / layer).write_bytes(_layer([("a", 101)]))
    with pytest.raises(InputError, match="do not hash to"):
        platform_size(Layout(tmp_path), LAYOUT_REF, manifest, "linux/amd64", config, None,
                      contents=True)


def test_budget_failures_name_the_layer_and_step(tmp_path: Path) -> None:
    from cannery.verify.size import budget_checks

    steps = ["System packages", "run: head -c 3000000 /dev/urandom > /opt/big"]
    size = _size(tmp_path, [[("usr/x", 10)], [("a", 10)],
                            [("big", 200_000), (".wh.a", 0)]], steps)
    big = size.layers[2]
    fine = budget_checks(BudgetSpec(compressed=10**9, layer=10**9, wasted=0.5), size)
    assert all(c.ok for c in fine) and len(fine) == 3
    over = {c.name: c.detail for c in budget_checks(
        BudgetSpec(compressed=100, layer=big.compressed - 1, wasted=0.00001), size) if not c.ok}
    assert over["size budget: largest layer"].startswith(
        "layer 3 (run: head -c 3000000 /dev/urandom > /opt/big) is ")
    assert "its largest layer is 3 (run: head" in over["size budget: compressed"]
    assert "most by layer 2 (System packages, 0.0 kB)" in over["size budget: wasted"]


def test_reference_is_only_a_name_in_messages() -> None:
    assert str(Reference("localhost", "oci-layout")) == str(LAYOUT_REF)


def test_a_path_that_changes_type_and_a_duplicate_in_one_layer_are_waste(tmp_path: Path) -> None:
    size = _size(tmp_path, [
        [("x", 100), ("d/big", 200), ("dup", 50), ("dup", 70)],  # dup written twice
        [("x", None), ("x/new", 1), ("d", 5)],  # a directory over file x, a file over dir d
    ])
    assert size.layers[0].wasted == 100 + 200 + 50
    assert size.layers[1].wasted == 0
