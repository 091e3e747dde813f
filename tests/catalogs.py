"""A small valid catalog for tests, and helpers to break it one way at a time."""

from __future__ import annotations

MINIMAL = """\
[catalog]
name = "test"
source = "https://example.com/test"
registry = "local"
python_index = "{index}"

[registries.local]
repository = "{registry}/test/images"

[bases.b910]
image = "{base_image}"
python = "3.11"
os = "ubuntu"
os_version = "22.04"
chip = "910b"
toolkit_version = "8.5.1"

[envs.cann]
ASCEND_TOOLKIT_HOME = "/usr/local/Ascend/cann-{{version}}"
ASCEND_HOME_PATH = "${{ASCEND_TOOLKIT_HOME}}"
LD_LIBRARY_PATH = ["${{ASCEND_TOOLKIT_HOME}}/lib64"]

[toolkits.cann852]
version = "8.5.2"
env = "cann"
devlib = "/usr/local/Ascend/cann-{{version}}/devlib"

[[toolkits.cann852.packages]]
name = "toolkit"
url = "{files}/Ascend-cann-toolkit_{{version}}_linux-{{uname_arch}}.run"

[components.torch]
pip = ["torch==2.9.0", "torch_npu==2.9.0"]
pin = true

[components.vllm]
git = "{git}"
ref = "v0.18.0"
version = "v0.18.0"
install = "editable"

[components.vllm-ascend]
git = "{git}"
ref = "main"
version = "v0.18.0"
toolkit_build = true
jobs = {{ limit = 1, reason = "OOM" }}

[images.one]
base = "b910"
toolkit = "cann852"
soc = "ascend910b1"
recipe = "r"
platforms = ["linux/amd64", "linux/arm64"]
tag = "t-{{cann}}-{{chip}}-py{{python}}-{{recipe}}"
components = ["torch", "vllm", "vllm-ascend"]
acknowledge = ["compat-cann", "compat-torch-npu"]

[images.two]
extends = "one"
recipe = "s"
"""


def minimal(
    registry: str = "registry.example.com",
    base_image: str | None = None,
    files: str = "https://files.example.com/cann",
    git: str = "https://git.example.com/v.git",
    index: str = "https://127.0.0.1:9/simple",  # the discard port: tests pass their own index
) -> str:
    return MINIMAL.format(
        registry=registry,
        base_image=base_image or f"{registry}/cann:8.5.1-910b-ubuntu22.04-py3.11",
        files=files,
        git=git,
        index=index,
    )


def pyproject(name: str, version: str, requires: tuple[str, ...] = ()) -> str:
    """A pyproject.toml with static metadata (uv reads it without building)."""
    deps = ", ".join(f'"{r}"' for r in requires)
    return (
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "{name}"\nversion = "{version}"\ndependencies = [{deps}]\n'
    )


def line_of(text: str, needle: str) -> int:
    """1-based line of the first line containing ``needle``."""
    for no, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return no
    raise AssertionError(f"{needle!r} not in text")


# Stand-in pins of `[ci] install` for tests that render a workflow: `cannery render` writes
# the workflow only when the lock holds hashed pins of what CI installs cannery from.
CI_PINS = (
    "cannery==0.1.0 --hash=sha256:" + "c" * 64,
    "pydantic==2.11.0 --hash=sha256:" + "d" * 64,
)


def ci_entries(cat: object, pins: tuple[str, ...] = CI_PINS) -> dict[str, object]:
    """The lock's ``ci`` table for ``cat`` (a Catalog): ``pins`` for every architecture,
    resolved from the catalog's own request (so not stale)."""
    from cannery.lock import PythonEntry
    from cannery.pydeps import ci_requests

    return {
        r.arch: PythonEntry(inputs=r.digest(), requirements=list(pins),
                            resolved_at="2026-01-01T00:00:00+00:00")
        for r in ci_requests(cat)  # type: ignore[arg-type]
    }


def write_ci_lock(catalog_path: object) -> None:
    """Write (or extend) the lock beside ``catalog_path`` with stand-in ``[ci]`` pins."""
    from pathlib import Path

    from cannery.catalog.load import load_catalog
    from cannery.lock import dump_lock, read_lock

    path = Path(str(catalog_path))
    lock_path = path.parent / "cannery.lock"
    lock = read_lock(lock_path)
    entries = ci_entries(load_catalog(path).catalog)
    lock_path.write_text(dump_lock(lock.model_copy(update={"ci": entries})))
