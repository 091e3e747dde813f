"""Catalog → one GitHub Actions workflow that builds every image on native runners.

Shape, and why:
- a first job runs `cannery render --check`, so a hand edit or a stale rendered file fails
  before anything builds;
- per image, one build job whose matrix has one leg per platform, each on a native runner
  (labels from ``[ci.runners]``); a leg runs `cannery build IMAGE --platform P --push
  --digest-dir DIR --registry-cache`, which pushes that platform by digest (no tag moves),
  with a BuildKit registry cache of that image and platform alone, and writes its descriptor,
  uploaded as an artifact named per image and platform; it runs only outside forks
  (`!github.event.repository.fork`), where the registry secrets would be empty;
- per image, one merge job that `needs` only that image's build job, so it runs only when every
  leg of that image succeeded. It runs `cannery build IMAGE --merge-only --digest-dir DIR
  --push` rather than `docker buildx imagetools create`: cannery reads the same catalog and
  lock as the legs, refuses to merge when a catalog platform is missing, pushes the index by
  digest and only then moves the tag, so the tag never names a partial index. `cannery verify`
  then checks the pushed image against the catalog.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from cannery import __version__
from cannery.catalog.models import REL_PATH, Catalog
from cannery.errors import InputError
from cannery.oci.auth import env_names
from cannery.plan import ImageSpec
from cannery.render.actions import Pin, uses
from cannery.render.yamltext import Commented, Gap, Literal, Note, dump

DIGESTS = "${{ runner.temp }}/digests"


def _arch(platform: str) -> str:
    return platform.split("/", 1)[1].replace("/", "-")


def cannery_requirement(cat: Catalog) -> str:
    return cat.ci.install or f"cannery=={__version__.split('+')[0]}"


def _setup(cat: Catalog, pins: dict[str, Pin]) -> list[object]:
    return [
        {
            "name": "Check out",
            "uses": uses(pins, "actions/checkout"),
            "with": {"persist-credentials": False},
        },
        {
            "name": "Set up Python",
            "uses": uses(pins, "actions/setup-python"),
            "with": {"python-version": cat.ci.python},
        },
        {
            "name": "Install cannery",
            "env": {"CANNERY_REQUIREMENT": cannery_requirement(cat)},
            "run": 'python -m pip install "${CANNERY_REQUIREMENT}"',
        },
    ]


def _credentials(cat: Catalog, spec: ImageSpec, every: bool = False) -> dict[str, str]:
    """Registry login reaches cannery through env, never argv (`cannery build` reads these).
    An image published to several registries gets each registry's secrets in that registry's
    own variables (CANNERY_REGISTRY_<NAME>_USER/_PASSWORD, which cannery sends to that host
    only): the legs those of the registry they push to, the merge job (``every``) all."""
    if len(spec.registries) <= 1:
        reg = next(r for r in cat.registries.values() if r.repository == spec.repository)
        return {
            "CANNERY_REGISTRY_USER": f"${{{{ secrets.{reg.user_secret} }}}}",
            "CANNERY_REGISTRY_PASSWORD": f"${{{{ secrets.{reg.password_secret} }}}}",
        }
    out = {}
    for target in spec.registries if every else spec.registries[:1]:
        reg = cat.registries[target.name]
        user, password = env_names(target.name)
        out[user] = f"${{{{ secrets.{reg.user_secret} }}}}"
        out[password] = f"${{{{ secrets.{reg.password_secret} }}}}"
    return out


# Keyless signing where the repository allows it (public repositories): cannery's own SLSA
# predicate per platform, signed by actions/attest with the workflow's GitHub OIDC identity
# (Sigstore), pushed to the registry as a referrer of the platform manifest.
KEYLESS_IF = "${{ !github.event.repository.private }}"


def _keyless(spec: ImageSpec, pins: dict[str, Pin], creds: dict[str, str]) -> list[object]:
    host = spec.repository.split("/", 1)[0]
    steps: list[object] = [
        {
            "name": "Log in for the attestation push (docker config, read by actions/attest)",
            "if": KEYLESS_IF,
            "uses": uses(pins, "docker/login-action"),
            "with": {
                "registry": host,
                # ``creds``: the first registry's only (the legs'), generic or per registry.
                "username": next(v for k, v in creds.items() if k.endswith("_USER")),
                "password": next(v for k, v in creds.items() if k.endswith("_PASSWORD")),
            },
        },
        {
            "name": "Read the platform digests",
            "id": "digests",
            "if": KEYLESS_IF,
            "env": {"IMAGE": spec.name},
            "run": Literal(
                'for f in "${RUNNER_TEMP}/digests/${IMAGE}"/*.json; do\n'
                '  arch="$(basename "${f}" .json)"; arch="${arch#linux-}"\n'
                '  echo "${arch}=$(jq -r .digest "${f}")" >> "${GITHUB_OUTPUT}"\n'
                "done\n"
            ),
        },
    ]
    for p in spec.platforms:
        steps.append(
            {
                "name": f"Keyless provenance for {p} (Sigstore, GitHub OIDC)",
                "if": KEYLESS_IF,
                "uses": uses(pins, "actions/attest"),
                "with": {
                    "subject-name": spec.repository,
                    "subject-digest": f"${{{{ steps.digests.outputs.{_arch(p)} }}}}",
                    "predicate-type": "https://slsa.dev/provenance/v1",
                    "predicate-path": f"${{{{ runner.temp }}}}/provenance/{spec.name}/"
                    f"{p.replace('/', '-')}.json",
                    "push-to-registry": True,
                },
            }
        )
    return steps


def _job_id(prefix: str, image: str) -> str:
    return f"{prefix}-{image.replace('.', '-')}"


def render_workflow(
    cat: Catalog,
    specs: Sequence[ImageSpec],
    pins: dict[str, Pin],
    *,
    catalog_file: str | None,
    lock_file: str,
) -> str:
    """The workflow text. ``catalog_file`` is the catalog's path from the repository root
    (None: the embedded catalog); ``lock_file`` likewise for the lock, which cannery finds
    beside the catalog by itself."""
    ci = cat.ci
    if catalog_file is not None and not REL_PATH.match(catalog_file):
        # The name lands in run: lines, where GitHub expands ${{ }} before any shell quoting.
        raise InputError(f"{catalog_file}: rename the catalog to letters, digits, '.', '_', "
                         "'-' so the workflow can name it")
    cat_args = f" --catalog {shlex.quote(catalog_file)}" if catalog_file else ""
    paths = [p for p in (catalog_file, lock_file) if p]
    paths += [f"{ci.dockerfiles}/**", ci.bake, ci.docs, ci.workflow]

    push: dict[str, object] = {"branches": list(ci.branches), "paths": paths}
    on: dict[object, object] = {"workflow_dispatch": {}, "push": push}
    if ci.schedule:
        on[Note("Unchanged inputs are skipped: the build is a no-op when nothing moved.")] = None
        on["schedule"] = [{"cron": ci.schedule}]

    jobs: dict[object, object] = {
        "check": {
            "name": "rendered files match the catalog",
            "runs-on": "ubuntu-latest",
            "permissions": {"contents": "read"},
            "concurrency": {"group": "cannery-check-${{ github.ref }}", "cancel-in-progress": True},
            "steps": [
                *_setup(cat, pins),
                {"name": "cannery render --check", "run": f"cannery render --check{cat_args}"},
            ],
        }
    }
    for spec in specs:
        build_id, merge_id = _job_id("build", spec.name), _job_id("merge", spec.name)
        legs = [
            {"platform": p, "arch": _arch(p), "runner": ci.runners[p]} for p in spec.platforms
        ]
        creds = _credentials(cat, spec)
        every = _credentials(cat, spec, every=True)
        mirrors = [t.repository for t in spec.registries[1:]]
        verify_all = " --all-registries" if mirrors else ""
        env = {"environment": ci.environment} if ci.environment else {}
        jobs[Gap(len(jobs))] = None
        jobs[Note(f"{spec.name}: {spec.reference}")] = None
        jobs[build_id] = {
            "name": f"build {spec.name} (${{{{ matrix.platform }}}})",
            "needs": "check",
            # registry secrets are empty in a fork: build and push only in the home repository
            # (the merge job needs this one, so it is skipped with it)
            "if": "${{ !github.event.repository.fork }}",
            "runs-on": "${{ matrix.runner }}",
            **env,
            "permissions": {"contents": "read"},
            "concurrency": {
                "group": f"cannery-build-{spec.name}-${{{{ matrix.arch }}}}-${{{{ github.ref }}}}",
                "cancel-in-progress": False,
            },
            "strategy": {"fail-fast": False, "matrix": {"include": legs}},
            "steps": [
                *_setup(cat, pins),
                {
                    "name": "Set up buildx",
                    "id": "buildx",
                    "uses": uses(pins, "docker/setup-buildx-action"),
                },
                {
                    "name": "Build and push by digest",
                    "env": {
                        **creds,
                        "PLATFORM": "${{ matrix.platform }}",
                        "BUILDER": "${{ steps.buildx.outputs.name }}",
                    },
                    "run": Literal(
                        f"cannery build {spec.name}{cat_args} --locked \\\n"
                        '  --platform "${PLATFORM}" --backend buildx --builder "${BUILDER}" \\\n'
                        '  --registry-cache --push --digest-dir "${RUNNER_TEMP}/digests"\n'
                    ),
                },
                {
                    "name": "Upload the platform's descriptor",
                    "uses": uses(pins, "actions/upload-artifact"),
                    "with": {
                        "name": f"digest-{spec.name}-${{{{ matrix.arch }}}}",
                        "path": DIGESTS,
                        "if-no-files-found": "error",
                        "retention-days": 1,
                    },
                },
            ],
        }
        jobs[merge_id] = {
            "name": f"merge {spec.name}",
            "needs": build_id,
            "runs-on": "ubuntu-latest",
            **env,
            "permissions": {
                "contents": "read",
                "id-token": Commented("write", "keyless signing: the OIDC token to certify"),
                "attestations": Commented("write", "keyless signing: GitHub stores the bundle"),
            },
            "concurrency": {
                "group": f"cannery-merge-{spec.name}-${{{{ github.ref }}}}",
                "cancel-in-progress": False,
            },
            "steps": [
                *_setup(cat, pins),
                {
                    "name": "Download the descriptors",
                    "uses": uses(pins, "actions/download-artifact"),
                    "with": {
                        "pattern": f"digest-{spec.name}-*",
                        "path": DIGESTS,
                        "merge-multiple": True,
                    },
                },
                {
                    "name": "Merge into one index, push it, then move the tag"
                    if not mirrors
                    else "Copy to every registry by digest, an index in each, then the tags",
                    "env": every,
                    "run": Literal(
                        f"cannery build {spec.name}{cat_args} --locked --merge-only \\\n"
                        '  --digest-dir "${RUNNER_TEMP}/digests" --push \\\n'
                        '  --provenance-dir "${RUNNER_TEMP}/provenance"\n'
                    ),
                },
                *_keyless(spec, pins, creds),
                {
                    "name": "Verify the pushed image",
                    "env": {**every, "IMAGE_REF": spec.reference},
                    "run": f'cannery verify "${{IMAGE_REF}}"{cat_args} --image {spec.name}'
                    + verify_all,
                },
            ],
        }

    doc: dict[object, object] = {
        "name": f"cannery images ({cat.catalog.name})",
        Gap(): None,
        "on": on,
        Gap(1): None,
        Note("Each job asks for what it needs; nothing is granted by default."): None,
        "permissions": {},
        Gap(2): None,
        "jobs": jobs,
    }
    header = (
        f"Generated by cannery {__version__.split('+')[0]} from catalog {cat.catalog.name!r}.\n"
        "Do not edit: change the catalog, then run `cannery render`.\n"
        "\n"
        "Per image: one build job with a leg per platform on a native runner, each pushing its\n"
        "platform by digest (`cannery build --platform P --push --digest-dir`, no tag moves) and\n"
        "uploading the descriptor; then one merge job, run only when every leg of that image\n"
        "succeeded. The merge is `cannery build --merge-only` rather than `docker buildx\n"
        "imagetools create` because cannery checks that every platform of the catalog is\n"
        "present, pushes the index by digest and only then moves the tag, so the tag never\n"
        "names a partial index; `cannery verify` then checks the pushed image.\n"
        "Each leg has a registry cache of its own image and platform (REPO:cache-IMAGE-ARCH,\n"
        "as in docker-bake.json), so legs never share or overwrite a cache entry.\n"
        "The merge attaches cannery's provenance (from the lock) as OCI referrers and, in a\n"
        "public repository, signs it keyless (actions/attest: Sigstore, GitHub OIDC).\n"
        "Registry credentials reach cannery as environment variables, never as arguments."
    )
    return dump(doc, header)  # type: ignore[arg-type]
