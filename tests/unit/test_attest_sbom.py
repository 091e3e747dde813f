"""The SBOM ↔ lock cross-check on SPDX documents shaped as syft writes them for an image (a
pypi purl per package, an ``evident-by`` relationship to its METADATA file, the file's layer in
its comment; no package checksums: see ``cannery.attest.sbom``): every locked distribution at
its version, and nothing the lock does not name installed from the lock's layer on."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from cannery.attest.sbom import lock_mismatches, python_distributions, unlocked_distributions
from cannery.catalog.load import load_catalog
from cannery.lock import read_lock
from cannery.plan import ImageSpec, plan

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
LAYERS = [f"sha256:{n}{'0' * 63}" for n in range(5)]  # base, packages, toolkit, lock, comps
SITE = "/usr/local/lib/python3.11/dist-packages"


def _spec() -> ImageSpec:
    cat = load_catalog(None).catalog
    (spec,) = plan(cat, read_lock(GOLDEN / "cannery.lock"), ["qwen3-5-a2"])
    pins = (("amd64", ("Numpy==2.1.0 --hash=sha256:" + "1" * 64,
                       "torch_npu[x]==2.6.0 --hash=sha256:" + "2" * 64)),)
    return dataclasses.replace(spec, python_locked=pins)


def _doc(*dists: tuple[str, str, str, int]) -> dict[str, object]:
    """(name, version, directory, layer index) → an SPDX document as syft writes it."""
    packages, files, rels = [], [], []
    for n, (name, version, where, layer) in enumerate(dists):
        pkg, meta = f"SPDXRef-Package-python-{n}", f"SPDXRef-File-{n}"
        packages.append({
            "name": name, "SPDXID": pkg, "versionInfo": version,
            "sourceInfo": f"acquired package info from installed python package manifest "
                          f"file: {where}/{name}-{version}.dist-info/METADATA",
            "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                              "referenceLocator": f"pkg:pypi/{name}@{version}"}],
        })
        files.append({"fileName": f"{where.lstrip('/')}/{name}-{version}.dist-info/METADATA",
                      "SPDXID": meta, "comment": f"layerID: {LAYERS[layer]}",
                      "checksums": [{"algorithm": "SHA256", "checksumValue": "f" * 64}]})
        rels.append({"spdxElementId": pkg, "relatedSpdxElement": meta,
                     "relationshipType": "OTHER",
                     "comment": "evident-by: indicates the package's existence is evident by "
                                "the given file"})
    return {"spdxVersion": "SPDX-2.3", "packages": packages, "files": files,
            "relationships": rels}


GOOD = [("numpy", "2.1.0", SITE, 3), ("torch-npu", "2.6.0", SITE, 3),
        ("pip", "23.0.1", "/usr/lib/python3/dist-packages", 0),  # the base's
        ("te", "0.4.0", "/usr/local/Ascend/python", 2),  # the toolkit installer's
        ("vllm", "0.18.0", SITE, 4)]  # a component, from its pinned commit


def test_syft_layout_is_read_name_version_file_and_layer() -> None:
    (d,) = python_distributions(_doc(("Torch_NPU", "2.6.0", SITE, 3)))
    assert (d.name, d.version, d.layer) == ("torch-npu", "2.6.0", LAYERS[3])
    assert d.path == f"{SITE.lstrip('/')}/Torch_NPU-2.6.0.dist-info/METADATA"


def test_a_consistent_image_passes_both_ways() -> None:
    doc = _doc(*GOOD)
    assert lock_mismatches(_spec(), "linux/amd64", doc) == []
    problems, compared = unlocked_distributions(_spec(), "linux/amd64", doc, LAYERS)
    assert problems == [] and compared == "3 distributions from layer 4 of 5 on"


def test_a_locked_distribution_at_another_version_or_absent_fails() -> None:
    doc = _doc(("numpy", "2.0.0", SITE, 3), *GOOD[2:])
    assert lock_mismatches(_spec(), "linux/amd64", doc) == [
        "Numpy==2.1.0 (SBOM: 2.0.0)", "torch_npu==2.6.0 (SBOM: absent)"]


def test_a_distribution_the_lock_does_not_name_fails_from_the_lock_layer_on() -> None:
    """One a later step installed (an unpinned `pip install`), and a locked one upgraded by a
    later step; the base's and the toolkit's (earlier layers) are not this check's."""
    doc = _doc(*GOOD, ("requests", "2.32.0", SITE, 4), ("numpy", "2.2.0", SITE, 4),
               ("six", "1.16.0", "/usr/lib/python3/dist-packages", 1))
    problems, _ = unlocked_distributions(_spec(), "linux/amd64", doc, LAYERS)
    assert problems == [
        "requests==2.32.0 is not in the lock (usr/local/lib/python3.11/dist-packages/"
        "requests-2.32.0.dist-info/METADATA, layer 5 of 5)",
        "numpy==2.2.0 is not in the lock (usr/local/lib/python3.11/dist-packages/"
        "numpy-2.2.0.dist-info/METADATA, layer 5 of 5)",
    ]


def test_a_locked_one_the_base_already_had_does_not_move_the_lock_layer() -> None:
    """pip leaves a requirement the base satisfies where it is: the lock's layer is the one
    holding most locked distributions, so the base's layer stays out of the check."""
    doc = _doc(("numpy", "2.1.0", SITE, 0), ("torch-npu", "2.6.0", SITE, 3),
               ("torch", "2.6.0", SITE, 3), ("pip", "23.0.1", SITE, 0))
    spec = dataclasses.replace(_spec(), python_locked=(("amd64", (
        "numpy==2.1.0", "torch_npu==2.6.0", "torch==2.6.0")),))
    problems, compared = unlocked_distributions(spec, "linux/amd64", doc, LAYERS)
    assert problems == [] and "from layer 4 of 5 on" in compared


def test_without_layer_ids_nothing_is_compared_and_it_says_so() -> None:
    problems, compared = unlocked_distributions(_spec(), "linux/amd64", _doc(*GOOD), [])
    assert problems == [] and compared.startswith("not compared")
