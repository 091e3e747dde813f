"""Catalog → one GitHub Actions workflow that builds every image on native runners.

Shape, and why:
- every job that runs cannery installs it first, and the build and merge jobs then hand it the
  registry secrets: from the requirements file rendered beside the workflow (the lock's pins of
  ``[ci] install``, every package with its hashes) with ``pip --require-hashes --no-deps``, or
  through ``[ci] install_action``, an action pinned by a full commit SHA; with neither, nothing
  is rendered;
- a first job, ``check``, runs `cannery render --check`, so a hand edit or a stale rendered
  file fails before anything builds, and then works out which images the event touches
  (``images``, a JSON list; see ``_affected``): a pull request or a branch push, the images
  whose rendered Dockerfile, or checkout directory they copy, changed (the Dockerfile carries
  every locked input, and `render --check` has just shown it matches the catalog and the
  lock); a release tag, a published release (``releases``) and the schedule, every image; a
  manual run, the images it names;
- per image, one pull-request job (``pr-IMAGE``, only on ``pull_request``): one leg per
  platform on its native runner builds the pull request's checkout with buildah into an OCI
  layout on the runner (`cannery build --platform P --output oci:DIR`) and verifies it there
  (`cannery verify oci:DIR --platform P`: the registry checks read from the layout, then the
  runtime checks in a container). Nothing is pushed, no registry is logged in to and no secret
  is named in that job, so it behaves the same for a fork's pull request, where GitHub gives
  no secrets (``pull_request``, never ``pull_request_target``);
- per image, one build job (not on ``pull_request``, not in a fork) whose matrix has one leg
  per platform, each on a native runner (labels from ``[ci.runners]``); a leg runs `cannery
  build IMAGE --platform P --push --digest-dir DIR --registry-cache`, which pushes that
  platform by digest (no tag moves), with a BuildKit registry cache of that image and
  platform alone, and writes its descriptor, uploaded as an artifact named per image and
  platform. BuildKit because each hosted runner starts empty: its registry cache outlives the
  runner, where buildah's layer cache would not. No step runs `docker login`: the step's env
  gives cannery the registry's secrets, and cannery hands BuildKit that login in a temporary
  Docker config of its own (see ``cannery.builder.buildx``);
- per image, one merge job that `needs` only that image's build job, so it runs only when every
  leg of that image succeeded. It runs `cannery build IMAGE --merge-only --digest-dir DIR
  --push` rather than `docker buildx imagetools create`: cannery reads the same catalog and
  lock as the legs, refuses to merge when a catalog platform is missing, pushes the index by
  digest and only then moves the tag, then the aliases, so no tag names a partial index.
  `cannery verify` then checks the pushed image against the catalog. Its cannery steps get
  every registry's secrets in env (the mirrors are written here, by cannery's own client);
  its one login step is for actions/attest, which pushes with Docker's login;
- with a schedule (and ``lock_update``), a ``lock-update`` job on the schedule runs `cannery
  lock --update all` and re-renders with a read-only token, and a ``lock-update-pr`` job,
  which runs no cannery and no third-party code, opens (or updates) a pull request from the
  branch ``cannery/lock-update`` with its change, ``gh`` and the workflow's ``GITHUB_TOKEN``:
  the scheduled builds stay ``--locked`` and the nightlies move when that pull request is
  merged.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from cannery import __version__
from cannery.catalog.image_bases import ancestors
from cannery.catalog.models import IMAGE_TAG, REL_PATH, Catalog
from cannery.errors import InputError
from cannery.oci.auth import env_names
from cannery.plan import ImageSpec
from cannery.pydeps import cannery_requirement
from cannery.render.actions import Pin, uses
from cannery.render.yamltext import Commented, Gap, Literal, Note, dump

DIGESTS = "${{ runner.temp }}/digests"
# The branch the scheduled lock update pushes and opens its pull request from.
LOCK_BRANCH = "cannery/lock-update"
# Jobs that may read registry secrets never run on a pull request (a same-repository pull
# request would get them) nor in a fork (whose secrets are empty).
PUBLISH_IF = "github.event_name != 'pull_request' && !github.event.repository.fork"


def _arch(platform: str) -> str:
    return platform.split("/", 1)[1].replace("/", "-")


def install_command(cat: Catalog) -> str:
    """The step that installs cannery from the rendered requirements file: every package
    pinned with its hashes (``--require-hashes``), nothing beyond the file (``--no-deps``),
    wheels only, so no build backend runs unchecked (pip does not hash-check what a source
    build installs). The path is catalog-validated (REL_PATH)."""
    return ("python -m pip install --require-hashes --no-deps --only-binary :all: -r "
            + shlex.quote(cat.ci.requirements))


def requirements_text(cat: Catalog, pins: str) -> str:
    """The requirements file CI installs cannery from: a header, the index the lock resolved
    them from (catalog-validated: https, no credentials), then the lock's pins."""
    return (
        f"# Generated by cannery from the lock's [ci] table (catalog {cat.catalog.name!r}).\n"
        "# Do not edit: change [ci] install, then run `cannery lock` and `cannery render`.\n"
        f"# {cannery_requirement(cat)}, for Python {cat.ci.python}, with every dependency.\n"
        f"--index-url {cat.catalog.python_index}\n"
        + pins
    )


def _install(cat: Catalog) -> dict[str, object]:
    if cat.ci.install_action is not None:
        return {"name": "Install cannery (an action pinned by commit)",
                "uses": cat.ci.install_action}
    return {"name": "Install cannery (hashed pins from the lock)", "run": install_command(cat)}


