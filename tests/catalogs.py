"""A small valid catalog for tests, and helpers to break it one way at a time."""

from __future__ import annotations

import json
from typing import Any

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


def only_components(text: str, *keep: str, toolkit_build: bool = False) -> str:
    """``text`` (minimal()) with image one installing only ``keep``: the other components'
    tables are removed and, with no toolkit_build component left (``toolkit_build``: one of
    ``keep`` the text adds is one), so are what then has no effect (the toolkit's devlib, the
    image's soc, the acknowledged compatibility warnings): the loader refuses each of them."""
    import re

    for name in ("torch", "vllm", "vllm-ascend"):
        if name not in keep:
            table = rf"\[components\.{re.escape(name)}\]\n"
            text = re.sub(table + r"(?:[^\[\n][^\n]*\n|\n)*", "", text)
    text = text.replace('components = ["torch", "vllm", "vllm-ascend"]',
                        "components = [" + ", ".join(f'"{k}"' for k in keep) + "]")
    if "vllm-ascend" not in keep and not toolkit_build:
        text = re.sub(r'devlib = "[^"]*"\n', "", text)
        text = text.replace('soc = "ascend910b1"\n', "")
        text = text.replace('acknowledge = ["compat-cann", "compat-torch-npu"]\n', "")
    return text


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


TINY = """\
[catalog]
name = "{name}"
source = "https://example.com/{name}"
registry = "{registry}"

[registries.{registry}]
repository = "{repository}"

[bases.b]
image = "{base}"
python = "3.11"
os = "ubuntu"
os_version = "22.04"
chip = "910b"
toolkit_version = "9.1.0"

[envs.e]
ASCEND_TOOLKIT_HOME = "/usr/local/Ascend/cann-{{version}}"

[toolkits.t]
version = "9.1.0"
env = "e"

[images.one]
base = "b"
toolkit = "t"
platforms = [{platforms}]
tag = "{tag}"
"""


