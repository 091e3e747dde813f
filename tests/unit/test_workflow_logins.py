"""Every generated workflow checked in (each example's, the embedded catalog's golden): each
step that writes to a registry holds, or is preceded in its job by, the login for every
registry it writes to.

- A ``cannery build … --push`` step writes: a leg (no ``--merge-only``) its image's first
  registry and, with ``--registry-cache``, the cache ref; the merge every registry of the image
  (the mirrors too). Its login is the step's own environment: the test substitutes each
  ``${{ secrets.X }}`` / ``${{ vars.X }}`` with a value naming it and asks cannery's own
  credential lookup (``publish_credentials``, as `cannery build` builds it, with no Docker
  config) for each host. The password must come from a secret. (BuildKit gets the same login
  from cannery, in a temporary Docker config: tests/e2e/test_build_buildx_login.py.)
- A ``uses:`` step that pushes (``actions/attest`` with ``push-to-registry``) reads Docker's
  config: a ``docker/login-action`` step for that host, under the same condition, comes first.
- The build and merge steps are in reusable workflows: each is checked once per leg that
  `cannery ci plan` hands its call job, with the leg's matrix values, and a secret its call
  job does not pass is empty (GitHub gives a called workflow only the secrets passed to it).
- Any other action, or a ``run:`` that calls docker, skopeo, crane, oras or buildah push, is an
  unknown writer and fails the test until this test knows what it writes.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from cannery.builder.registries import publish_credentials
from cannery.catalog.load import load_catalog
from cannery.lock import read_lock
from cannery.oci import Reference
from cannery.plan import ImageSpec, plan
from cannery.render.bake import cache_ref
from tests.conftest import GOLDEN, ROOT
from tests.unit.workflows import build_legs, flat, merges, outputs

EXAMPLES = sorted((ROOT / "examples").glob("*/cannery.toml"))
CASES = [(None, GOLDEN / "workflow" / "embedded" / "cannery-images.yml")] + [
    (c, w) for c in EXAMPLES for w in sorted(c.parent.glob(".github/workflows/*.yml"))
    if not w.stem.endswith(("-build", "-merge", "-pr"))  # read through the main workflow
]
# Actions that write to no registry.
READERS = ("actions/checkout@", "actions/setup-python@", "docker/setup-buildx-action@",
           "actions/upload-artifact@", "actions/download-artifact@")
OTHER_WRITERS = re.compile(
    r"\b(?:(?:docker|podman|buildah|nerdctl)\s+(?:push|login|buildx|manifest|tag|build)"
    r"|skopeo\s+(?:copy|sync)|crane\s+\w|oras\s+\w|regctl\s+\w)"
)
EXPR = re.compile(r"\$\{\{\s*(secrets|vars)\.([A-Za-z0-9_]+)\s*\}\}")
MATRIX = re.compile(r"\$\{\{\s*matrix\.([a-z_]+)\s*\}\}")
KEYLESS = re.compile(r"!github\.event\.repository\.private")


def _writes(spec: ImageSpec, args: list[str], platform: str) -> list[str]:
    """The registry hosts a `cannery build` step writes to."""
    if "--push" not in args:
        return []
    if "--merge-only" in args:
        repos = [t.repository for t in spec.registries] or [spec.repository]
    else:
        repos = [spec.repository]
        if "--registry-cache" in args:
            repos.append(cache_ref(spec, platform))
    return list(dict.fromkeys(Reference.parse(r).host for r in repos))


def _host(name: str) -> str:
    return Reference.parse(name if "/" in name else f"{name}/x").host


def _substituted(env: dict[str, Any], matrix: dict[str, Any],
                 passed: set[str] | None) -> dict[str, str]:
    """The step's environment as the runner gives it: a secret or variable's value here
    names it (``secret:X``, ``var:X``); in a reusable workflow, a secret its call job did not
    pass (``passed``) is empty; ``matrix.X`` is the leg's value."""
    def secret(m: re.Match[str]) -> str:
        if m[1] == "secrets" and passed is not None and m[2] not in passed:
            return ""
        return f"{m[1].rstrip('s')}:{m[2]}"

    def leg(m: re.Match[str]) -> str:
        value = matrix[m[1]]
        return json.dumps(value) if not isinstance(value, str) else value

    return {k: MATRIX.sub(leg, EXPR.sub(secret, str(v))) for k, v in env.items()}


