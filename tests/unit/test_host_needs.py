"""What a node needs, from the catalog to the labels: the built-in table (ascend.toml
``[[hosts]]``) gives an image its chips and oldest driver and firmware, an image's ``host``
table overrides them, a chip its CANN release is not published for is an error, and the
version order host-check compares with holds for every form the version files use."""

from __future__ import annotations

from pathlib import Path

import pytest

from cannery.catalog.hosts import releases
from cannery.catalog.load import load_catalog
from cannery.errors import CatalogError
from cannery.lock import Lock
from cannery.plan import plan_image
from cannery.util.hdkversion import BadVersion, at_least, version_key
from tests.catalogs import line_of, tiny


def _catalog(tmp_path: Path, version: str = "9.1.0", chip: str = "910b", extra: str = "") -> Path:
    text = tiny("fam", "registry.example.com/fam/images", "registry.example.com/base:1",
                "t-{chip}").replace('"9.1.0"', f'"{version}"').replace('"910b"', f'"{chip}"')
    path = tmp_path / "cannery.toml"
    path.write_text(text + extra)
    return path


def _host_provided(path: Path) -> None:
    """The catalog's toolkit, mounted from the host instead of installed."""
    text = path.read_text().replace('env = "e"\n', 'provided = "host"\n')
    text = text.replace('toolkit_version = "9.1.0"\n', "")
    env = '[envs.e]\nASCEND_TOOLKIT_HOME = "/usr/local/Ascend/cann-{version}"\n'
    path.write_text(text.replace(env, ""))


def _labels(path: Path) -> dict[str, str | None]:
    cat = load_catalog(path).catalog
    return dict(plan_image(cat, "one", Lock()).fact_labels())


@pytest.mark.parametrize(
    ("version", "chip", "driver", "firmware"),
    [
        ("8.2.RC1", "910b", "25.0.rc1", "7.7.0.1.231"),  # Ascend/docs package_info.js
        ("8.2.rc1", "310p", "25.0.rc1", "7.7.0.1.231"),  # versions match ignoring case
        ("7.0.1", "910b", "23.0.3", "7.1.0.5.220"),  # per-chip rows of one release
        ("7.0.1", "310p", "23.0.1", "7.1.0.4.220"),
        ("8.5.2", "910b", "25.5.0", None),  # verl's guide names no firmware
        ("8.2.RC1", "a3", None, None),  # published for a3; no source gives its driver
    ],
)
def test_the_table_gives_the_labels(
    tmp_path: Path, version: str, chip: str, driver: str | None, firmware: str | None
) -> None:
    labels = _labels(_catalog(tmp_path, version, chip))
    assert labels["io.cannery.chips"] == chip
    assert labels["io.cannery.driver.min"] == driver
    assert labels["io.cannery.firmware.min"] == firmware


def test_a_release_not_in_the_table_claims_no_driver(tmp_path: Path) -> None:
    labels = _labels(_catalog(tmp_path, "9.9.0"))
    assert labels["io.cannery.chips"] == "910b"
    assert labels["io.cannery.driver.min"] is None
    assert labels["io.cannery.firmware.min"] is None


def test_an_image_overrides_its_row_field_by_field(tmp_path: Path) -> None:
    extra = '[images.one.host]\nfirmware = "7.8.0.2.212"\nchips = ["910b", "a3"]\n'
    labels = _labels(_catalog(tmp_path, "8.2.RC1", extra=extra))
    assert labels["io.cannery.firmware.min"] == "7.8.0.2.212"
    assert labels["io.cannery.chips"] == "910b,a3"
    assert labels["io.cannery.driver.min"] == "25.0.rc1"  # not overridden: the table's


def test_a_host_provided_toolkit_claims_nothing(tmp_path: Path) -> None:
    path = _catalog(tmp_path)
    _host_provided(path)
    labels = _labels(path)
    assert labels["io.cannery.chips"] is None and labels["io.cannery.driver.min"] is None


def test_host_without_a_toolkit_in_the_image_is_an_error(tmp_path: Path) -> None:
    path = _catalog(tmp_path, extra='[images.one.host]\ndriver = "25.0.rc1"\n')
    _host_provided(path)
    with pytest.raises(CatalogError) as exc:
        load_catalog(path)
    line = line_of(path.read_text(), "[images.one.host]")
    assert f"cannery.toml:{line}: images.one.host: host has no effect" in str(exc.value)


def test_a_chip_the_release_is_not_published_for_is_an_error(tmp_path: Path) -> None:
    path = _catalog(tmp_path, "8.1.RC1", "950")
    with pytest.raises(CatalogError) as exc:
        load_catalog(path)
    msg = str(exc.value)
    line = line_of(path.read_text(), 'toolkit = "t"')
    assert f":{line}: images.one.toolkit: CANN 8.1.RC1 does not run on chip '950'" in msg
    assert "310p, 910b, a3" in msg
    # said on purpose, it is accepted and labelled as said
    path.write_text(path.read_text() + '[images.one.host]\nchips = ["950"]\n')
    assert _labels(path)["io.cannery.chips"] == "950"


def test_a_bad_version_in_host_is_refused_naming_the_field(tmp_path: Path) -> None:
    path = _catalog(tmp_path, extra='[images.one.host]\ndriver = "latest"\n')
    with pytest.raises(CatalogError) as exc:
        load_catalog(path)
    assert "images.one.host.driver" in str(exc.value)


def test_every_row_is_well_formed() -> None:
    for version, release in releases().items():
        assert release.chips, version
        for driver, firmware in release.per_chip.values():
            for v in (driver, firmware):
                if v is not None:
                    version_key(v)  # raises on a form host-check could not compare


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("24.1.rc2", "24.1.rc3"),
        ("24.1.rc3", "24.1.0"),  # the release after its release candidates
        ("23.0.rc3", "23.0.3"),
        ("25.0.rc1", "25.0.RC1.b030"),  # a build of RC1 is RC1 or newer, in any case
        ("25.0.RC1.b030", "25.0.rc1.1"),  # ... and older than the RC1.1 patch
        ("6.0.rc1", "6.0.rc1.2"),
        ("7.3.0.1.231", "7.7.0.1.231"),  # firmware: five numbers
        ("25.5.0", "26.0.rc1"),
        ("25.0.alpha1", "25.0.beta1"),
        ("25.0.beta1", "25.0.rc1"),
        ("24.1.rc3", "24.1.0.0"),  # trailing zeros past three are the same release
    ],
)
def test_version_order(older: str, newer: str) -> None:
    assert at_least(newer, older)
    assert not at_least(older, newer)
    assert at_least(older, older.upper())


@pytest.mark.parametrize("text", ["", "latest", "24.1.rc", "v24.1", "24..1"])
def test_not_a_version(text: str) -> None:
    with pytest.raises(BadVersion):
        version_key(text)


def test_trailing_zeros_name_the_same_release() -> None:
    assert at_least("24.1.0", "24.1.0.0") and at_least("24.1.0.0", "24.1.0")
