#!/usr/bin/env bash
# Re-resolve action-requirements.txt: what action.yml installs before cannery itself, every
# package pinned with the sha256 of each of its files on PyPI. cannery's dependencies
# (pyproject.toml) and the build backend that installs this checkout (setuptools), for every
# Python and platform the action may run on (--universal: markers where they differ).
set -euo pipefail
cd "$(dirname "$0")/.."
printf 'setuptools>=77\n' > "${TMPDIR:-/tmp}/cannery-action-build.in"
uv pip compile pyproject.toml "${TMPDIR:-/tmp}/cannery-action-build.in" \
  --universal --python-version 3.10 --generate-hashes --no-header --no-annotate \
  --index-url https://pypi.org/simple --quiet --output-file action-requirements.txt
rm -f "${TMPDIR:-/tmp}/cannery-action-build.in"