def _build_args(run: str, env: dict[str, str]) -> list[str] | None:
    """The arguments of the step's `cannery build` (a "${VAR}" word: its value), or None."""
    text = run.replace("\\\n", " ")
    for line in text.splitlines():
        words = shlex.split(line, comments=True) if "cannery build" in line else []
        if words[:2] == ["cannery", "build"]:
            return [env.get(w[2:-1], w) if w.startswith("${") and w.endswith("}") else w
                    for w in words[2:]]
    return None


def _applies(cond: object, matrix: dict[str, Any]) -> bool:
    """Whether a step's ``if`` lets it run for this leg (the matrix tests the workflows use)."""
    text = str(cond or "")
    for m in re.finditer(r"matrix\.registry == '([^']+)'", text):
        if matrix.get("registry") != m[1]:
            return False
    for m in re.finditer(r"contains\(matrix\.platforms, '([^']+)'\)", text):
        if m[1] not in matrix.get("platforms", []):
            return False
    return True


def _check_job(where: str, job: dict[str, Any], matrix: dict[str, Any],
               passed: set[str] | None, specs: dict[str, ImageSpec], tmp_path: Path) -> int:
    """Check one job's steps for one leg; how many of them write to a registry."""
    writers = 0
    logins: dict[str, tuple[str, dict[str, Any]]] = {}  # host -> (if, with)
    for step in job["steps"]:
        here = f"{where}: {step.get('name')}"
        used = str(step.get("uses", ""))
        if not _applies(step.get("if"), matrix):
            continue
        if used.startswith("docker/login-action@"):
            logins[_host(step["with"]["registry"])] = (KEYLESS.findall(str(step.get("if"))),
                                                       step["with"])
            continue
        if used.startswith("actions/attest@"):
            if step["with"].get("push-to-registry"):
                writers += 1
                host = _host(MATRIX.sub(lambda m: str(matrix[m[1]]),
                                        step["with"]["subject-name"]))
                assert host in logins, f"{here}: pushes to {host} with no login first"
                cond, given = logins[host]
                assert cond == KEYLESS.findall(str(step.get("if"))) != [], \
                    f"{here}: the login may be skipped"
                assert EXPR.fullmatch(str(given["username"])), here
                password = str(given["password"])
                assert password.startswith("${{ secrets."), here
                assert _substituted({"p": password}, matrix, passed)["p"], \
                    f"{here}: its login's password is not passed to this call"
            continue
        if used:
            assert used.startswith(READERS), f"{here}: {used}: what does it write?"
            continue
        run = str(step.get("run", ""))
        env = _substituted({**job.get("env", {}), **step.get("env", {})}, matrix, passed)
        args = _build_args(run, env)
        if args is None:
            assert not OTHER_WRITERS.search(run), f"{here}: what does it write?"
            continue
        spec = specs[args[0]]
        hosts = _writes(spec, args, str(matrix.get("platform", spec.platforms[0])))
        if not hosts:
            continue
        writers += 1
        creds = publish_credentials([spec], env=env, config_dir=tmp_path)
        for host in hosts:
            found = creds.lookup(host)
            assert found is not None, f"{here}: writes to {host} with no login"
            user, password = found
            assert user.startswith(("secret:", "var:")), here
            assert password.startswith("secret:"), f"{here}: a password not a secret"
    return writers


