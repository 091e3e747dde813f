#!/usr/bin/env bash
# Re-render the golden Dockerfiles of the embedded catalog; review with `git diff tests/golden`.
set -euo pipefail
cd "$(dirname "$0")"
cannery render dockerfile --lock cannery.lock --out locked
cannery render dockerfile --lock /nonexistent/cannery.lock --out unlocked
