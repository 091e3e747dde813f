"""Will an image run on this node? The node's NPU driver, firmware and chip, read from the files
the driver installs (or ``npu-smi info``), against what the image's labels say it needs
(catalog/hosts.py writes them)."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from cannery.catalog.hosts import CHIPS_LABEL, DRIVER_LABEL, FIRMWARE_LABEL
from cannery.errors import InputError
from cannery.knowledge import soc_chips
from cannery.util.bounded import NotRegularFile, OverLimit, read_regular_file
from cannery.util.hdkversion import BadVersion, at_least, version_key

DRIVER_INFO = "usr/local/Ascend/driver/version.info"
FIRMWARE_INFO = "usr/local/Ascend/firmware/version.info"
TOOLKIT_LABEL = "io.cannery.toolkit"
NPU_SMI_TIMEOUT = 30.0


class NoDriver(InputError):
    """The node has no NPU driver to compare with (exit status 2)."""


@dataclass(frozen=True)
class Fact:
    """One thing known of the node, and where it was read."""

    value: str
    source: str


@dataclass(frozen=True)
class Host:
    driver: Fact
    firmware: Fact | None
    chip: Fact | None
    chip_unknown: str = ""  # why the chip is not known
    firmware_file: str = "/" + FIRMWARE_INFO  # where the firmware's version was looked for


@dataclass
class Verdict:
    """``runs`` is False when a need is not met; ``unchecked`` lists needs the node's facts
    could not be compared with (each with why)."""

    image: str
    runs: bool = True
    reasons: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)

    def line(self) -> str:
        if not self.runs:
            return f"{self.image}: cannot run: " + "; ".join(self.reasons)
        tail = f" ({'; '.join(self.unchecked)})" if self.unchecked else ""
        return f"{self.image}: runs{tail}"

    def as_json(self) -> dict[str, object]:
        return {"image": self.image, "runs": self.runs, "reasons": self.reasons,
                "unchecked": self.unchecked}


def _info_version(root: Path, rel: str) -> Fact | None:
    """``Version=`` of a version.info file (the driver and firmware installers write one), or
    None when the file is absent. A file that is there but unreadable is exit 2, named."""
    path = root / rel
    try:
        text = read_regular_file(path, limit=1 << 16).decode("utf-8", "replace")
    except FileNotFoundError:
        return None
    except (NotRegularFile, OverLimit) as exc:
        raise InputError(exc.message) from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    for n, line in enumerate(text.splitlines(), 1):
        key, sep, value = line.partition("=")
        if sep and key.strip().lower() == "version":
            value = value.strip()
            try:
                version_key(value)
            except BadVersion as exc:
                raise InputError(f"{path}:{n}: Version: {exc}") from None
            return Fact(value, f"{path}")
    raise InputError(f"{path}: no Version= line")


# `npu-smi info`: "| npu-smi 24.1.rc2     Version: 24.1.rc2 |", then a row per NPU whose
# first cells are its index and its name ("| 0     910B3     | OK ...").
_SMI_VERSION = re.compile(r"npu-smi\s+\S+\s+Version:\s*(\S+)")
_SMI_NPU = re.compile(r"^\|\s*\d+\s+(?:Ascend)?([0-9A-Za-z_]+)\s+\|\s*\S")


def _npu_smi() -> tuple[Fact | None, Fact | None, list[str]]:
    """Driver version and chip from ``npu-smi info``, when it is on PATH."""
    exe = shutil.which("npu-smi")
    if exe is None:
        return None, None, []
    try:
        done = subprocess.run([exe, "info"], capture_output=True, text=True, check=False,
                              timeout=NPU_SMI_TIMEOUT, encoding="utf-8", errors="replace")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, None, [f"npu-smi info failed: {exc}"]
    if done.returncode != 0:
        return None, None, [f"npu-smi info exited {done.returncode}"]
    driver = chip = None
    notes: list[str] = []
    for line in done.stdout.splitlines():
        m = _SMI_VERSION.search(line)
        if m and driver is None:
            try:
                version_key(m.group(1))
                driver = Fact(m.group(1), "npu-smi info")
            except BadVersion as exc:
                notes.append(f"npu-smi info: {exc}")
            continue
        m = _SMI_NPU.match(line)
        if m and chip is None:
            name = m.group(1)
            token = soc_chips().get(f"ascend{name.lower()}")
            if token is None:
                notes.append(f"npu-smi names the NPU {name!r}, no SoC cannery knows "
                             "(give --chip)")
            else:
                chip = Fact(token, f"npu-smi info ({name})")
    return driver, chip, notes


def read_host(root: Path | None, chip: str | None) -> Host:
    """The node's facts: under ``root`` (a mounted filesystem) only its files; with no root,
    the files under / and, when on PATH, ``npu-smi info``. ``chip`` (--chip) wins."""
    base = root if root is not None else Path("/")
    driver = _info_version(base, DRIVER_INFO)
    firmware = _info_version(base, FIRMWARE_INFO)
    smi_driver = smi_chip = None
    notes: list[str] = []
    if root is None:
        smi_driver, smi_chip, notes = _npu_smi()
    driver = driver or smi_driver
    if driver is None:
        where = f"no {base / DRIVER_INFO}" + ("" if root is not None else " and no npu-smi")
        raise NoDriver(f"this host has no NPU driver: {where}")
    if chip:  # 910B and a SoC name (ascend910b3) say the same chip as 910b
        chip = soc_chips().get(chip.lower(), chip.lower())
    found = Fact(chip, "--chip") if chip else smi_chip
    why = "; ".join(notes) or ("give --chip" if root is not None
                               else "no npu-smi on PATH; give --chip")
    return Host(driver, firmware, found, "" if found else why, str(base / FIRMWARE_INFO))


def judge(image: str, labels: dict[str, str], host: Host) -> Verdict:
    """Each need the image's labels state, against the node."""
    v = Verdict(image)
    if TOOLKIT_LABEL not in labels:
        v.unchecked.append("no CANN toolkit in the image: it needs no particular driver")
        return v
    cann = labels[TOOLKIT_LABEL].removeprefix("cann-")
    for label, fact, what in ((DRIVER_LABEL, host.driver, "driver"),
                              (FIRMWARE_LABEL, host.firmware, "firmware")):
        need = labels.get(label)
        if need is None:
            v.unchecked.append(f"{what} not checked: no source gives CANN {cann}'s oldest {what}")
            continue
        if fact is None:
            v.unchecked.append(f"{what} not checked: no {host.firmware_file} on this host")
            continue
        try:
            ok = at_least(fact.value, need)
        except BadVersion as exc:
            v.runs = False
            v.reasons.append(f"label {label}: {exc}")
            continue
        if not ok:
            v.runs = False
            v.reasons.append(f"needs {what} ≥ {need}, this host has {fact.value} ({fact.source})")
    chips = [c for c in labels.get(CHIPS_LABEL, "").split(",") if c]
    if not chips:
        v.unchecked.append(f"chip not checked: the image names no chip (label {CHIPS_LABEL})")
    elif host.chip is None:
        v.unchecked.append(f"chip not checked: {host.chip_unknown}")
    elif host.chip.value not in chips:
        v.runs = False
        v.reasons.append(f"built for chip {', '.join(chips)}, this host has {host.chip.value} "
                         f"({host.chip.source})")
    return v
