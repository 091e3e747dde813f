#!/usr/bin/env bash
# The fully local demo: `bash scripts/demo.sh [REGISTRY/REPO [MIRROR/REPO[#docker]...]]`.
# Installs what it needs (system packages, arm64 emulation, the stand-in base root filesystems,
# a venv), then builds the stand-in image for linux/amd64 and linux/arm64, pushes it (to a
# registry it starts on 127.0.0.1 when none is given), copies it by digest to each mirror
# (with no arguments: two it starts, one of them behind an SWR stand-in that needs Docker media
# types; `#docker` marks such a mirror), verifies every registry, prints the digests, and shows
# the image's size layer by layer (`cannery size`).
# Run it again: nothing changed, so nothing is built, copied or moved.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-system.sh
export BUILDAH_ISOLATION="${BUILDAH_ISOLATION:-chroot}"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q -e '.[sbom]'  # syft for the SBOM, where it ships
exec .venv/bin/python scripts/demo.py "$@"
