"""`cannery host-check` against a real registry (docker-registry on 127.0.0.1, plain HTTP:
loopback only) and stand-in host trees: the driver and firmware version.info files as the
Ascend installers lay them out under a directory given as --root. The image's labels are the
ones `cannery plan` gives a catalog image (so the table, the labels and the check are tested
together). `npu-smi` is a stand-in script on PATH: the real one needs an NPU."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from cannery.catalog.load import load_catalog
from cannery.lock import Lock
from cannery.plan import plan_image
from tests.catalogs import tiny
from tests.services.registry import LocalRegistry, push_index

# 8.2.RC1 on 910b: driver ≥ 25.0.rc1 and firmware ≥ 7.7.0.1.231 (Ascend/docs package_info.js)
NEEDS = {"driver": "25.0.rc1", "firmware": "7.7.0.1.231"}


def _labels(tmp_path: Path, version: str, extra: str = "") -> dict[str, str]:
    text = tiny("fam", "registry.example.com/fam/images", "registry.example.com/base:1",
                "t-{chip}").replace('"9.1.0"', f'"{version}"')
    path = tmp_path / f"{version}.toml"
    path.write_text(text + extra)
    spec = plan_image(load_catalog(path).catalog, "one", Lock())
    return {k: v for k, v in spec.fact_labels() if v is not None}


@pytest.fixture(scope="module")
def images(registry: LocalRegistry, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("hostcheck")
    labels = _labels(tmp, "8.2.RC1")
    assert labels["io.cannery.driver.min"] == NEEDS["driver"]  # what the cases below assume
    assert labels["io.cannery.firmware.min"] == NEEDS["firmware"]
    push_index(registry.url, "hc/cann", "8.2.rc1-910b", "hc", labels=labels)
    push_index(registry.url, "hc/cann", "9.9.0-910b", "hc", labels=_labels(tmp, "9.9.0"))
    push_index(registry.url, "hc/os", "22.04", "hc")
    return {"cann": f"{registry.host}/hc/cann:8.2.rc1-910b",
            "unknown": f"{registry.host}/hc/cann:9.9.0-910b",
            "os": f"{registry.host}/hc/os:22.04"}


def host_tree(root: Path, driver: str | None, firmware: str | None = None) -> Path:
    """The files the driver and firmware installers write, as they write them."""
    if driver is not None:
        d = root / "usr/local/Ascend/driver"
        d.mkdir(parents=True)
        (d / "version.info").write_text(
            f"Version={driver}\nascendhal_version=7.35.23\naicpu_version=1.0\n"
            f"package_version={driver}\ncompatible_version_fw=[7.0.0,7.99.99]\n")
    if firmware is not None:
        f = root / "usr/local/Ascend/firmware"
        f.mkdir(parents=True)
        (f / "version.info").write_text(f"Version={firmware}\nfirmware_version=1.0\n")
    return root


def _check(cli, images: dict[str, str], root: Path, *args: str, which: str = "cann"):  # type: ignore[no-untyped-def]
    return cli("host-check", images[which], "--root", str(root), "--platform", "linux/amd64",
               *args)


@pytest.mark.parametrize(
    "driver", ["25.0.rc1", "25.0.RC1", "25.0.RC1.b030", "25.0.rc1.1", "25.0.0", "26.0.rc1"])
def test_runs_with_each_form_of_a_new_enough_driver(cli, images, tmp_path, driver) -> None:  # type: ignore[no-untyped-def]
    root = host_tree(tmp_path, driver, "7.7.0.1.231")
    r = _check(cli, images, root, "--chip", "910b")
    assert r.code == 0, r.err
    assert r.out.strip() == f"{images['cann']}: runs"


@pytest.mark.parametrize("driver", ["24.1.rc3", "24.1.RC2", "25.0.T1", "23.0.3", "6.0.rc1.2"])
def test_driver_too_old(cli, images, tmp_path, driver) -> None:  # type: ignore[no-untyped-def]
    root = host_tree(tmp_path, driver, "7.7.0.1.231")
    r = _check(cli, images, root, "--chip", "910b")
    assert r.code == 1
    assert (f"{images['cann']}: cannot run: needs driver ≥ 25.0.rc1, this host has {driver} "
            f"({root}/usr/local/Ascend/driver/version.info)") in r.out


def test_firmware_too_old(cli, images, tmp_path) -> None:  # type: ignore[no-untyped-def]
    root = host_tree(tmp_path, "25.0.rc1", "7.3.0.1.231")
    r = _check(cli, images, root, "--chip", "910b")
    assert r.code == 1
    assert "needs firmware ≥ 7.7.0.1.231, this host has 7.3.0.1.231" in r.out
    assert "driver" not in r.out.split("cannot run:")[1]  # the driver is new enough


def test_chip_not_supported(cli, images, tmp_path) -> None:  # type: ignore[no-untyped-def]
    root = host_tree(tmp_path, "26.0.rc1", "7.7.0.1.231")
    r = _check(cli, images, root, "--chip", "a3")
    assert r.code == 1
    assert "cannot run: built for chip 910b, this host has a3 (--chip)" in r.out
    # the chip as npu-smi prints it, or a SoC name, is the same chip
    for same in ("910B", "ascend910b3"):
        assert _check(cli, images, root, "--chip", same).code == 0, same


def test_every_fault_at_once_and_as_json(cli, images, tmp_path) -> None:  # type: ignore[no-untyped-def]
    root = host_tree(tmp_path, "24.1.rc3", "7.3.0.1.231")
    r = _check(cli, images, root, "--chip", "310p", "--json")
    assert r.code == 1
    data = json.loads(r.out)
    assert data["host"] == {"driver": "24.1.rc3", "firmware": "7.3.0.1.231", "chip": "310p",
                            "platform": "linux/amd64"}
    (verdict,) = data["images"]
    assert verdict["runs"] is False and len(verdict["reasons"]) == 3


def test_no_driver_is_exit_2_before_any_registry_is_asked(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    r = cli("host-check", "127.0.0.1:9/never/asked:1", "--root", str(tmp_path))
    assert r.code == 2
    assert r.err.strip() == (
        f"cannery: error: this host has no NPU driver: no {tmp_path}/usr/local/Ascend/driver/"
        "version.info")


def test_what_cannot_be_compared_is_said_not_guessed(cli, images, tmp_path) -> None:  # type: ignore[no-untyped-def]
    root = host_tree(tmp_path, "26.0.rc1")  # no firmware file; no chip given
    r = _check(cli, images, root)
    assert r.code == 0
    assert r.out.strip() == (
        f"{images['cann']}: runs (firmware not checked: no {root}/usr/local/Ascend/firmware/"
        "version.info on this host; chip not checked: give --chip)")
    r = _check(cli, images, root, "--chip", "910b", which="unknown")
    assert "driver not checked: no source gives CANN 9.9.0's oldest driver" in r.out
    r = _check(cli, images, root, which="os")
    assert r.code == 0 and "no CANN toolkit in the image" in r.out


def test_a_malformed_version_file_is_named(cli, images, tmp_path) -> None:  # type: ignore[no-untyped-def]
    root = host_tree(tmp_path, "twenty-five")
    r = _check(cli, images, root)
    assert r.code == 2
    assert f"{root}/usr/local/Ascend/driver/version.info:1: Version: not a driver" in r.err


def test_npu_smi_gives_driver_and_chip_on_this_host(cli, images, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """No --root: the files under / (absent on this machine) and a stand-in npu-smi."""
    if Path("/usr/local/Ascend/driver/version.info").exists():
        pytest.skip("this machine has a real NPU driver")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "npu-smi"
    smi.write_text(
        "#!/bin/sh\ncat <<'EOF'\n"
        "+------------------------------------------------------------------------------+\n"
        "| npu-smi 24.1.rc2                 Version: 24.1.rc2                            |\n"
        "+---------------------------+---------------+----------------------------------+\n"
        "| NPU   Name                | Health        | Power(W)    Temp(C)              |\n"
        "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)     |\n"
        "+===========================+===============+==================================+\n"
        "| 0     310P3               | OK            | 93.6        40                   |\n"
        "EOF\n")
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    r = cli("host-check", images["cann"], "--platform", "linux/amd64")
    assert r.code == 1
    assert "needs driver ≥ 25.0.rc1, this host has 24.1.rc2 (npu-smi info)" in r.out
    assert "built for chip 910b, this host has 310p (npu-smi info (310P3))" in r.out


def test_a_platform_the_index_lacks_is_named(cli, images, tmp_path) -> None:  # type: ignore[no-untyped-def]
    root = host_tree(tmp_path, "26.0.rc1")
    r = cli("host-check", images["cann"], "--root", str(root), "--platform", "linux/s390x")
    assert r.code == 2
    assert "no linux/s390x image in its index (it has linux/amd64, linux/arm64" in r.err


def test_an_arm64_v8_index_entry_is_arm64_and_another_arch_is_never_judged(
    cli, registry, tmp_path  # type: ignore[no-untyped-def]
) -> None:
    """Indexes often spell arm64 as linux/arm64/v8; a one-platform image of another arch is
    exit 2, not "runs"."""
    from tests.services.registry import push_image

    labels = {"io.cannery.toolkit": "cann-9.1.0", "io.cannery.driver.min": "26.0.rc1"}
    push_image(registry.url, "hc/one", "amd64-only", "amd64", "x", labels=labels)
    root = host_tree(tmp_path, "26.0.rc1")
    r = cli("host-check", f"{registry.host}/hc/one:amd64-only", "--root", str(root),
            "--platform", "linux/arm64")
    assert r.code == 2 and "an image for linux/amd64, not linux/arm64" in r.err
    r = cli("host-check", f"{registry.host}/hc/one:amd64-only", "--root", str(root),
            "--platform", "linux/amd64")
    assert r.code == 0 and ": runs" in r.out
    r = cli("host-check", f"{registry.host}/hc/one:amd64-only", "--root", str(root),
            "--platform", "linux/arm64/v8")
    assert r.code == 2  # still amd64


def test_odd_bytes_from_npu_smi_are_not_a_crash(cli, images, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    if Path("/usr/local/Ascend/driver/version.info").exists():
        pytest.skip("this machine has a real NPU driver")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "npu-smi"
    smi.write_bytes(b"#!/bin/sh\n"
                    b"printf '| npu-smi 24.1.rc2  Version: 24.1.rc2 |\\n\\377\\376\\n'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    r = cli("host-check", images["cann"], "--platform", "linux/amd64")
    assert r.code == 1 and "this host has 24.1.rc2 (npu-smi info)" in r.out
