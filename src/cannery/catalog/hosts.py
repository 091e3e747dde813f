"""What a node needs to run an image: the chips its CANN release runs on and the oldest NPU
driver and firmware Ascend pairs the release with (ascend.toml ``[[hosts]]``, each row with its
source), or what the image's own ``host`` table says instead."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from cannery.catalog.models import Catalog, HostOverride


@dataclass(frozen=True)
class HostNeeds:
    """An image's needs of the node: chips it runs on (empty: unknown), and the oldest driver
    and firmware (None: no source gives one)."""

    chips: tuple[str, ...]
    driver: str | None
    firmware: str | None

    def labels(self) -> tuple[tuple[str, str | None], ...]:
        return (
            (CHIPS_LABEL, ",".join(self.chips) or None),
            (DRIVER_LABEL, self.driver),
            (FIRMWARE_LABEL, self.firmware),
        )


CHIPS_LABEL = "io.cannery.chips"
DRIVER_LABEL = "io.cannery.driver.min"
FIRMWARE_LABEL = "io.cannery.firmware.min"


@dataclass(frozen=True)
class Release:
    """One CANN release in the table: the chips it runs on, and per chip (driver, firmware)."""

    chips: tuple[str, ...]
    per_chip: dict[str, tuple[str | None, str | None]]


@lru_cache(maxsize=1)
def releases() -> dict[str, Release]:
    """The built-in table by CANN version (lowercased), read from ascend.toml."""
    from cannery.knowledge import ascend_data

    rows = ascend_data().get("hosts", [])
    assert isinstance(rows, list)
    chips: dict[str, list[str]] = {}
    per_chip: dict[str, dict[str, tuple[str | None, str | None]]] = {}
    for row in rows:
        for version in row["cann"]:
            key = version.lower()
            for chip in row["chips"]:
                if chip not in chips.setdefault(key, []):
                    chips[key].append(chip)
                per_chip.setdefault(key, {})[chip] = (row.get("driver"), row.get("firmware"))
    return {v: Release(tuple(sorted(chips[v])), per_chip[v]) for v in chips}


def table_chips(version: str) -> tuple[str, ...] | None:
    """The chips the table says a CANN release runs on; None: the release is not in it."""
    release = releases().get(version.lower())
    return release.chips if release else None


def host_needs(cat: Catalog, image: str, chip: str | None) -> HostNeeds | None:
    """The image's needs, for an image with a CANN toolkit in it (one the host provides is the
    host's own business, and an OS image needs no driver): the table's row for its release
    and ``chip``, each field replaced by the image's ``host`` table where it sets one."""
    img = cat.images[image]
    tk = cat.toolkit_of(image)
    if tk is None or tk.provided != "image":
        return None
    release = releases().get(tk.version.lower())
    driver = firmware = None
    if release is not None and chip is not None and chip in release.per_chip:
        driver, firmware = release.per_chip[chip]
    chips: tuple[str, ...] = (chip,) if chip is not None else ()
    override: HostOverride | None = img.host
    if override is not None:
        chips = tuple(override.chips) if override.chips is not None else chips
        driver = override.driver if override.driver is not None else driver
        firmware = override.firmware if override.firmware is not None else firmware
    return HostNeeds(chips, driver, firmware)
