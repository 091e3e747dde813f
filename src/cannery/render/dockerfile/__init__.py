"""ImageSpec → one Dockerfile for all of the image's platforms.

What the output guarantees (each a defect found in review of hand-written images):
- every download is fetched over verified TLS and checked with ``sha256sum -c`` before use;
- an input the lock does not pin (a base without digest, a git ref without commit, a download
  without sha256) stops the build at its own step, before anything uses it;
- Python dependencies locked per platform are installed with ``--require-hashes --no-deps``,
  and nothing after that step fetches a dependency; without a lock entry the file says
  UNPINNED at the top;
- the toolkit env is persisted with ENV from the catalog table, with no empty path element and
  no build-only ``devlib``, so ``docker run IMAGE python`` sees it with no shell in between;
  an image without a toolkit, or whose toolkit the host mounts, gets no toolkit ENV or label;
- the step that installs the toolkit sources its env scripts and stops the build, naming each
  variable, where the ENV lacks or differs from what they set;
- builder stages (a Python source build, the catalog's stages) come before the final stage:
  their build-only packages and steps stay there, only their outputs are copied in;
- a job limit, SOC_VERSION and a component's build env live only in that component's RUN;
- git sources are fetched at their locked commit with depth 1, and leave no ``.git`` behind;
- torch pins are installed first and constrain every later pip call;
- no mirror, index or trusted-host config is left in the image: build_mirrors are used by the
  package and pip steps for that RUN only;
- apt or dnf (from the base's os) installs only what the base lacks and leaves no lists,
  caches or logs;
- layers run from least to most often changed, so bumping the framework rebuilds the tail only;
  ENTRYPOINT and CMD come first and one LABEL last, so that tail is the changed steps and the
  LABEL.

One module per stage kind: fragments.py (the shell every RUN is made of), packages.py (system
packages), stages.py (stage heads, the catalog's builder stages), python.py (the Python builder
stage, the locked Python dependencies), toolkit.py (the toolkit's ENV, installers and env
check), components.py, steps.py (placed downloads and steps), settings.py (the running
container's settings) and image.py (the file, in its layer order); dockerignore.py writes the
.dockerignore of checkout images.
"""

from __future__ import annotations

# The names the rest of cannery and the tests import from here (including two private
# helpers the env-table tests call directly), so none of them depends on the layout inside.
from cannery.render.dockerfile.dockerignore import render_dockerignore
from cannery.render.dockerfile.fragments import ARCH_VAR, _finish
from cannery.render.dockerfile.image import render_dockerfile
from cannery.render.dockerfile.packages import DNF_STATE, MIRROR_DIR
from cannery.render.dockerfile.settings import runtime_env
from cannery.render.dockerfile.steps import run_step_text
from cannery.render.dockerfile.toolkit import (
    SEARCH_PATHS,
    _env_check,
    lacking_elements,
    toolkit_env,
)

__all__ = [
    "ARCH_VAR",
    "DNF_STATE",
    "MIRROR_DIR",
    "SEARCH_PATHS",
    "_env_check",
    "_finish",
    "lacking_elements",
    "render_dockerfile",
    "render_dockerignore",
    "run_step_text",
    "runtime_env",
    "toolkit_env",
]
