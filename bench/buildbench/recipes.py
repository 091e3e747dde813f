"""The two ways to build the stand-in stack: (a) a Dockerfile written by hand in the seed's
structure, and (b) a catalog that `cannery render dockerfile` turns into one."""

from __future__ import annotations

from tests.services.standin import toolkit_table, uv_version

from .stack import TORCH, WHEELS, Stack


def _req(name: str, version: str) -> str:
    return f"{name.replace('_', '-')}=={version}"


# (a) The seed's structure (see /work/shared/seed): FROM a CANN base that already ships a
# toolkit and install the next one over it, `source` the env inside a RUN (lost afterwards),
# full clones then checkout, left in the image, a global MAX_JOBS=1 throttle before the compile,
# torch re-pinned after the compile, pip's cache kept. Deviations, so it runs here: `.` for
# `source` (the RUN shell is dash), the local index through PIP_INDEX_URL, no apt-get (no
# Debian mirror inside a build; the base has gcc and git already), and TLS verified (the
# seed's --no-check-certificate is a finding of its own, not a speed question).
SEED = """\
FROM {base}

ARG SOC_VERSION="ascend910b1"
ENV PIP_INDEX_URL={index}

RUN python3 -m pip install --upgrade {wheels}

RUN set -e && \\
    cd /tmp && \\
    ARCH=$(uname -m) && \\
    curl -fsSLO {files}/Ascend-cann-toolkit_8.5.2_linux-$ARCH.run && \\
    bash Ascend-cann-toolkit_8.5.2_linux-$ARCH.run --quiet --install --install-for-all && \\
    rm -f Ascend-cann-toolkit_8.5.2_linux-$ARCH.run && \\
    . /usr/local/Ascend/ascend-toolkit/set_env.sh && \\
    rm -rf /tmp/*

RUN python3 -m pip install {torch}

RUN git clone {git}/tfm.git && cd tfm && git checkout v4.0 && cd .. && \\
    git clone {git}/ascendops.git && cd ascendops && git checkout v0.1.0

ENV MAX_JOBS=1 \\
    MAKEFLAGS="-j1" \\
    CMAKE_BUILD_PARALLEL_LEVEL=1

RUN python3 -m pip install --no-build-isolation ./tfm

RUN . /usr/local/Ascend/ascend-toolkit/set_env.sh && \\
    python3 -m pip install --no-build-isolation ./ascendops

RUN python3 -m pip install --force-reinstall --no-deps {torch}

ARG VERL_COMMIT={verl}
RUN git clone {git}/verl.git && cd verl && git checkout $VERL_COMMIT && \\
    python3 -m pip install --no-build-isolation -e .
"""

# (b) The same stack as a catalog: same base OS, same toolkit, same packages and pins.
CATALOG = """\
[catalog]
name = "bench"
source = "https://example.com/cannery-bench"
registry = "local"
python_index = "{index}"

[registries.local]
repository = "{push_host}/bench/{repo}"

[bases.os]
image = "{base}"
python = "3.11"
os = "debian"
os_version = "12"
chip = "910b"
toolkit_version = "8.5.1"

{toolkit_table}
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

[components.verl]
git = "{git}/verl.git"
ref = "{verl}"
pip_args = ["--no-build-isolation"]

[images.rendered]
base = "os"
toolkit = "cann-852"
soc = "ascend910b1"
recipe = "bench"
platforms = ["linux/amd64"]
{installer}tag = "bench-{{cann}}-py{{python}}"
components = ["pydeps", "torch", "transformers", "ascendops", "verl"]
smoke_imports = ["cann_standin", "torch_standin", "tfm_standin", "ascendops", "verl_standin"]
"""


def seed_dockerfile(stack: Stack, base_files: str, git: str, verl: str) -> str:
    return SEED.format(
        base=stack.seed_base,
        index=f"{base_files}/wheels/simple/",
        wheels=" ".join(_req(n, v) for n, v in WHEELS),
        files=base_files,
        torch=_req(*TORCH),
        git=git,
        verl=verl,
    )


def catalog(
    base: str, push_host: str, repo: str, files: str, git: str, verl: str, installer: str = "uv"
) -> str:
    """(b)'s catalog; ``installer`` "uv" (uv pinned in pip_tools, installed by the locked
    step, then installing the git components) or "pip" (pip installs everything)."""
    wheels = "[" + ", ".join(f'"{_req(n, v)}"' for n, v in WHEELS) + "]"
    return CATALOG.format(
        index=f"{files}/wheels/simple/",
        push_host=push_host,
        repo=repo,
        base=base,
        toolkit_table=toolkit_table("cann-852", files),
        files=files,
        wheels=wheels,
        torch=_req(*TORCH),
        git=git,
        verl=verl,
        installer=(f'pip_tools = ["uv=={uv_version()}"]\ninstaller = "uv"\n'
                   if installer == "uv" else ""),
    )