def _setup(cat: Catalog, pins: dict[str, Pin], history: bool = False) -> list[object]:
    """Checkout (no token kept; ``history``: every commit, to diff against), Python, cannery."""
    checkout: dict[str, object] = {"persist-credentials": False}
    if history:
        checkout["fetch-depth"] = 0
    return [
        {
            "name": "Check out",
            "uses": uses(pins, "actions/checkout"),
            "with": checkout,
        },
        {
            "name": "Set up Python",
            "uses": uses(pins, "actions/setup-python"),
            "with": {"python-version": cat.ci.python},
        },
        _install(cat),
    ]


def _credentials(cat: Catalog, spec: ImageSpec, every: bool = False) -> dict[str, str]:
    """Registry login reaches cannery through env, never argv (`cannery build` reads these).
    An image published to several registries gets each registry's secrets in that registry's
    own variables (CANNERY_REGISTRY_<NAME>_USER/_PASSWORD, which cannery sends to that host
    only): the legs those of the registry they push to, the merge job (``every``) all."""
    if len(spec.registries) <= 1:
        reg = next(r for r in cat.registries.values() if r.repository == spec.repository)
        return {
            "CANNERY_REGISTRY_USER": reg.user_expression,
            "CANNERY_REGISTRY_PASSWORD": f"${{{{ secrets.{reg.password_secret} }}}}",
        }
    out = {}
    for target in spec.registries if every else spec.registries[:1]:
        reg = cat.registries[target.name]
        user, password = env_names(target.name)
        out[user] = reg.user_expression
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


def _checkout_dirs(spec: ImageSpec) -> list[str]:
    """The checkout directories an image copies (its `path` components), from the repository
    root; "." for the whole checkout."""
    dirs = []
    for c in spec.components:
        if c.path is None:
            continue
        d = c.path.strip("/")
        while d.startswith("./"):
            d = d[2:]
        dirs.append(d or ".")
    return sorted(set(dirs))


def image_inputs(cat: Catalog, spec: ImageSpec) -> list[str]:
    """What a change must touch for the image to be rebuilt: its rendered Dockerfile (which
    carries every locked input: base digest, commits, installer and wheel hashes, the Python
    pins), the workflow itself, and for an image that copies the checkout, the rendered
    `.dockerignore` and the directories it copies. A catalog or lock change reaches an image
    through its Dockerfile, which `render --check` keeps in step with them."""
    from cannery.render import dockerfile_name

    paths = [f"{cat.ci.dockerfiles}/{dockerfile_name(spec.name)}", cat.ci.workflow]
    dirs = _checkout_dirs(spec)
    if dirs:
        paths += [".dockerignore", *dirs]
    return paths


def _affected(cat: Catalog, specs: Sequence[ImageSpec]) -> Literal:
    """The `check` job's script: the images this event builds, as a JSON list on the step's
    output ``images``. Image names and paths are catalog-validated (NAME, REL_PATH), so they
    are written into single-quoted shell words as they are; event data arrives in env."""
    by_name = {s.name: s for s in specs}

    def paths(spec: ImageSpec) -> list[str]:
        # an image built FROM another of the catalog is rebuilt with it (after it: `needs`)
        chain = [spec, *(by_name[a] for a in ancestors(cat, spec.name) if a in by_name)]
        return list(dict.fromkeys(p for s in chain for p in image_inputs(cat, s)))

    table = "".join(f"  [{s.name}]='{' '.join(paths(s))}'\n" for s in specs)
    order = " ".join(s.name for s in specs)
    return Literal(
        "set -euo pipefail\n"
        "set -f  # the manual run's input is split into words, never globbed\n"
        "# Each image and the paths it is built from (a directory: everything below it).\n"
        "declare -A inputs=(\n"
        f"{table}"
        ")\n"
        f"all=({order})\n"
        "# shellcheck disable=SC2206\n"
        "wanted=(${WANTED:-})\n"
        "for w in \"${wanted[@]}\"; do\n"
        "  if [[ ! \"${w}\" =~ ^[a-z0-9][a-z0-9_.-]*$ || -z \"${inputs[${w}]+x}\" ]]; then\n"
        '    echo "::error::no image ${w} in the catalog (images: ${all[*]})"; exit 1\n'
        "  fi\n"
        "done\n"
        f"{_release_guard(cat)}"
        "changed=''\n"
        # -z: every name as it is (git quotes a non-ASCII or odd one, which then lies under
        # no directory), one a line
        'case "${EVENT}" in\n'
        "  pull_request)  # the merge commit against the base branch it was made on\n"
        '    changed="$(git diff --name-only -z HEAD^1 HEAD | tr \'\\0\' \'\\n\')" ;;\n'
        "  push)  # a branch: what the push brought; a tag (a release): every image\n"
        '    if [[ "${GITHUB_REF}" == refs/heads/* ]] && git cat-file -e "${BEFORE}^{commit}"'
        " 2>/dev/null; then\n"
        '      changed="$(git diff --name-only -z "${BEFORE}" HEAD | tr \'\\0\' \'\\n\')"\n'
        "    else\n"
        "      changed='*'\n"
        "    fi ;;\n"
        "  workflow_dispatch)  # the images named, or every image\n"
        "    if (( ${#wanted[@]} == 0 )); then changed='*'; fi ;;\n"
        "  *) changed='*' ;;  # the schedule: every image (unchanged platforms are skipped)\n"
        "esac\n"
        "selected=()\n"
        'for image in "${all[@]}"; do\n'
        '  hit=""\n'
        '  if [[ "${changed}" == \'*\' ]]; then hit=1; fi\n'
        '  for w in "${wanted[@]}"; do\n'
        '    if [[ "${w}" == "${image}" ]]; then hit=1; fi\n'
        "  done\n"
        "  # shellcheck disable=SC2086\n"
        "  for p in ${inputs[${image}]}; do\n"
        "    while IFS= read -r f; do\n"
        '      if [[ -n "${f}" && ( "${p}" == . || "${f}" == "${p}" || "${f}" == "${p}"/* ) ]];'
        " then hit=1; fi\n"
        '    done <<< "${changed}"\n'
        "  done\n"
        '  if [[ -n "${hit}" ]]; then selected+=("${image}"); fi\n'
        "done\n"
        'json="$(jq -cn \'$ARGS.positional\' --args "${selected[@]}")"\n'
        'echo "images to build: ${json}"\n'
        'echo "images=${json}" >> "${GITHUB_OUTPUT}"\n'
    )


