"""A stand-in image family shaped like verl's Ascend family: 2 toolkit versions x 2 chips x 2
framework pins = 8 images on one OS base, each built two ways: (a) one hand-written seed-style
Dockerfile per image (as verl keeps them), (b) one catalog rendered by cannery."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

from tests.e2e.buildenv import BuildWorld
from tests.services.standin import make_toolkit_run, toolkit_table, uv_version

from .recipes import SEED, _req
from .stack import TORCH, WHEELS, Size, Stack

TOOLKITS = {"cann-852": "8.5.2", "cann-853": "8.5.3"}
CHIPS = {"910b": "ascend910b1", "a3": "ascend910_9391"}
PINS = ("stable", "next")  # verl-stable and verl-next: two framework pins, bumped separately


@dataclass(frozen=True)
class Member:
    name: str
    toolkit: str  # catalog toolkit name
    version: str  # its CANN version
    chip: str
    soc: str
    pin: str  # stable | next


def members() -> list[Member]:
    out = []
    for (tk, version), (chip, soc), pin in itertools.product(
        TOOLKITS.items(), CHIPS.items(), PINS
    ):
        name = f"fam-{version.replace('.', '')}-{chip}-{pin}"
        out.append(Member(name, tk, version, chip, soc, pin))
    return out


def add_toolkits(world: BuildWorld, size: Size) -> None:
    """The second toolkit version's installer (make_stack made 8.5.2's), amd64 only."""
    make_toolkit_run(
        world.files_root / "Ascend-cann-toolkit_8.5.3_linux-x86_64.run", "8.5.3", "amd64",
        filler_bytes=size.toolkit_mb << 20,
    )


def seed_dockerfile(m: Member, stack: Stack, files: str, git: str, verl: str) -> str:
    """The seed's structure for one member: its SoC, its toolkit version, its framework pin."""
    text = SEED.format(
        base=stack.seed_base,
        index=f"{files}/wheels/simple/",
        wheels=" ".join(_req(n, v) for n, v in WHEELS),
        files=files,
        torch=_req(*TORCH),
        git=git,
        verl=verl,
    )
    text = text.replace('ARG SOC_VERSION="ascend910b1"', f'ARG SOC_VERSION="{m.soc}"')
    return text.replace("toolkit_8.5.2_", f"toolkit_{m.version}_")


def write_seed_family(
    where: Path, stack: Stack, files: str, git: str, pins: dict[str, str]
) -> dict[str, Path]:
    """One Dockerfile per member under ``where/NAME/``; ``pins``: stable|next → commit."""
    out = {}
    for m in members():
        d = where / m.name
        d.mkdir(parents=True, exist_ok=True)
        (d / "Dockerfile").write_text(seed_dockerfile(m, stack, files, git, pins[m.pin]))
        out[m.name] = d / "Dockerfile"
    return out


_HEAD = """\
[catalog]
name = "family"
source = "https://example.com/cannery-bench-family"
registry = "local"
python_index = "{index}"

[registries.local]
repository = "{push_host}/bench/{repo}"

# The bench runs no CI: an action pinned by SHA stands for CI's install of cannery, so `cannery
# lock` does not resolve cannery itself from the bench's index (which serves only the stack).
[ci]
install_action = "example/setup-cannery@0123456789abcdef0123456789abcdef01234567"

{bases}
{toolkits}
[components.pydeps]
pip = {wheels}

[components.torch]
pip = ["{torch}"]

[components.transformers]
git = "{git}/tfm.git"
ref = "v4.0"
pip_args = ["--no-build-isolation"]

[components.ascendops]
git = "{git}/ascendops.git"
ref = "v0.1.0"
pip_args = ["--no-build-isolation"]
toolkit_build = true

[components.verl-stable]
git = "{git}/verl.git"
ref = "{stable}"
pip_args = ["--no-build-isolation"]

[components.verl-next]
git = "{git}/verl.git"
ref = "{next}"
pip_args = ["--no-build-isolation"]
"""

_BASE = """\
[bases.os-{chip}]
image = "{base}"
python = "3.11"
os = "debian"
os_version = "12"
chip = "{chip}"
toolkit_version = "8.5.1"
"""

_IMAGE = """\
[images.{name}]
base = "os-{chip}"
toolkit = "{toolkit}"
soc = "{soc}"
recipe = "bench"
platforms = ["linux/amd64"]
tag = "{name}"
pip_tools = ["uv=={uv}"]
installer = "uv"
components = ["pydeps", "torch", "transformers", "ascendops", "verl-{pin}"]
"""


def catalog(world: BuildWorld, repo: str, pins: dict[str, str]) -> str:
    """The family as one catalog: both chips' bases are the same OS image (one digest); each
    image installs its components with uv (``installer``), as the build benchmark's (b)."""
    files = world.files.url
    toolkits = "\n".join(
        toolkit_table(name, files).replace('version = "8.5.2"', f'version = "{version}"')
        for name, version in TOOLKITS.items()
    )
    head = _HEAD.format(
        index=f"{files}/wheels/simple/",
        push_host=world.push_registry.host,
        repo=repo,
        bases="\n".join(_BASE.format(chip=chip, base=world.base) for chip in CHIPS),
        toolkits=toolkits,
        wheels="[" + ", ".join(f'"{_req(n, v)}"' for n, v in WHEELS) + "]",
        torch=_req(*TORCH),
        git=world.git.url,
        stable=pins["stable"],
        next=pins["next"],
    )
    images = "\n".join(
        _IMAGE.format(name=m.name, chip=m.chip, toolkit=m.toolkit, soc=m.soc, pin=m.pin,
                      uv=uv_version())
        for m in members()
    )
    return head + "\n" + images
