"""The scheduled lock update: two jobs of the main workflow (``lock-update``, which runs
cannery with a read-only token, and ``lock-update-pr``, which runs only git and gh with the
write token) that put `cannery lock --update all` and a re-render in a pull request."""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from cannery.catalog.models import Catalog
from cannery.errors import InputError
from cannery.plan import ImageSpec
from cannery.render.actions import Pin, uses
from cannery.render.workflow.common import LOCK_BRANCH, setup
from cannery.render.yamltext import Commented, Literal

LOCK_PATCH = "${{ runner.temp }}/lock-update"


def lock_update_paths_file(cat: Catalog) -> str:
    """Where the list of ``lock_update_paths`` is rendered, from the catalog's directory:
    beside the main workflow, named after it (cannery-images.yml →
    cannery-images-lock-update-paths.txt)."""
    head, name = posixpath.split(cat.ci.workflow)
    return posixpath.join(head, f"{name.rsplit('.', 1)[0]}-lock-update-paths.txt")


def lock_update_paths(cat: Catalog, specs: Sequence[ImageSpec], lock_file: str,
                      catalog_file: str | None = None) -> list[str]:
    """What a lock update may change: the lock and the files rendered from it (each image's
    Dockerfile, the bake file, the tags page, the hashed requirements CI installs cannery
    from). Not the workflow, ``.dockerignore`` nor this list's own file, which the lock does
    not reach (a patch may never widen its own boundary: InputError if a catalog path names
    that file). Catalog-validated paths (REL_PATH, NAME): no newline, so one a line."""
    from cannery.render import dockerfile_name

    paths = [lock_file, *(f"{cat.ci.dockerfiles}/{dockerfile_name(s.name)}" for s in specs)]
    paths = list(dict.fromkeys([*paths, cat.ci.bake, cat.ci.docs, cat.ci.requirements]))
    for (_, key), message in lock_update_list_clashes(cat):
        raise InputError(f"{catalog_file or 'the embedded catalog'}: [ci] {key}: {message}")
    return paths


def lock_update_list_clashes(cat: Catalog) -> list[tuple[tuple[str, str], str]]:
    """A ``[ci]`` path of another rendered file that is the list's own file (which would make
    the list an allowed path): (key path, message) each. Every command refuses these at the
    key's line right after loading (render/checks.py); ``lock_update_paths`` raises them too."""
    own = lock_update_paths_file(cat)
    return [(("ci", key), f"{own} is the lock update's list of the paths it may change, so no "
             "other rendered file may be written there: choose another path")
            for key in ("bake", "docs", "requirements") if getattr(cat.ci, key) == own]


def lock_update_paths_text(cat: Catalog, specs: Sequence[ImageSpec], lock_file: str,
                           catalog_file: str | None = None) -> str:
    """The rendered list file: ``lock_update_paths``, one a line."""
    return "".join(f"{p}\n" for p in lock_update_paths(cat, specs, lock_file, catalog_file))


def _read_paths(list_file: str, refused: str) -> str:
    """Bash that reads the allowed paths into ``allowed`` from the list file as the
    checked-out commit holds it (``git cat-file``, never the working tree: the render just
    before, or a patch, may have changed that), before anything else; an empty or missing
    list, a blank line or the list naming itself fails the step with ``refused``."""
    return (
        f"if ! list=\"$(git cat-file blob 'HEAD:{list_file}')\" || [[ -z \"${{list}}\" ]]; then\n"
        f"  printf '::error::%s\\n' 'the checked-out commit lists no path in {list_file}; "
        f"{refused}'\n"
        "  exit 1\n"
        "fi\n"
        'mapfile -t allowed <<< "${list}"\n'
        'for a in "${allowed[@]}"; do\n'
        f"  if [[ -z \"${{a}}\" || \"${{a}}\" == '{list_file}' ]]; then\n"
        f"    printf '::error::{list_file} lists %q, which a lock update may never change; "
        f"{refused}\\n' \"${{a}}\"\n"
        "    exit 1\n"
        "  fi\n"
        "done\n"
    )


def _lock_patch_script(list_file: str) -> Literal:
    """The lock-update job's change, as a patch of the paths ``list_file`` (as committed)
    lists only: the checkout may hold whatever the third-party code it ran left (build output
    of a source package), which is named in a warning and left out."""
    return Literal(
        "set -euo pipefail\n"
        + _read_paths(list_file, "no patch was made")
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


def _lock_apply_script(list_file: str) -> Literal:
    """The pull-request job's first use of the patch, which came from a job that ran
    third-party code. The paths it may touch are read from ``list_file`` as the checked-out
    base commit holds it, before anything of the patch is applied (``_read_paths``). Every
    path the patch touches (both sides of a rename, as git itself lists them after applying it
    to a scratch index, not to the checkout) must be one of those; any other is named and
    fails the job before anything is applied, committed or pushed, and so is a path the
    patch would leave as anything but a regular, non-executable file (a symbolic link, an
    executable, a submodule). Then it is applied with those paths as git's include list."""
    return Literal(
        "set -euo pipefail\n"
        + _read_paths(list_file, "nothing was applied")
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


def _resolve_job(cat: Catalog, pins: dict[str, Pin], cat_args: str,
                 list_file: str) -> dict[str, object]:
    """``lock-update``: cannery with a read-only token; its change, as an artifact."""
    return {
        "name": "update the lock",
        "if": "${{ github.event_name == 'schedule' && !github.event.repository.fork }}",
        "runs-on": "ubuntu-latest",
        "permissions": {"contents": "read"},
        "concurrency": {"group": "cannery-lock-update", "cancel-in-progress": False},
        "outputs": {"changed": "${{ steps.changes.outputs.changed }}"},
        "steps": [
            *setup(cat, pins),
            {"name": "cannery lock --update all", "run": f"cannery lock --update all{cat_args}"},
            {"name": "Render with the new lock", "run": f"cannery render{cat_args}"},
            {
                "name": "The change, as a patch",
                "id": "changes",
                "run": _lock_patch_script(list_file),
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


def _pr_job(cat: Catalog, pins: dict[str, Pin], list_file: str) -> dict[str, object]:
    """``lock-update-pr``: git and gh only, with the write token, on that change."""
    title = f"cannery: update the lock of {cat.catalog.name}"
    return {
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
                "run": _lock_apply_script(list_file),
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


def lock_update_jobs(
    cat: Catalog,
    specs: Sequence[ImageSpec],
    pins: dict[str, Pin],
    cat_args: str,
    lock_file: str,
    catalog_file: str | None = None,
) -> list[tuple[str, object]]:
    """On the schedule: re-resolve every moving reference, re-render, and put the result in a
    pull request (never pushed to a built branch: builds stay --locked, and the new lock is
    reviewed and checked like any change). Two jobs: ``lock-update`` runs cannery, which runs
    third-party code (git, and `uv pip compile` building the new commits of tracked branches
    for their metadata), with a read-only token, and hands its change on as an artifact;
    ``lock-update-pr`` holds the write token and runs only git and gh on that change (any step
    of a job can read that job's token from the runner's memory), and applies only the lock
    and the files rendered from it (``lock_update_paths``, which both jobs read from the file
    ``lock_update_paths_file`` as committed, so this workflow's size does not grow with the
    images), refusing a patch that touches any other path."""
    lock_update_paths(cat, specs, lock_file, catalog_file)  # the InputError of a clash
    list_file = lock_update_paths_file(cat)
    return [("lock-update", _resolve_job(cat, pins, cat_args, list_file)),
            ("lock-update-pr", _pr_job(cat, pins, list_file))]