def _release_guard(cat: Catalog) -> str:
    """With release tags (or published releases) and a catalog version: a tag push, or a
    published release's tag, must name that version (``1.2`` or ``v1.2``), else the check fails
    and nothing is built, so a release never publishes another version's images.
    ``catalog.version`` is validated (tag characters only)."""
    version = cat.catalog.version
    if not ((cat.ci.release_tags or cat.ci.releases) and version):
        return ""
    return (
        "# A release tag names the catalog's version: another version's tag publishes nothing.\n"
        'if [[ ( "${EVENT}" == push || "${EVENT}" == release ) &&'
        ' "${GITHUB_REF}" == refs/tags/* ]]; then\n'
        '  release="${GITHUB_REF#refs/tags/}"\n'
        f"  if [[ \"${{release}}\" != '{version}' && \"${{release}}\" != 'v{version}' ]]; then\n"
        f'    echo "::error::release tag ${{release}} is not the catalog\'s version {version} '
        f'(or v{version})"; exit 1\n'
        "  fi\n"
        "fi\n"
    )


def _extra_tags_step(specs: Sequence[ImageSpec]) -> dict[str, object]:
    """The check job's step for a manual run's input ``tags``: every word an image tag, and
    at most one selected image per repository (a tag names one index), else the run stops
    before anything is built. Repositories are catalog-validated: safe in single quotes."""
    table = "".join(f"  [{s.name}]='{s.repository}'\n" for s in specs)
    return {
        "name": "Extra tags of a manual run (input tags)",
        "env": {"TAGS": "${{ inputs.tags }}",
                "IMAGES": "${{ steps.affected.outputs.images }}"},
        "run": Literal(
            "set -euo pipefail\n"
            "set -f  # the input is split into words, never globbed\n"
            "# shellcheck disable=SC2086\n"
            "for tag in ${TAGS:-}; do\n"
            f"  if [[ ! \"${{tag}}\" =~ {IMAGE_TAG.pattern} ]]; then\n"
            '    echo "::error::input tags: a word is not an image tag (letters, digits, _ . -;'
            ' at most 128)"\n'
            "    exit 1\n"
            "  fi\n"
            "done\n"
            'if [[ -z "${TAGS//[[:space:]]/}" ]]; then exit 0; fi\n'
            "declare -A repository=(\n"
            f"{table}"
            ")\n"
            "declare -A owner=()\n"
            "mapfile -t selected < <(jq -r '.[]' <<< \"${IMAGES}\")\n"
            'for image in "${selected[@]}"; do\n'
            '  repo="${repository[${image}]}"\n'
            '  if [[ -n "${owner[${repo}]+x}" ]]; then\n'
            '    echo "::error::input tags: ${owner[${repo}]} and ${image} both publish to'
            ' ${repo}, and a tag names one index: name one of them in input images"\n'
            "    exit 1\n"
            "  fi\n"
            '  owner[${repo}]="${image}"\n'
            "done\n"
        ),
    }


def _base_digest_line(parent: str | None, reset: bool = False) -> str:
    """The shell line that hands cannery the digest the parent's merge job pushed (env
    BASE_DIGEST; empty when that job did not run: the lock's digest is used)."""
    if parent is None:
        return ""
    return ("set --\n" if reset else "") + (
        f"# image {parent}, which this one is built FROM: the index its merge job pushed\n"
        'if [ -n "${BASE_DIGEST}" ]; then\n'
        f'  set -- "$@" --base-digest "{parent}=${{BASE_DIGEST}}"\n'
        "fi\n"
    )


def _merge_script(
    spec: ImageSpec, cat_args: str, extra: bool, parent: str | None = None,
    is_base: bool = False,
) -> Literal:
    """The merge step: with ``dispatch_tags``, a manual run's input ``tags`` (in env, never in
    the script's text) is split into words, unglobbed, each checked as an image tag before it
    becomes an argument; one that is not stops the step, and nothing is merged. An image
    another is built FROM writes the index digest it pushed to the step's output ``digest``."""
    merge = (f"cannery build {spec.name}{cat_args} --locked --merge-only \\\n"
             '  --digest-dir "${RUNNER_TEMP}/digests" --push \\\n'
             '  --provenance-dir "${RUNNER_TEMP}/provenance"'
             + (' "${extra[@]}"' if extra else "") + (' "$@"' if parent else ""))
    if is_base:
        # (no pipe: the step fails with cannery, and without an index digest)
        merge += (' --json > "${RUNNER_TEMP}/merged.json"\n'
                  'cat "${RUNNER_TEMP}/merged.json"\n'
                  "digest=\"$(jq -er '.images[0].index_digest // error(\"no index digest\")' "
                  '"${RUNNER_TEMP}/merged.json")"\n'
                  'echo "digest=${digest}" >> "${GITHUB_OUTPUT}"')
    strict = "set -euo pipefail\n" if (parent or is_base) and not extra else ""
    merge = strict + _base_digest_line(parent, reset=True) + merge + "\n"
    if not extra:
        return Literal(merge)
    return Literal(
        "set -euo pipefail\n"
        "set -f  # the input is split into words, never globbed\n"
        "extra=()\n"
        "# shellcheck disable=SC2086\n"
        "for tag in ${EXTRA_TAGS:-}; do\n"
        f"  if [[ ! \"${{tag}}\" =~ {IMAGE_TAG.pattern} ]]; then\n"
        "    # (the value is not echoed: it is whatever the run was given)\n"
        '    echo "::error::input tags: a word is not an image tag (letters, digits, _ . -;'
        ' at most 128)"\n'
        "    exit 1\n"
        "  fi\n"
        '  extra+=(--extra-tag "${tag}")\n'
        "done\n"
        + merge
    )


