"""The `[ci]` table: how `cannery render` lays out files and the GitHub Actions pipeline."""

from __future__ import annotations

from pydantic import Field, ValidationInfo, field_validator, model_validator

from cannery.catalog.models.common import (
    BRANCH_GLOB,
    CRON,
    PR_LABEL,
    PY_MINOR,
    REL_PATH,
    RUNNER_LABEL,
    WORKFLOW_TEXT,
    Strict,
    _full,
    _inside_repo,
    _original_field,
    _relative,
    _schema,
)
from cannery.catalog.models.images import PLATFORMS
from cannery.catalog.platforms import PLATFORM

# A GitHub Actions tag filter (on.push.tags): tag characters and the glob characters * ? +;
# no '!' negation and nothing that needs YAML quoting.
GIT_TAG_FILTER = r"^[A-Za-z0-9_.*?+][A-Za-z0-9_./*?+-]*$"
# An action pinned by commit: owner/repo, an optional path inside it, @ a full commit SHA.
ACTION_REF = r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*@[0-9a-f]{40}$"


class Ci(Strict):
    """How `cannery render` lays out files and the GitHub Actions pipeline. Paths are relative to
    the catalog's directory, which is taken to be the repository root."""

    runners: dict[str, str | list[str]] = Field(
        {"linux/amd64": "ubuntu-latest", "linux/arm64": "ubuntu-24.04-arm"},
        description="Native runner per platform: a label, or a list of labels a runner must "
        "all carry (a self-hosted one: [\"self-hosted\", \"linux\", \"arm64\"])",
        json_schema_extra={
            "propertyNames": {"enum": PLATFORMS},
            "additionalProperties": {"anyOf": [
                {"type": "string", "pattern": RUNNER_LABEL},
                {"type": "array", "minItems": 1,
                 "items": {"type": "string", "pattern": RUNNER_LABEL}},
            ]},
        },
    )
    branches: list[str] = Field(
        ["main"], description="Branches whose pushes build and publish the images they touch, "
        "and whose pull requests build them without pushing; [] for no branch push builds "
        "(release tags, the schedule and manual runs only; pull requests into any branch)",
        json_schema_extra={"items": {"type": "string", "pattern": GIT_TAG_FILTER}},
    )
    branch_pushes: bool = Field(
        True, description="Pushes to `branches` build and publish the images they touch; "
        "false: `branches` only filter pull requests, and only release tags, the schedule and "
        "manual runs publish (release_tags = [] and no schedule: manual runs only)"
    )
    schedule: str | None = Field(
        None, description="Optional cron for periodic rebuilds", json_schema_extra=_schema(CRON)
    )
    # The triggers below are the generated workflow's (cannery.render.workflow says how).
    pull_requests: bool = Field(
        True, description="Pull requests to `branches` build every image they touch, per platform "
        "on its native runner, from the pull request's checkout: no push, no secret"
    )
    pr_label: str | None = Field(
        None, pattern=PR_LABEL,
        description="Pull requests build only while they carry this label (adding it starts "
        "the build)",
    )
    dispatch_tags: bool = Field(
        False, description="A manual run takes an input `tags`: more tags (separated by spaces) "
        "for the index of each image it publishes, checked as tags before any use, passed "
        "through env, never expanded into a script"
    )
    build_branches: list[str] = Field(
        [], description="Branch patterns (GitHub's * ** ? +) whose pushes build what they touch "
        "as a pull request does (no push, no secret) and never publish, even where `branches` "
        "matches",
        json_schema_extra={"items": {"type": "string", "pattern": BRANCH_GLOB}},
    )
    release_tags: list[str] = Field(
        [], description="Git tag patterns (e.g. \"v*\") whose pushes build and publish every "
        "image: its tag, then its aliases; with catalog.version, the tag must be it (or v+it)",
        json_schema_extra={"items": {"type": "string", "pattern": GIT_TAG_FILTER}},
    )
    releases: bool = Field(
        False, description="A GitHub release, when published, builds and publishes every image "
        "from the release's tag: its tag, then its aliases; with catalog.version, the release's "
        "tag must be it (or v+it)"
    )
    max_parallel: int | None = Field(
        None, ge=1, description="At most this many platform legs of one image build at once: "
        "1 (one after another, through a concurrency group per image; images of at most two "
        "platforms), or at least an image's number of platforms (no bound); render refuses "
        "other values"
    )
    free_disk: bool = Field(
        False, description="Before building, delete the toolchains GitHub-hosted Ubuntu runners "
        "preinstall (.NET, Android SDK, GHC, CodeQL) and prune Docker images, for images close "
        "to the runner's disk size (not for self-hosted runners)"
    )
    lock_update: bool = Field(
        True, description="With schedule: the scheduled run also runs `cannery lock --update "
        "all`, re-renders, and opens a pull request when the lock changed (GITHUB_TOKEN, gh)"
    )
    install: str = Field(
        "", description="pip requirement CI installs cannery from (default: this cannery's "
        "exact version): `cannery lock` resolves it with uv for `python` and the runners' "
        "platforms into hashes, `cannery render` writes them to `requirements`, and the jobs "
        "install that file with pip --require-hashes --no-deps",
        pattern=WORKFLOW_TEXT,
    )
    install_action: str | None = Field(
        None, description="Instead of pip: an action that installs cannery, "
        "owner/repo[/path]@<full commit SHA>, run by every job that runs cannery",
        json_schema_extra=_schema(ACTION_REF),
    )
    requirements: str = Field(
        ".github/workflows/cannery-requirements.txt",
        description="Where `cannery render` writes the hashed requirements CI installs "
        "cannery from", json_schema_extra=_inside_repo(REL_PATH.pattern),
    )
    environment: str | None = Field(
        "image-registry", pattern=RUNNER_LABEL,
        description="Deployment environment of the jobs that read registry secrets "
                    "(protection rules and environment secrets apply to them only)",
    )
    python: str = Field("3.12", pattern=PY_MINOR, description="Python CI runs cannery with")
    workflow: str = Field(
        ".github/workflows/cannery-images.yml", json_schema_extra=_inside_repo(REL_PATH.pattern),
        description="Where the workflow is rendered (from the catalog's directory)",
    )
    dockerfiles: str = Field("dockerfiles", json_schema_extra=_inside_repo(REL_PATH.pattern),
                             description="The directory the Dockerfiles are rendered into")
    bake: str = Field("docker-bake.json", json_schema_extra=_inside_repo(REL_PATH.pattern),
                      description="Where the bake file is rendered")
    docs: str = Field("TAGS.md", json_schema_extra=_inside_repo(REL_PATH.pattern),
                      description="Where the supported-tags page is rendered")
    original: str | None = _original_field("workflow the rendered one")

    @field_validator("runners")
    @classmethod
    def _runners(cls, v: dict[str, str | list[str]]) -> dict[str, str | list[str]]:
        for platform, labels in v.items():
            if not PLATFORM.fullmatch(platform):
                raise ValueError(f"bad platform {platform!r}: expected os/arch such as linux/arm64")
            if isinstance(labels, list) and not labels:
                raise ValueError(f"runners.{platform}: give at least one label")
            for label in [labels] if isinstance(labels, str) else labels:
                if not _full(RUNNER_LABEL, label):
                    raise ValueError(f"bad runner label {label!r}")
        return v

    @model_validator(mode="after")
    def _one_install(self) -> Ci:
        if self.install_action is not None and self.install:
            raise ValueError("install and install_action both say how CI installs cannery: "
                             "keep one")
        return self

    @field_validator("install_action")
    @classmethod
    def _action(cls, v: str | None) -> str | None:
        if v is not None and not _full(ACTION_REF, v):
            raise ValueError(
                f"{v!r}: name the action as owner/repo[/path]@<full 40-hex commit SHA> (a tag "
                "or branch can be moved to other code, which would then hold the registry "
                "secrets)"
            )
        return v

    @field_validator("workflow", "dockerfiles", "bake", "docs", "requirements", "original")
    @classmethod
    def _relative(cls, v: str | None) -> str | None:
        # Written below the catalog's directory: never outside it, never an odd file name.
        return _relative(v)

    @field_validator("branches", "release_tags")
    @classmethod
    def _tag_filters(cls, v: list[str], info: ValidationInfo) -> list[str]:
        what, example = {"branches": ("branch", "releases/*"),
                         "release_tags": ("release tag", "v*")}[str(info.field_name)]
        for pattern in v:
            if not _full(GIT_TAG_FILTER, pattern):
                raise ValueError(
                    f"{what} pattern {pattern!r}: use letters, digits, '.', '_', '-', '/' and "
                    f"the filter characters * ? + (e.g. \"{example}\")"
                )
        return v

    @field_validator("build_branches")
    @classmethod
    def _build_branches(cls, v: list[str]) -> list[str]:
        for pattern in v:
            if not _full(BRANCH_GLOB, pattern):
                raise ValueError(f"branch pattern {pattern!r}: use letters, digits, '.', '_', "
                                 "'-', '/' and GitHub's * ** ? + (e.g. \"dev/**\")")
        return v

    @model_validator(mode="after")
    def _label_needs_prs(self) -> Ci:
        if self.pr_label is not None and not self.pull_requests:
            raise ValueError("pr_label has no effect with pull_requests = false")
        return self

    @field_validator("schedule")
    @classmethod
    def _cron(cls, v: str | None) -> str | None:
        if v is not None and not _full(CRON, v):
            raise ValueError(f"cron {v!r} needs five fields")
        return v
