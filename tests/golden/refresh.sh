#!/usr/bin/env bash
# Re-render the golden Dockerfiles of the embedded catalog; review with `git diff tests/golden`.
set -euo pipefail
cd "$(dirname "$0")"
cannery render dockerfile --lock cannery.lock --out locked
cannery render dockerfile --lock /nonexistent/cannery.lock --out unlocked
# The embedded catalog's workflow, bake file and tags doc (with the test lock).
cannery render workflow --lock cannery.lock --out workflow/embedded/cannery-images.yml
cannery render bake --lock cannery.lock --out workflow/embedded/docker-bake.json
cannery render docs --lock cannery.lock --out workflow/embedded/TAGS.md
# The example family catalog renders into its own directory, committed beside it.
cannery render --catalog ../../examples/verl-ascend/cannery.toml