def _pr_cond(cat: Catalog) -> str:
    """When the pull-request job (build into a layout, push nothing) runs: on a pull request
    (carrying ``pr_label``, when set), and on a push to one of ``build_branches``."""
    cond = "github.event_name == 'pull_request'"
    if cat.ci.pr_label:  # PR_LABEL has no quote: safe inside '…'
        label = cat.ci.pr_label
        # adding another label to a labelled pull request starts (and cancels) nothing
        cond += (f" && contains(github.event.pull_request.labels.*.name, '{label}') && "
                 f"(github.event.action != 'labeled' || github.event.label.name == '{label}')")
    if cat.ci.build_branches:
        cond = (f"({cond}) || (github.event_name == 'push' && "
                "needs.check.outputs.publish == 'false')")
    return cond


def _publish_cond(cat: Catalog) -> str:
    """With ``build_branches``: the check job's say that this event publishes."""
    return " && needs.check.outputs.publish == 'true'" if cat.ci.build_branches else ""


def _publish_step(cat: Catalog) -> dict[str, object]:
    """The check job's step that says whether this event publishes: not a push to a branch
    that matches one of ``build_branches``, in GitHub's filter syntax as an extended regular
    expression (``*``: anything but '/'; ``**``: anything; ``?`` and ``+``: zero-or-one and
    one-or-more of the character before, as in a regular expression). The patterns are
    catalog-validated letters, digits and . _ - / * ? +."""
    def regex(pattern: str) -> str:
        out = pattern.replace(".", r"\.").replace("**", "\0").replace("*", "[^/]*")
        return out.replace("\0", ".*")

    alternatives = "|".join(regex(p) for p in cat.ci.build_branches)
    return {
        "name": "Publish, or build only (build_branches)",
        "id": "publish",
        "env": {"EVENT": "${{ github.event_name }}"},
        "run": Literal(
            "set -euo pipefail\n"
            f"build_only='^refs/heads/({alternatives})$'\n"
            "publish=true\n"
            "if [[ \"${EVENT}\" == pull_request ]]; then publish=false; fi\n"
            'if [[ "${EVENT}" == push && "${GITHUB_REF}" =~ ${build_only} ]]; then\n'
            "  publish=false  # a build branch: build what the push touched, publish nothing\n"
            "fi\n"
            'echo "publish=${publish}" >> "${GITHUB_OUTPUT}"\n'
        ),
    }


def _wanted(spec: ImageSpec) -> str:
    return f"contains(fromJSON(needs.check.outputs.images), '{spec.name}')"


# GitHub-hosted Ubuntu runners only: these directories are the preinstalled toolchains.
FREE_DISK = {
    "name": "Free runner disk space (preinstalled toolchains, Docker images)",
    "run": Literal(
        "df -h /\n"
        "sudo rm -rf /usr/share/dotnet /usr/local/lib/android /opt/ghc /usr/local/.ghcup \\\n"
        "  /opt/hostedtoolcache/CodeQL\n"
        "sudo docker image prune --all --force\n"
        "df -h /\n"
    ),
}


def _legs(cat: Catalog, spec: ImageSpec) -> dict[str, object]:
    legs = [
        {"platform": p, "arch": _arch(p), "runner": cat.ci.runners[p]} for p in spec.platforms
    ]
    strategy: dict[str, object] = {"fail-fast": False}
    if cat.ci.max_parallel is not None:
        strategy["max-parallel"] = cat.ci.max_parallel
    strategy["matrix"] = {"include": legs}
    return strategy


def _pr_job(cat: Catalog, spec: ImageSpec, pins: dict[str, Pin], cat_args: str) -> object:
    """Build each platform of one image from the pull request's checkout into an OCI layout
    on the runner and verify it there: no registry, no login, no secret (a fork's pull
    request has none)."""
    return {
        "name": f"pull request: build {spec.name} (${{{{ matrix.platform }}}}), push nothing",
        "needs": "check",
        # (parenthesised whole: in an expression && binds tighter than ||)
        "if": f"${{{{ ({_pr_cond(cat)}) && {_wanted(spec)} }}}}",
        "runs-on": "${{ matrix.runner }}",
        "permissions": {"contents": "read"},
        "concurrency": {
            "group": f"cannery-pr-{spec.name}-${{{{ matrix.arch }}}}-${{{{ github.ref }}}}",
            "cancel-in-progress": True,
        },
        "strategy": _legs(cat, spec),
        "steps": [
            *([FREE_DISK] if cat.ci.free_disk else []),
            *_setup(cat, pins),
            {
                "name": "Install buildah (when the runner lacks it)",
                "run": "command -v buildah >/dev/null || "
                "{ sudo apt-get update -q && sudo apt-get install -y -q buildah; }",
            },
            {
                "name": "Build from the checkout into an OCI layout (no registry, no push)",
                "env": {"PLATFORM": "${{ matrix.platform }}"},
                "run": Literal(
                    f"cannery build {spec.name}{cat_args} --locked --backend buildah \\\n"
                    '  --platform "${PLATFORM}" --output "oci:${RUNNER_TEMP}/oci"\n'
                ),
            },
            {
                "name": "Verify it from the layout (platform, env, labels, inputs; a container)",
                "env": {"PLATFORM": "${{ matrix.platform }}"},
                "run": Literal(
                    f'cannery verify "oci:${{RUNNER_TEMP}}/oci"{cat_args} --image {spec.name} '
                    '--platform "${PLATFORM}"\n'
                ),
            },
        ],
    }


