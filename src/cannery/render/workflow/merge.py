"""The reusable workflow of the merges: one job per image (the ``legs`` input, at most 256),
which checks that every platform leg of that image uploaded its descriptor, then runs
`cannery build IMAGE --merge-only --push` rather than `docker buildx imagetools create`:
cannery reads the same catalog and lock as the legs, refuses to merge when a catalog platform
is missing, pushes the index by digest and only then moves the tag, then the aliases, so no
tag names a partial index. `cannery verify` then checks the pushed image. Its cannery steps
get every registry's secrets the call job passed in env (the mirrors are written here, by
cannery's own client); its login steps are for actions/attest, which pushes with Docker's
login."""

from __future__ import annotations

from collections.abc import Sequence

from cannery.catalog.models import IMAGE_TAG, Catalog
from cannery.plan import ImageSpec
from cannery.render.actions import Pin, uses
from cannery.render.workflow.common import (
    DIGESTS,
    KEYLESS_IF,
    arch,
    credential_env,
    registry_secrets,
    setup,
)
from cannery.render.workflow.legs import BASE_ARGS, base_digest_steps, called, strategy
from cannery.render.yamltext import Commented, Literal

ENTRY = ("merges: image, reference, repository, registry, platforms, mirrors, parent, "
         "parent_built, base")

COMPLETE = Literal(
    "set -euo pipefail\n"
    "missing=()\n"
    "for p in ${PLATFORMS}; do\n"
    '  if [ ! -f "${RUNNER_TEMP}/digests/${IMAGE}/${p//\\//-}.json" ]; then missing+=("${p}"); fi\n'
    "done\n"
    "if (( ${#missing[@]} )); then\n"
    '  echo "::error::${IMAGE}: no leg succeeded for ${missing[*]}: not merged"; exit 1\n'
    "fi\n"
)


def _merge_script(cat_args: str, extra: bool) -> Literal:
    """With ``dispatch_tags``, a manual run's input ``tags`` (in env, never in the script's
    text) is split into words, unglobbed, each checked as an image tag before it becomes an
    argument; one that is not stops the step, and nothing is merged. An image another is
    built FROM writes the index digest it pushed to a file, handed on as an artifact."""
    tags = (
        "set -f  # the input is split into words, never globbed\n"
        "# shellcheck disable=SC2086\n"
        "for tag in ${EXTRA_TAGS:-}; do\n"
        f"  if [[ ! \"${{tag}}\" =~ {IMAGE_TAG.pattern} ]]; then\n"
        "    # (the value is not echoed: it is whatever the run was given)\n"
        '    echo "::error::input tags: a word is not an image tag (letters, digits, _ . -;'
        ' at most 128)"\n'
        "    exit 1\n"
        "  fi\n"
        '  set -- "$@" --extra-tag "${tag}"\n'
        "done\n"
    ) if extra else ""
    return Literal(
        "set -euo pipefail\n"
        "set --\n"
        + tags + BASE_ARGS
        + f'cannery build "${{IMAGE}}"{cat_args} --locked --merge-only \\\n'
        '  --digest-dir "${RUNNER_TEMP}/digests" --push \\\n'
        '  --provenance-dir "${RUNNER_TEMP}/provenance" "$@" \\\n'
        '  --json > "${RUNNER_TEMP}/merged.json"\n'
        'cat "${RUNNER_TEMP}/merged.json"\n'
        'if [ "${BASE}" = true ]; then\n'
        '  mkdir -p "${RUNNER_TEMP}/base-out"\n'
        "  jq -er '.images[0].index_digest // error(\"no index digest\")' "
        '"${RUNNER_TEMP}/merged.json" \\\n'
        '    > "${RUNNER_TEMP}/base-out/digest"\n'
        "fi\n"
    )


