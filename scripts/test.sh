#!/usr/bin/env bash
# Install everything the test suite needs (system packages, arm64 emulation, the stand-in base
# root filesystems, a venv with the test extras), then run lint, type checks and the whole
# suite. `.ci/run` calls exactly this. Every step is idempotent: a second run skips what is there.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup-system.sh
# A run takes up to about 7 GB under the temporary directory (registries, image storage);
# say so first rather than fail later on a full disk in the middle of a test.
free_kb=$(df -Pk "${TMPDIR:-/tmp}" | awk 'NR == 2 {print $4}')
if [ "${free_kb}" -lt $((10 * 1024 * 1024)) ]; then
    echo "scripts/test.sh: warning: $((free_kb / 1024 / 1024)) GB free under ${TMPDIR:-/tmp};" \
        "a test run takes up to about 7 GB there" >&2
fi
# No OCI runtime can set up cgroups in this kind of sandbox; buildah's chroot isolation works.
export BUILDAH_ISOLATION="${BUILDAH_ISOLATION:-chroot}"

# Debian's package starts a registry service on :5000; the tests start their own on free ports.
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'

.venv/bin/ruff check src tests bench scripts
.venv/bin/mypy
# The layering (.importlinter): arrows run catalog -> resolution -> render/builder -> commands
.venv/bin/lint-imports --no-cache
# The docs site: its generated reference is current, and every page and link builds.
.venv/bin/python scripts/gen_reference.py --check
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir "$(mktemp -d)"
# One worker per core, a test file whole on one worker: a file's e2e tests share the world its
# module fixtures build (registries, a buildah storage of its own). Most of an e2e test waits
# on qemu, a registry or a subprocess, so two workers on 2 cores took the suite from about 31
# to 18 minutes. At most 4: every worker holds worlds of its own on disk at the same time.
# A later -n in "$@" wins (-n 0 runs it in this process). The 15 slowest tests are printed at
# the end: where the run's time goes.
.venv/bin/python -m pytest -q -n auto --maxprocesses 4 --dist loadfile --durations=15 "$@"