LOCK_PATCH = "${{ runner.temp }}/lock-update"


def lock_update_paths(cat: Catalog, specs: Sequence[ImageSpec], lock_file: str) -> list[str]:
    """What a lock update may change: the lock and the files rendered from it (each image's
    Dockerfile, the bake file, the tags page, the hashed requirements CI installs cannery
    from). Not the workflow nor ``.dockerignore``, which
    the lock does not reach. Catalog-validated paths (REL_PATH, NAME), so they are written into
    single-quoted shell words as they are."""
    from cannery.render import dockerfile_name

    paths = [lock_file, *(f"{cat.ci.dockerfiles}/{dockerfile_name(s.name)}" for s in specs)]
    return list(dict.fromkeys([*paths, cat.ci.bake, cat.ci.docs, cat.ci.requirements]))


def _shell_list(name: str, words: Sequence[str]) -> str:
    return f"{name}=(\n" + "".join(f"  '{w}'\n" for w in words) + ")\n"


def _lock_patch_script(paths: Sequence[str]) -> Literal:
    """The lock-update job's change, as a patch of ``paths`` only: the checkout may hold
    whatever the third-party code it ran left (build output of a source package), which is
    named in a warning and left out."""
    return Literal(
        "set -euo pipefail\n"
        + _shell_list("allowed", paths)
        + "git add -A\n"
        "git diff --cached --name-only -z --no-renames -- . "
        '"${allowed[@]/#/:(exclude,literal)}" |\n'
        "  while IFS= read -r -d '' path; do\n"
        "    printf '::warning::left out of the lock update (not the lock or a file rendered "
        "from it): %q\\n' \"${path}\"\n"
        "  done\n"
        'mkdir -p "${RUNNER_TEMP}/lock-update"\n'
        'git diff --cached --binary -- "${allowed[@]/#/:(literal)}" '
        '> "${RUNNER_TEMP}/lock-update/change.patch"\n'
        'if [ -s "${RUNNER_TEMP}/lock-update/change.patch" ]; then\n'
        '  echo "changed=true" >> "${GITHUB_OUTPUT}"\n'
        "else\n"
        '  echo "the lock is unchanged"\n'
        "fi\n"
    )


def _lock_apply_script(paths: Sequence[str]) -> Literal:
    """The pull-request job's first use of the patch, which came from a job that ran
    third-party code: every path it touches (both sides of a rename, as git itself lists them
    after applying it to a scratch index, not to the checkout) must be one of ``paths``; any
    other is named and fails the job before anything is applied, committed or pushed, and so
    is a path the patch would leave as anything but a regular, non-executable file (a symbolic
    link, an executable, a submodule). Then it is applied with ``paths`` as git's include
    list."""
    return Literal(
        "set -euo pipefail\n"
        + _shell_list("allowed", paths)
        + 'patch="${RUNNER_TEMP}/lock-update/change.patch"\n'
        'scratch="$(mktemp -d)"\n'
        "trap 'rm -rf \"${scratch}\"' EXIT\n"
        'GIT_INDEX_FILE="${scratch}/index" git read-tree HEAD\n'
        'GIT_INDEX_FILE="${scratch}/index" git apply --cached "${patch}"\n'
        'GIT_INDEX_FILE="${scratch}/index" git diff --cached --name-only -z --no-renames HEAD '
        '> "${scratch}/paths"\n'
        "refused=0\n"
        "while IFS= read -r -d '' path; do\n"
        "  ok=''\n"
        '  for a in "${allowed[@]}"; do\n'
        '    if [[ "${path}" == "${a}" ]]; then ok=1; fi\n'
        "  done\n"
        '  if [[ -z "${ok}" ]]; then\n'
        "    printf '::error::the lock-update patch touches %q, which is not the lock or a file "
        "rendered from it; nothing was applied\\n' \"${path}\"\n"
        "    refused=1\n"
        "  fi\n"
        'done < "${scratch}/paths"\n'
        # Each allowed path stays a regular, non-executable file: a symbolic link in the
        # lock's place (to a file outside the checkout) would be followed by its next reader.
        'GIT_INDEX_FILE="${scratch}/index" git diff --cached --raw -z --no-renames HEAD '
        '> "${scratch}/modes"\n'
        "while IFS= read -r -d '' meta && IFS= read -r -d '' path; do\n"
        '  mode="${meta#:* }"; mode="${mode%% *}"\n'
        '  if [[ "${mode}" != 100644 && "${mode}" != 000000 ]]; then\n'
        "    printf '::error::the lock-update patch makes %q mode %s, not a regular file "
        "(100644); nothing was applied\\n' \"${path}\" \"${mode}\"\n"
        "    refused=1\n"
        "  fi\n"
        'done < "${scratch}/modes"\n'
        "if (( refused )); then exit 1; fi\n"
        'git apply --index "${allowed[@]/#/--include=}" "${patch}"\n'
    )