def _keyless(cat: Catalog, platforms: Sequence[str], pins: dict[str, Pin]) -> list[object]:
    """Keyless provenance per platform: one login step per catalog registry (the one the
    image is built into) and one attest step per catalog platform, each run for the images
    it applies to."""
    steps: list[object] = []
    for name, reg in cat.registries.items():
        password = f"${{{{ secrets.{reg.password_secret} }}}}"
        steps.append({
            "name": f"Log in to {name} for the attestation push (read by actions/attest)",
            "if": f"${{{{ {KEYLESS_IF} && matrix.registry == '{name}' }}}}",
            "uses": uses(pins, "docker/login-action"),
            "with": {"registry": reg.repository.split("/", 1)[0],
                     "username": reg.user_expression, "password": password},
        })
    steps.append({
        "name": "Read the platform digests",
        "id": "digests",
        "if": f"${{{{ {KEYLESS_IF} }}}}",
        "env": {"IMAGE": "${{ matrix.image }}"},
        "run": Literal(
            'for f in "${RUNNER_TEMP}/digests/${IMAGE}"/*.json; do\n'
            '  arch="$(basename "${f}" .json)"; arch="${arch#linux-}"\n'
            '  echo "${arch}=$(jq -r .digest "${f}")" >> "${GITHUB_OUTPUT}"\n'
            "done\n"
        ),
    })
    for p in platforms:
        steps.append({
            "name": f"Keyless provenance for {p} (Sigstore, GitHub OIDC)",
            "if": f"${{{{ {KEYLESS_IF} && contains(matrix.platforms, '{p}') }}}}",
            "uses": uses(pins, "actions/attest"),
            "with": {
                "subject-name": "${{ matrix.repository }}",
                "subject-digest": f"${{{{ steps.digests.outputs.{arch(p)} }}}}",
                "predicate-type": "https://slsa.dev/provenance/v1",
                "predicate-path": "${{ runner.temp }}/provenance/${{ matrix.image }}/"
                f"{p.replace('/', '-')}.json",
                "push-to-registry": True,
            },
        })
    return steps


def merge_workflow(
    cat: Catalog, specs: Sequence[ImageSpec], pins: dict[str, Pin], cat_args: str,
) -> dict[object, object]:
    creds = credential_env(cat)
    image = {"IMAGE": "${{ matrix.image }}", "PARENT": "${{ matrix.parent }}"}
    platforms = sorted({p for s in specs for p in s.platforms})
    extra: dict[str, object] = {"tags": {
        "description": "More tags for each image (a manual run's input tags)",
        "type": "string", "required": False, "default": ""}} if cat.ci.dispatch_tags else {}
    job = {
        "name": "merge ${{ matrix.image }}",
        "runs-on": "ubuntu-latest",
        **({"environment": cat.ci.environment} if cat.ci.environment else {}),
        "permissions": {
            "contents": "read",
            "id-token": Commented("write", "keyless signing: the OIDC token to certify"),
            "attestations": Commented("write", "keyless signing: GitHub stores the bundle"),
        },
        "concurrency": {"group": "cannery-merge-${{ matrix.image }}-${{ github.ref }}",
                        "cancel-in-progress": False},
        "strategy": strategy(cat),
        "steps": [
            *setup(cat, pins),
            {"name": "Download the descriptors",
             "uses": uses(pins, "actions/download-artifact"),
             "with": {"pattern": "digest-${{ matrix.image }}-*", "path": DIGESTS,
                      "merge-multiple": True}},
            {"name": "Every platform leg of this image succeeded",
             "env": {"IMAGE": "${{ matrix.image }}",
                     "PLATFORMS": "${{ join(matrix.platforms, ' ') }}"},
             "run": COMPLETE},
            *base_digest_steps(pins),
            {"name": "Merge into one index, push it (and its mirrors), then move the tags",
             "env": {**creds, **image, "BASE": "${{ matrix.base }}",
                     **({"EXTRA_TAGS": "${{ inputs.tags }}"} if cat.ci.dispatch_tags else {})},
             "run": _merge_script(cat_args, cat.ci.dispatch_tags)},
            {"name": "Hand on the index digest (images are built FROM this one)",
             "if": "${{ matrix.base }}",
             "uses": uses(pins, "actions/upload-artifact"),
             "with": {"name": "base-digest-${{ matrix.image }}",
                      "path": "${{ runner.temp }}/base-out", "if-no-files-found": "error",
                      "retention-days": 1, "overwrite": True}},
            *_keyless(cat, platforms, pins),
            {"name": "Verify the pushed image",
             "env": {**creds, **image, "IMAGE_REF": "${{ matrix.reference }}",
                     "MIRRORS": "${{ matrix.mirrors }}"},
             "run": Literal(
                 "set --\n" + BASE_ARGS
                 + 'if [ "${MIRRORS}" = true ]; then set -- "$@" --all-registries; fi\n'
                 + f'cannery verify "${{IMAGE_REF}}"{cat_args} --image "${{IMAGE}}" "$@"\n')},
        ],
    }
    return {
        "name": f"cannery merges ({cat.catalog.name})",
        "on": called(cat, ENTRY, registry_secrets(cat, tuple(cat.registries)), extra),
        "permissions": {},
        "jobs": {"merge": job},
    }
