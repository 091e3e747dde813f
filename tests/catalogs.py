"""A small valid catalog for tests, and helpers to break it one way at a time."""

from __future__ import annotations

MINIMAL = """\
[catalog]
name = "test"
source = "https://example.com/test"
registry = "local"

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
) -> str:
    return MINIMAL.format(
        registry=registry,
        base_image=base_image or f"{registry}/cann:8.5.1-910b-ubuntu22.04-py3.11",
        files=files,
        git=git,
    )


def line_of(text: str, needle: str) -> int:
    """1-based line of the first line containing ``needle``."""
    for no, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return no
    raise AssertionError(f"{needle!r} not in text")