def _lock_update_jobs(
    cat: Catalog,
    specs: Sequence[ImageSpec],
    pins: dict[str, Pin],
    cat_args: str,
    lock_file: str,
) -> list[tuple[str, object]]:
    """On the schedule: re-resolve every moving reference, re-render, and put the result in a
    pull request (never pushed to a built branch: builds stay --locked, and the new lock is
    reviewed and checked like any change). Two jobs: ``lock-update`` runs cannery, which runs
    third-party code (git, and `uv pip compile` building the new commits of tracked branches
    for their metadata), with a read-only token, and hands its change on as an artifact;
    ``lock-update-pr`` holds the write token and runs only git and gh on that change (any step
    of a job can read that job's token from the runner's memory), and applies only the lock
    and the files rendered from it (``lock_update_paths``), refusing a patch that touches any
    other path."""
    title = f"cannery: update the lock of {cat.catalog.name}"
    paths = lock_update_paths(cat, specs, lock_file)
    resolve = {
        "name": "update the lock",
        "if": "${{ github.event_name == 'schedule' && !github.event.repository.fork }}",
        "runs-on": "ubuntu-latest",
        "permissions": {"contents": "read"},
        "concurrency": {"group": "cannery-lock-update", "cancel-in-progress": False},
        "outputs": {"changed": "${{ steps.changes.outputs.changed }}"},
        "steps": [
            *_setup(cat, pins),
            {"name": "cannery lock --update all", "run": f"cannery lock --update all{cat_args}"},
            {"name": "Render with the new lock", "run": f"cannery render{cat_args}"},
            {
                "name": "The change, as a patch",
                "id": "changes",
                "run": _lock_patch_script(paths),
            },
            {
                "name": "Upload the patch",
                "if": "${{ steps.changes.outputs.changed == 'true' }}",
                "uses": uses(pins, "actions/upload-artifact"),
                "with": {
                    "name": "lock-update",
                    "path": LOCK_PATCH,
                    "if-no-files-found": "error",
                    "retention-days": 1,
                },
            },
        ],
    }
    publish = {
        "name": "update the lock: pull request",
        "needs": "lock-update",
        "if": "${{ github.event_name == 'schedule' "
        "&& needs.lock-update.outputs.changed == 'true' }}",
        "runs-on": "ubuntu-latest",
        "permissions": {
            "contents": Commented("write", "push the lock-update branch"),
            "pull-requests": Commented("write", "open its pull request"),
        },
        "concurrency": {"group": "cannery-lock-update-pr", "cancel-in-progress": False},
        "steps": [
            {
                "name": "Check out",
                "uses": uses(pins, "actions/checkout"),
                "with": {"persist-credentials": False},
            },
            {
                "name": "Download the patch",
                "uses": uses(pins, "actions/download-artifact"),
                "with": {"name": "lock-update", "path": LOCK_PATCH},
            },
            {
                "name": "Apply the patch: the lock and the files rendered from it, nothing else",
                "run": _lock_apply_script(paths),
            },
            {
                "name": "Open or update a pull request with the new lock",
                "env": {
                    # gh reads the token from the environment; `gh auth setup-git` makes git
                    # ask gh for it, so it is never in a URL, an argument or .git/config.
                    "GH_TOKEN": "${{ github.token }}",
                    "BRANCH": LOCK_BRANCH,
                    "BASE": "${{ github.ref_name }}",
                    "TITLE": title,
                },
                "run": Literal(
                    "gh auth setup-git\n"
                    'git config user.name "github-actions[bot]"\n'
                    'git config user.email '
                    '"41898282+github-actions[bot]@users.noreply.github.com"\n'
                    'git switch -C "${BRANCH}"\n'
                    'git commit -q -m "${TITLE}" -m "cannery lock --update all, then cannery '
                    'render."\n'
                    'git push --force origin "HEAD:refs/heads/${BRANCH}"\n'
                    'open="$(gh pr list --head "${BRANCH}" --base "${BASE}" --state open '
                    "--json number --jq '.[].number')\"\n"
                    'if [ -z "${open}" ]; then\n'
                    '  gh pr create --head "${BRANCH}" --base "${BASE}" --title "${TITLE}" \\\n'
                    '    --body "The scheduled run re-resolved every moving reference '
                    '(cannery lock --update all) and re-rendered. Builds use this lock once '
                    'it is merged."\n'
                    "fi\n"
                ),
            },
        ],
    }
    return [("lock-update", resolve), ("lock-update-pr", publish)]