@pytest.mark.parametrize(("catalog", "workflow"), CASES,
                         ids=[w.parent.parent.parent.name for _, w in CASES])
def test_every_registry_write_has_its_login_first(
    catalog: Path | None, workflow: Path, tmp_path: Path
) -> None:
    """Every job of the main workflow, and every call job's reusable workflow run for each
    leg `cannery ci plan` gives it on a manual run of every image, with only the secrets that
    call job passes."""
    cat = load_catalog(catalog).catalog
    lock = read_lock(GOLDEN / "cannery.lock" if catalog is None
                     else catalog.parent / "cannery.lock")
    specs = {s.name: s for s in plan(cat, lock)}
    doc = yaml.safe_load(workflow.read_text())
    out = outputs(cat, list(specs.values()), "workflow_dispatch")
    writers = 0
    for jid, job in doc["jobs"].items():
        if "uses" not in job:
            writers += _check_job(f"{workflow.name}: {jid}", job, {}, None, specs, tmp_path)
            continue
        called = yaml.safe_load((workflow.parent / Path(job["uses"]).name).read_text())
        (inner,) = called["jobs"].values()
        kind, _, index = jid.partition("-")
        for leg in flat(out["pr" if kind == "pr" else f"{kind}_{index}"]):
            writers += _check_job(f"{job['uses']} for {jid}, {leg['image']}", inner, leg,
                                  set(job.get("secrets", {})), specs, tmp_path)
    # every leg and every merge writes, and was checked (and its attestation pushes)
    assert writers >= len(build_legs(out)) + len(merges(out)) > 0


def _broken(tmp_path: Path, change: Callable[[str, dict[str, Any]], None]) -> Path:
    """The mirror example's workflows copied, each file's YAML passed through ``change``."""
    catalog = ROOT / "examples" / "llamafactory-npu" / "cannery.toml"
    broken = tmp_path / "examples" / "x" / ".github" / "workflows"
    broken.mkdir(parents=True, exist_ok=True)
    for wf in catalog.parent.glob(".github/workflows/*.yml"):
        doc = yaml.safe_load(wf.read_text())
        change(wf.stem, doc)
        (broken / wf.name).write_text(yaml.safe_dump(doc, sort_keys=False))
    return broken / "docker_npu.yml"


def test_the_check_finds_a_missing_login(tmp_path: Path) -> None:
    """The test above fails when a writing step lacks its login: the mirror example's merge
    without its mirror's variables, or its call job not passing the mirror's secrets, the
    attestation push without its login step."""
    catalog = ROOT / "examples" / "llamafactory-npu" / "cannery.toml"

    def no_quay_env(stem: str, doc: dict[str, Any]) -> None:
        if stem.endswith("-merge"):
            step = next(s for s in doc["jobs"]["merge"]["steps"]
                        if "--merge-only" in str(s.get("run", "")))
            step["env"] = {k: v for k, v in step["env"].items() if "_QUAY_" not in k}

    def not_passed(stem: str, doc: dict[str, Any]) -> None:
        if stem == "docker_npu":
            for jid, job in doc["jobs"].items():
                if jid.startswith("merge-"):
                    job["secrets"] = {k: v for k, v in job["secrets"].items() if "QUAY" not in k}

    def no_login(stem: str, doc: dict[str, Any]) -> None:
        if stem.endswith("-merge"):
            job = doc["jobs"]["merge"]
            job["steps"] = [s for s in job["steps"]
                            if not str(s.get("uses", "")).startswith("docker/login-action@")]

    for change in (no_quay_env, not_passed):
        with pytest.raises(AssertionError, match=r"writes to quay\.io with no login"):
            test_every_registry_write_has_its_login_first(
                catalog, _broken(tmp_path / change.__name__, change), tmp_path)
    with pytest.raises(AssertionError, match="with no login first"):
        test_every_registry_write_has_its_login_first(
            catalog, _broken(tmp_path / "no_login", no_login), tmp_path)
