"""The reusable workflows of the build legs and of the pull-request legs: one job whose
matrix is the ``legs`` input (at most 256 legs, `cannery ci plan` chunks them), each leg one
image on one platform on its native runner. Neither names an image: both are the same for
any number of images."""

from __future__ import annotations

from collections.abc import Sequence

from cannery.catalog.models import Catalog
from cannery.plan import ImageSpec
from cannery.render.actions import Pin, uses
from cannery.render.workflow.common import (
    DIGESTS,
    FREE_DISK,
    credential_env,
    registry_secrets,
    setup,
)
from cannery.render.yamltext import Literal

BASE = "${{ runner.temp }}/base"


def called(cat: Catalog, what: str, secrets: Sequence[str], extra: dict[str, object]) -> object:
    """The ``on: workflow_call`` table: the legs (JSON), ``extra`` inputs, and the secrets a
    call job may pass, none required (each call job passes only its group's)."""
    inputs: dict[str, object] = {
        "legs": {"description": f"The {what}, a JSON list (cannery ci plan)",
                 "type": "string", "required": True},
        **extra,
    }
    call: dict[str, object] = {"inputs": inputs}
    if secrets:
        call["secrets"] = {n: {"required": False} for n in secrets}
    return {"workflow_call": call}


def strategy(cat: Catalog) -> dict[str, object]:
    out: dict[str, object] = {"fail-fast": False}
    if cat.ci.max_parallel is not None:
        out["max-parallel"] = cat.ci.max_parallel
    out["matrix"] = {"include": "${{ fromJSON(inputs.legs) }}"}
    return out


def catalog_secrets(cat: Catalog, specs: Sequence[ImageSpec]) -> list[str]:
    """Every build secret of the catalog (a reusable workflow declares each it may get)."""
    return sorted({n for s in specs for n in s.secrets})


def base_digest_steps(pins: dict[str, Pin]) -> list[object]:
    """An image built FROM another built in this run: the index that image's merge pushed
    (an artifact; absent when that merge failed, and then this job fails, unbuilt)."""
    return [{
        "name": "The index its parent image's merge pushed in this run",
        "if": "${{ matrix.parent_built }}",
        "uses": uses(pins, "actions/download-artifact"),
        "with": {"name": "base-digest-${{ matrix.parent }}", "path": BASE},
    }]


# The shell lines that hand cannery that digest (the lock's when the parent is not built now).
BASE_ARGS = (
    'if [ -n "${PARENT}" ] && [ -f "${RUNNER_TEMP}/base/digest" ]; then\n'
    '  set -- "$@" --base-digest "${PARENT}=$(cat "${RUNNER_TEMP}/base/digest")"\n'
    "fi\n"
)


def _build_step(cat: Catalog, specs: Sequence[ImageSpec], cat_args: str) -> dict[str, object]:
    """The leg's `cannery build --push`, its secrets in env (only its group's are set)."""
    return {
        "name": "Build and push by digest",
        # cannery hands BuildKit the login for the push repository (and cache) from
        # these, in a temporary docker config: no `docker login` step. Only the
        # secrets the call job passed are set: its group's.
        "env": {
            **credential_env(cat),
            "IMAGE": "${{ matrix.image }}",
            "PLATFORM": "${{ matrix.platform }}",
            "PARENT": "${{ matrix.parent }}",
            "BUILDER": "${{ steps.buildx.outputs.name }}",
            "FORCE": "${{ inputs.force }}",
            # the URLs its downloads fetch (cannery mounts each for its RUN only)
            **{n: f"${{{{ secrets.{n} }}}}" for n in catalog_secrets(cat, specs)},
        },
        "run": Literal(
            "# a manual run's force input: rebuild even unchanged platforms\n"
            'if [ "${FORCE}" = true ]; then set -- --force; fi\n'
            + BASE_ARGS
            + f'cannery build "${{IMAGE}}"{cat_args} --locked \\\n'
            '  --platform "${PLATFORM}" --backend buildx --builder "${BUILDER}" \\\n'
            '  --registry-cache --push --digest-dir "${RUNNER_TEMP}/digests" "$@"\n'
        ),
    }


