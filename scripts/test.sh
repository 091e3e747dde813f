#!/usr/bin/env bash
# Install everything the test suite needs (system packages, a venv with the test extras), then
# run lint, type checks and the whole suite. `.ci/run` calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for pkg_bin in docker-registry:docker-registry git:git openssl:openssl apache2-utils:htpasswd curl:curl; do
  command -v "${pkg_bin#*:}" >/dev/null 2>&1 || need+=("${pkg_bin%%:*}")
done
if [ "${#need[@]}" -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# Debian's package starts a registry service on :5000; the tests start their own on free ports.
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'

.venv/bin/ruff check src tests bench
.venv/bin/mypy
.venv/bin/python -m pytest -q "$@"