def render_workflow(
    cat: Catalog,
    specs: Sequence[ImageSpec],
    pins: dict[str, Pin],
    *,
    catalog_file: str | None,
    lock_file: str,
    ci_pins: str | None,
) -> str:
    """The workflow text. ``catalog_file`` is the catalog's path from the repository root
    (None: the embedded catalog); ``lock_file`` likewise for the lock, which cannery finds
    beside the catalog by itself. ``ci_pins``: the lock's pins of ``[ci] install``
    (``pydeps.ci_requirements``), None when it has none for this catalog; then, unless an
    ``install_action`` pinned by commit installs cannery, nothing is written (InputError):
    every job that installs cannery hands it the registry secrets."""
    ci = cat.ci
    if catalog_file is not None and not REL_PATH.match(catalog_file):
        # The name lands in run: lines, where GitHub expands ${{ }} before any shell quoting.
        raise InputError(f"{catalog_file}: rename the catalog to letters, digits, '.', '_', "
                         "'-' so the workflow can name it")
    if ci.install_action is None and ci_pins is None:
        raise InputError(
            f"{catalog_file or 'the embedded catalog'}: [ci] install: "
            f"{cannery_requirement(cat)} has no hashes in {lock_file} for Python {ci.python} "
            "on every runner's platform: run `cannery lock` (CI installs cannery only with "
            "--require-hashes, or through install_action pinned by a full commit SHA)"
        )
    cat_args = f" --catalog {shlex.quote(catalog_file)}" if catalog_file else ""
    paths = [p for p in (catalog_file, lock_file) if p]
    paths += [f"{ci.dockerfiles}/**", ci.bake, ci.docs, ci.workflow]
    if ci.install_action is None:  # the pins CI installs cannery from: `render --check` them
        paths.append(ci.requirements)
    dirs = sorted({d for s in specs for d in _checkout_dirs(s)})
    if dirs:
        paths += [".dockerignore", *(f"{d}/**" for d in dirs)]
    # An image that copies the whole checkout is touched by any change: no paths filter.
    filtered = {"paths": paths} if "." not in dirs else {}

    dispatch = {
        "inputs": {
            "images": {
                "description": "Images to build, separated by spaces (empty: every image)",
                "type": "string",
                "required": False,
                "default": "",
            },
            "force": {
                "description": "Rebuild platforms whose inputs are unchanged and already pushed",
                "type": "boolean",
                "required": False,
                "default": False,
            },
            **({"tags": {
                "description": "More tags for each image this run publishes, separated by "
                "spaces (letters, digits, _ . -)",
                "type": "string",
                "required": False,
                "default": "",
            }} if ci.dispatch_tags else {}),
        }
    }
    # branches = []: no branch push builds (releases, the schedule and manual runs only); an
    # empty `branches:` list is not a valid filter, so the key is left out instead.
    # branch_pushes = false: `branches` filter pull requests only; no branch push publishes.
    branch_pushes = bool(ci.branches) and ci.branch_pushes
    # build_branches: pushed to, they build as a pull request does and never publish
    branches = [*(ci.branches if branch_pushes else []), *ci.build_branches]
    push: dict[str, object] = {"branches": list(dict.fromkeys(branches))} if branches else {}
    if ci.release_tags:
        push["tags"] = list(ci.release_tags)
    if branches:
        push.update(filtered)  # GitHub does not check paths for tag pushes
    on: dict[object, object] = {"workflow_dispatch": dispatch}
    if ci.release_tags:
        on[Note(("Branch pushes build what they touch; a" if branch_pushes else "A")
                + " release tag (paths are not checked for tags)\nbuilds and publishes every "
                "image: its tag, then its aliases.")] = None
    if push:
        on["push"] = push
    if ci.releases:
        on[Note("A published release builds and publishes every image from its tag.")] = None
        on["release"] = {"types": ["published"]}
    if ci.pull_requests:
        note = "Builds what the pull request touches, pushes nothing, reads no secret."
        if ci.pr_label:
            note += f"\nOnly while it carries the label {ci.pr_label!r} (adding it starts one)."
        on[Note(note)] = None
        # with no branches named, pull requests into any branch
        # a label gate: adding the label is an event of its own
        types = {"types": ["opened", "synchronize", "reopened", "labeled"]} if ci.pr_label else {}
        on["pull_request"] = types | (
            {"branches": list(ci.branches)} if ci.branches else {}) | filtered
    if ci.schedule:
        note = "Unchanged inputs are skipped: the build is a no-op when nothing moved."
        if ci.lock_update:
            note += ("\nThe lock-update job re-resolves moving references into a pull "
                     "request.")
        on[Note(note)] = None
        on["schedule"] = [{"cron": ci.schedule}]

    jobs: dict[object, object] = {
        "check": {
            "name": "rendered files match the catalog; images to build",
            "runs-on": "ubuntu-latest",
            "permissions": {"contents": "read"},
            "concurrency": {"group": "cannery-check-${{ github.ref }}", "cancel-in-progress": True},
            "outputs": {"images": "${{ steps.affected.outputs.images }}"},
            "steps": [
                *_setup(cat, pins, history=True),
                {"name": "cannery render --check", "run": f"cannery render --check{cat_args}"},
                {
                    "name": "Images this event builds",
                    "id": "affected",
                    "env": {
                        "EVENT": "${{ github.event_name }}",
                        "BEFORE": "${{ github.event.before }}",
                        "WANTED": "${{ inputs.images }}",
                    },
                    "run": _affected(cat, specs),
                },
                *([_publish_step(cat)] if ci.build_branches else []),
                *([_extra_tags_step(specs)] if ci.dispatch_tags else []),
            ],
        }
    }
    if ci.build_branches:
        check = jobs["check"]
        assert isinstance(check, dict)
        check["outputs"]["publish"] = "${{ steps.publish.outputs.publish }}"
    force_env = {"FORCE": "${{ inputs.force }}"}
    by_name = {s.name: s for s in specs}
    for spec in specs:
        build_id, merge_id = _job_id("build", spec.name), _job_id("merge", spec.name)
        creds = _credentials(cat, spec)
        every = _credentials(cat, spec, every=True)
        mirrors = [t.repository for t in spec.registries[1:]]
        verify_all = " --all-registries" if mirrors else ""
        env = {"environment": ci.environment} if ci.environment else {}
        jobs[Gap(len(jobs))] = None
        jobs[Note(f"{spec.name}: {spec.reference}")] = None
        unpinned_parent = spec.built_on is not None and spec.base_digest is None
        if ci.pull_requests and not spec.secrets and not unpinned_parent:
            jobs[_job_id("pr", spec.name)] = _pr_job(cat, spec, pins, cat_args)
        elif ci.pull_requests and spec.secrets:
            jobs[Note(f"No pull-request build of {spec.name}: it needs build secrets "
                      f"({', '.join(spec.secrets)}), which a pull request never gets.")] = None
        elif ci.pull_requests:
            # a pull request builds a child on its parent as last published and locked
            jobs[Note(f"No pull-request build of {spec.name} until image {spec.built_on}, "
                      "which it is built FROM, is published and locked.")] = None
        parent = spec.built_on if spec.built_on in by_name else None
        build_if = f"{PUBLISH_IF}{_publish_cond(cat)} && {_wanted(spec)}"
        base_env: dict[str, str] = {}
        if parent is not None:
            parent_merge = _job_id("merge", parent)
            # after the parent's merge when this event builds it (skipped: not built now, so
            # the lock's digest of it); never after a parent that failed
            build_if = (f"!cancelled() && needs.check.result == 'success' && {build_if} && "
                        f"(needs.{parent_merge}.result == 'success' || "
                        f"!{_wanted(by_name[parent])})")
            base_env = {"BASE_DIGEST": f"${{{{ needs.{parent_merge}.outputs.digest }}}}"}
        jobs[build_id] = {
            "name": f"build {spec.name} (${{{{ matrix.platform }}}})",
            "needs": "check" if parent is None else ["check", _job_id("merge", parent)],
            # registry secrets: never on a pull request, never in a fork (where they are
            # empty); the merge job needs this one, so it is skipped with it
            "if": f"${{{{ {build_if} }}}}",
            "runs-on": "${{ matrix.runner }}",
            **env,
            "permissions": {"contents": "read"},
            "concurrency": {
                "group": f"cannery-build-{spec.name}-${{{{ matrix.arch }}}}-${{{{ github.ref }}}}",
                "cancel-in-progress": False,
            },
            "strategy": _legs(cat, spec),
            "steps": [
                *([FREE_DISK] if ci.free_disk else []),
                *_setup(cat, pins),
                {
                    "name": "Set up buildx",
                    "id": "buildx",
                    "uses": uses(pins, "docker/setup-buildx-action"),
                },
                {
                    "name": "Build and push by digest",
                    # cannery hands BuildKit the login for the push repository (and cache)
                    # from these, in a temporary docker config: no `docker login` step
                    "env": {
                        **creds,
                        "PLATFORM": "${{ matrix.platform }}",
                        "BUILDER": "${{ steps.buildx.outputs.name }}",
                        **force_env,
                        **base_env,
                        # the URLs its downloads fetch (cannery mounts each for its RUN only)
                        **{n: f"${{{{ secrets.{n} }}}}" for n in spec.secrets},
                    },
                    "run": Literal(
                        "# a manual run's force input: rebuild even unchanged platforms\n"
                        'if [ "${FORCE}" = true ]; then set -- --force; fi\n'
                        + _base_digest_line(parent)
                        + f"cannery build {spec.name}{cat_args} --locked \\\n"
                        '  --platform "${PLATFORM}" --backend buildx --builder "${BUILDER}" \\\n'
                        '  --registry-cache --push --digest-dir "${RUNNER_TEMP}/digests" "$@"\n'
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
        is_base = any(s.built_on == spec.name for s in specs)
        merge_job: dict[str, object] = {
            "name": f"merge {spec.name}",
            "needs": build_id if parent is None else [build_id, _job_id("merge", parent)],
            # (a parent's merge job only hands on its digest; a skipped one: not built now)
            **({"if": f"${{{{ !cancelled() && needs.{build_id}.result == 'success' }}}}"}
               if parent is not None else {}),
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
                    "name": "Merge into one index, push it, then move the tag and aliases"
                    if not mirrors
                    else "Copy to every registry by digest, an index in each, then the tags",
                    **({"id": "merge"} if is_base else {}),
                    "env": {**every, **({"EXTRA_TAGS": "${{ inputs.tags }}"}
                                        if ci.dispatch_tags else {}), **base_env},
                    "run": _merge_script(spec, cat_args, ci.dispatch_tags, parent, is_base),
                },
                *_keyless(spec, pins, creds),
                {
                    "name": "Verify the pushed image",
                    "env": {**every, "IMAGE_REF": spec.reference, **base_env},
                    "run": Literal(
                        _base_digest_line(parent, reset=True)
                        + f'cannery verify "${{IMAGE_REF}}"{cat_args} --image {spec.name}'
                        + verify_all + (' "$@"' if parent else "") + "\n")
                    if parent else
                    f'cannery verify "${{IMAGE_REF}}"{cat_args} --image {spec.name}'
                    + verify_all,
                },
            ],
        }
        if is_base:
            # what the images built FROM this one pin (their build and merge jobs need it)
            merge_job["outputs"] = {"digest": "${{ steps.merge.outputs.digest }}"}
        jobs[merge_id] = merge_job
    if ci.schedule and ci.lock_update:
        for jid, job in _lock_update_jobs(cat, specs, pins, cat_args, lock_file):
            jobs[Gap(len(jobs))] = None
            jobs[jid] = job

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
        "check: `cannery render --check`, then the images this event builds: a pull request\n"
        "or a branch push, those whose rendered Dockerfile (every locked input) or copied\n"
        "checkout directory changed; a release tag and the schedule, all; a manual run, the\n"
        "images it names.\n"
        "Pull requests (pr-IMAGE): each platform on its native runner is built from the pull\n"
        "request's checkout into an OCI layout on the runner and verified from it (`cannery\n"
        "verify oci:DIR`); nothing is pushed, no registry is logged in to, no secret is\n"
        "named, so a fork's pull request runs the same way.\n"
        "Pushes, tags, the schedule and manual runs, per image: one build job with a leg per\n"
        "platform on a native runner, each pushing its platform by digest (`cannery build\n"
        "--platform P --push --digest-dir`, no tag moves) and uploading the descriptor; then\n"
        "one merge job, run only when every leg of that image succeeded. The merge is\n"
        "`cannery build --merge-only` rather than `docker buildx imagetools create` because\n"
        "cannery checks that every platform of the catalog is present, pushes the index by\n"
        "digest and only then moves the tag, then the aliases, so no tag names a partial\n"
        "index; `cannery verify` then checks the pushed image.\n"
        "Each leg has a registry cache of its own image and platform (REPO:cache-IMAGE-ARCH,\n"
        "as in docker-bake.json), so legs never share or overwrite a cache entry.\n"
        "The merge attaches cannery's provenance (from the lock) as OCI referrers and, in a\n"
        "public repository, signs it keyless (actions/attest: Sigstore, GitHub OIDC).\n"
        "Registry credentials reach cannery as environment variables, never as arguments;\n"
        "cannery gives BuildKit its login in a temporary docker config, so no leg runs\n"
        "`docker login` (the merge job's login step is for actions/attest's push)."
    )
    return dump(doc, header)  # type: ignore[arg-type]