def build_workflow(
    cat: Catalog, specs: Sequence[ImageSpec], pins: dict[str, Pin], cat_args: str,
) -> dict[object, object]:
    """Each leg runs `cannery build IMAGE --platform P --push --digest-dir DIR
    --registry-cache` with buildx: it pushes that platform by digest (no tag moves), with a
    registry cache of that image and platform alone, and uploads its descriptor as an
    artifact named per image and platform."""
    secrets = [*registry_secrets(cat, tuple(cat.registries)), *catalog_secrets(cat, specs)]
    extra: dict[str, object] = {"force": {
        "description": "Rebuild platforms whose inputs are unchanged",
        "type": "boolean", "required": False, "default": False}}
    env = {"environment": cat.ci.environment} if cat.ci.environment else {}
    job = {
        "name": "build ${{ matrix.image }} (${{ matrix.platform }})",
        "runs-on": "${{ matrix.runner }}",
        **env,
        "permissions": {"contents": "read"},
        "concurrency": {
            "group": "cannery-build-${{ matrix.image }}-${{ matrix.arch }}-${{ github.ref }}",
            "cancel-in-progress": False,
        },
        "strategy": strategy(cat),
        "steps": [
            *([FREE_DISK] if cat.ci.free_disk else []),
            *setup(cat, pins),
            *base_digest_steps(pins),
            {"name": "Set up buildx", "id": "buildx",
             "uses": uses(pins, "docker/setup-buildx-action")},
            _build_step(cat, specs, cat_args),
            {
                "name": "Upload the platform's descriptor",
                "uses": uses(pins, "actions/upload-artifact"),
                "with": {
                    "name": "digest-${{ matrix.image }}-${{ matrix.arch }}",
                    "path": DIGESTS,
                    "if-no-files-found": "error",
                    "retention-days": 1,
                },
            },
        ],
    }
    return {
        "name": f"cannery build legs ({cat.catalog.name})",
        "on": called(cat, "legs: image, platform, arch, runner, parent, parent_built",
                     secrets, extra),
        "permissions": {},
        "jobs": {"build": job},
    }


def pr_workflow(cat: Catalog, pins: dict[str, Pin], cat_args: str) -> dict[object, object]:
    """Each leg builds one platform of one image from the pull request's checkout into an
    OCI layout on the runner and verifies it there: no registry, no login, no secret (a
    fork's pull request has none)."""
    job = {
        "name": "pull request: build ${{ matrix.image }} (${{ matrix.platform }}), push nothing",
        "runs-on": "${{ matrix.runner }}",
        "permissions": {"contents": "read"},
        "concurrency": {
            "group": "cannery-pr-${{ matrix.image }}-${{ matrix.arch }}-${{ github.ref }}",
            "cancel-in-progress": True,
        },
        "strategy": strategy(cat),
        "steps": [
            *([FREE_DISK] if cat.ci.free_disk else []),
            *setup(cat, pins),
            {
                "name": "Install buildah (when the runner lacks it)",
                "run": "command -v buildah >/dev/null || "
                "{ sudo apt-get update -q && sudo apt-get install -y -q buildah; }",
            },
            {
                "name": "Build from the checkout into an OCI layout (no registry, no push)",
                "env": {"IMAGE": "${{ matrix.image }}", "PLATFORM": "${{ matrix.platform }}"},
                "run": Literal(
                    f'cannery build "${{IMAGE}}"{cat_args} --locked --backend buildah \\\n'
                    '  --platform "${PLATFORM}" --output "oci:${RUNNER_TEMP}/oci"\n'
                ),
            },
            {
                "name": "Verify it from the layout (platform, env, labels, inputs; a container)",
                "env": {"IMAGE": "${{ matrix.image }}", "PLATFORM": "${{ matrix.platform }}"},
                "run": Literal(
                    f'cannery verify "oci:${{RUNNER_TEMP}}/oci"{cat_args} --image "${{IMAGE}}" '
                    '--platform "${PLATFORM}"\n'
                ),
            },
        ],
    }
    return {
        "name": f"cannery pull-request legs ({cat.catalog.name})",
        "on": called(cat, "legs: image, platform, arch, runner", [], {}),
        "permissions": {},
        "jobs": {"pr": job},
    }