def tiny(
    name: str, repository: str, base: str, tag: str,
    platforms: tuple[str, ...] = ("linux/amd64", "linux/arm64"), registry: str = "local",
) -> str:
    """A catalog of one image, ``one``, with no components: the base image ``base``, pushed to
    ``repository`` (the registry ``registry``, the catalog's default) under ``tag`` (a tag
    template), for ``platforms``; for tests of what the build backends hand on and publish."""
    return TINY.format(
        name=name, registry=registry, repository=repository, base=base, tag=tag,
        platforms=", ".join(f'"{p}"' for p in platforms),
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


# What minimal() leaves out, so that every string field of every table is set at least once
# (tests/unit/test_catalog_strings.py walks them all).
EVERY_FIELD = """
[catalog]
version = "0.9.2"
mirrors = ["mirror"]

[budget]
compressed = "30GB"
layer = "10GB"

[registries.mirror]
repository = "mirror.example.com/test/images"
user_secret = "MIRROR_USER"
password_secret = "MIRROR_PASSWORD"
media_types = "docker"

[registries.local]
user_var = "LOCAL_USER"
password_secret = "LOCAL_PASSWORD"

[bases.b910-again]
extends = "b910"
os_version = "22.04"
package_manager = "apt"
chip = "x1"

[toolkits.cann852]
provided = "image"
layout = "cann"
env_scripts = ["/usr/local/Ascend/cann-8.5.2/set_env.sh"]
install_args = ["--quiet", "--install"]

[[toolkits.cann852.packages]]
name = "ops"
url = "https://files.example.com/cann/ops_{version}_{uname_arch}.run"
family = "A2"

[components.torch]
extra_index = { amd64 = "https://download.example.com/whl/cpu", arm64 = [
  "https://a.example.com/simple"] }

[components.vllm]
package = "vllm"
subdir = "python"
extras = ["all_npu"]
pyproject = "pyproject.npu.toml"
requirements = ["requirements/npu.txt"]
pip_args = ["--no-build-isolation"]
build_env = { VLLM_TARGET_DEVICE = "empty" }
dest = "/opt/src/vllm"

[components.wheel]
wheel = "https://files.example.com/w/x-1.0-{arch}.whl"
version = "1.0"

[components.local]
path = "."
version = "0.1"

[components.bundle]
wheel = "https://files.example.com/b/bundle-1.0.tar.gz"
bundle_wheels = ["npu-1.0*_{uname_arch}.whl"]

[components.vllm-again]
extends = "vllm"
ref = "v0.18.1"

[images.one]
original = "docker/one.Dockerfile"
components = ["torch", "vllm", "vllm-ascend", "wheel", "local", "bundle"]
labels.'org.example.owner' = "ml team"
labels.'org.opencontainers.image.version' = { value = "v1", override = true }
env = { APP_MODE = "serve", LD_LIBRARY_PATH = { prepend = ["/opt/lib"] }, PATH = { append = [
  "/opt/bin"] }, PYTHONPATH = { replace = ["/opt/py"] } }
workdir = "/workspace"
user = "app"
entrypoint = ["/bin/bash", "-lc"]
cmd = ["serve"]
aliases = ["latest-{recipe}"]
pip_tools = ["pip==25.1"]
installer = "pip"
smoke_imports = ["torch"]
packages = ["jq"]
revision_from = "vllm"

[[images.one.downloads]]
name = "tool"
url = "https://files.example.com/tool-{uname_arch}"
path = "/usr/local/bin/tool"
at = "before-toolkit"

[[images.one.downloads]]
name = "data"
url_secret = "DATA_URL"
path = "/opt/data"
unpack = true

[images.one.budget]
compressed = "20GB"
layer = "5 GB"

[images.one.host]
chips = ["910b"]
driver = "25.5.0"
firmware = "7.8.0.2.212"

[images.one.python]
version = "3.11.10"
install = "source"
url = "https://files.example.com/python/Python-{version}.tgz"
build_packages = ["gcc", "make"]

[images.three]
base = "b910-again"
recipe = "p"
components = ["vllm-again"]
platforms = ["linux/amd64"]
tag = "p-{recipe}-{chip}"
registry = "mirror"
mirrors = ["local"]
python = { version = "3.11.10", install = "packages", packages = ["python3.11"] }

# (in the small image: the loader lints the Dockerfile of an image with `run` steps)
[[images.three.stages]]
name = "tools"
base = "b910"  # (the image's is b910-again)
packages = ["gcc"]
outputs = ["/opt/tools"]
steps = [{ run = "mkdir -p /opt/tools" }]

[[images.three.steps]]
uninstall = ["triton"]

[[images.three.steps]]
alternatives = { name = "cc", link = "/usr/bin/cc", path = "/usr/bin/gcc", priority = 10 }

[[images.three.steps]]
symlink = { target = "/opt/tools", link = "/usr/local/tools" }

[[images.three.steps]]
run = "echo ready"
at = "before-components"

# A matrix: one image per word of `extra` but c, each with its own env; a's with a label too
[images.four]
extends = "three"
tag = "m-{matrix.extra}-{recipe}-{chip}"
matrix.name = "four-{matrix.extra}"
matrix.extra = [{ value = "a", env = { MODE = "a" } }, { value = "b", env = { MODE = "b" } }, "c"]
matrix.exclude = [{ extra = "c" }]
matrix.include = [{ extra = "a", labels = { "org.example.kind" = "a" } }]

[families.X1]
description = "a test family"
chip = "x1"
socs = ["x1soc"]

[compat]
source = "the test's own table"
date = "2026-01-01"

[[compat.rows]]
vllm_ascend = "v0.1.0"
vllm = "v0.1.0"
python = "3.11"
cann = "8.5.2"
torch = "2.9.0"
torch_npu = "2.9.0"

[ci]
runners = { "linux/amd64" = "ubuntu-latest", "linux/arm64" = "ubuntu-24.04-arm" }
branches = ["main"]
pr_label = "ci: images"
build_branches = ["dev/**"]
schedule = "0 3 * * 1"
release_tags = ["v*"]
install = "cannery==0.1"
environment = "image-registry"
python = "3.12"
workflow = ".github/workflows/images.yml"
dockerfiles = "docker"
bake = "docker-bake.json"
docs = "TAGS.md"
requirements = ".github/workflows/cannery-requirements.txt"
original = ".github/workflows/upstream.yml"

[build_mirrors]
packages = { "http://archive.ubuntu.com/ubuntu/" = "https://mirror.example.com/ubuntu/" }
python = { "https://127.0.0.1:9/simple/" = "https://pypi-mirror.example.com/simple/" }
"""


def every_field() -> str:
    """minimal() with every string field of every table set at least once (a deep merge of
    EVERY_FIELD into it: the tables are merged key by key, array tables appended)."""
    from cannery.util import toml

    doc = toml.loads(minimal())
    _merge(doc, toml.loads(EVERY_FIELD))
    return "\n".join(f"{toml_inline(k)} = {toml_inline(v)}" for k, v in doc.items()) + "\n"


def _merge(into: dict[str, Any], more: dict[str, Any]) -> None:
    for key, value in more.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        elif isinstance(value, list) and isinstance(into.get(key), list) and value and \
                isinstance(value[0], dict):
            into[key] = [*into[key], *value]
        else:
            into[key] = value


def toml_inline(value: Any) -> str:
    """Inline TOML for a JSON-like value (json.dumps strings are valid TOML basic strings)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_inline(v)}"
                               for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(toml_inline(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return json.dumps(value)
