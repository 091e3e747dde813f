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
- Any other action, or a ``run:`` that calls docker, skopeo, crane, oras or buildah push, is an
  unknown writer and fails the test until this test knows what it writes.
"""

from __future__ import annotations

import re
import shlex
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

EXAMPLES = sorted((ROOT / "examples").glob("*/cannery.toml"))
CASES = [(None, GOLDEN / "workflow" / "embedded" / "cannery-images.yml")] + [
    (c, w) for c in EXAMPLES for w in sorted(c.parent.glob(".github/workflows/*.yml"))
]
# Actions that write to no registry.
READERS = ("actions/checkout@", "actions/setup-python@", "docker/setup-buildx-action@",
           "actions/upload-artifact@", "actions/download-artifact@")
OTHER_WRITERS = re.compile(
    r"\b(?:(?:docker|podman|buildah|nerdctl)\s+(?:push|login|buildx|manifest|tag|build)"
    r"|skopeo\s+(?:copy|sync)|crane\s+\w|oras\s+\w|regctl\s+\w)"
)
EXPR = re.compile(r"\$\{\{\s*(secrets|vars)\.([A-Za-z0-9_]+)\s*\}\}")


def _substituted(env: dict[str, Any]) -> dict[str, str]:
    """The step's environment as the runner gives it: a secret or variable's value here
    names it (``secret:X``, ``var:X``)."""
    return {k: EXPR.sub(lambda m: f"{m[1].rstrip('s')}:{m[2]}", str(v)) for k, v in env.items()}


def _build_args(run: str) -> list[str] | None:
    """The arguments of the step's `cannery build`, or None."""
    text = run.replace("\\\n", " ")
    for line in text.splitlines():
        words = shlex.split(line, comments=True) if "cannery build" in line else []
        if words[:2] == ["cannery", "build"]:
            return words[2:]
    return None


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


@pytest.mark.parametrize(("catalog", "workflow"), CASES,
                         ids=[w.parent.parent.parent.name for _, w in CASES])
def test_every_registry_write_has_its_login_first(
    catalog: Path | None, workflow: Path, tmp_path: Path
) -> None:
    cat = load_catalog(catalog).catalog
    lock = read_lock(GOLDEN / "cannery.lock" if catalog is None
                     else catalog.parent / "cannery.lock")
    specs = {s.name: s for s in plan(cat, lock)}
    doc = yaml.safe_load(workflow.read_text())
    writers = 0
    for jid, job in doc["jobs"].items():
        legs = (job.get("strategy") or {}).get("matrix", {}).get("include") or [{}]
        for leg in legs:
            logins: dict[str, tuple[object, dict[str, Any]]] = {}  # host -> (if, with)
            for step in job["steps"]:
                where = f"{workflow.name}: {jid}: {step.get('name')}"
                used = str(step.get("uses", ""))
                if used.startswith("docker/login-action@"):
                    logins[_host(step["with"]["registry"])] = (step.get("if"), step["with"])
                    continue
                if used.startswith("actions/attest@"):
                    if step["with"].get("push-to-registry"):
                        writers += 1
                        host = _host(step["with"]["subject-name"])
                        assert host in logins, f"{where}: pushes to {host} with no login first"
                        cond, given = logins[host]
                        assert cond == step.get("if"), f"{where}: the login may be skipped"
                        assert EXPR.fullmatch(str(given["username"])), where
                        assert str(given["password"]).startswith("${{ secrets."), where
                    continue
                if used:
                    assert used.startswith(READERS), f"{where}: {used}: what does it write?"
                    continue
                run = str(step.get("run", ""))
                args = _build_args(run)
                if args is None:
                    assert not OTHER_WRITERS.search(run), f"{where}: what does it write?"
                    continue
                spec = specs[args[0]]
                hosts = _writes(spec, args, str(leg.get("platform", spec.platforms[0])))
                if not hosts:
                    continue
                writers += 1
                env = _substituted({**job.get("env", {}), **step.get("env", {})})
                creds = publish_credentials([spec], env=env, config_dir=tmp_path)
                for host in hosts:
                    found = creds.lookup(host)
                    assert found is not None, f"{where}: writes to {host} with no login"
                    user, password = found
                    assert user.startswith(("secret:", "var:")), where
                    assert password.startswith("secret:"), f"{where}: a password not a secret"
    builds = [j for j in doc["jobs"] if j.startswith(("build-", "merge-"))]
    assert writers >= len(builds) > 0  # every build and merge job writes, and was checked


def test_the_check_finds_a_missing_login(tmp_path: Path) -> None:
    """The test above fails when a writing step lacks its login: the mirror example's merge
    job without its mirror's variables, the attestation push without its login step."""
    catalog = ROOT / "examples" / "llamafactory-npu" / "cannery.toml"
    (workflow,) = catalog.parent.glob(".github/workflows/*.yml")
    doc = yaml.safe_load(workflow.read_text())
    merge = next(j for jid, j in doc["jobs"].items() if jid.startswith("merge-"))
    step = next(s for s in merge["steps"] if "--merge-only" in str(s.get("run", "")))
    step["env"] = {k: v for k, v in step["env"].items() if "_QUAY_" not in k}
    broken = tmp_path / "examples" / "x" / ".github" / "workflows" / "w.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text(yaml.safe_dump(doc))
    with pytest.raises(AssertionError, match=r"writes to quay\.io with no login"):
        test_every_registry_write_has_its_login_first(catalog, broken, tmp_path)
    doc = yaml.safe_load(workflow.read_text())
    merge = next(j for jid, j in doc["jobs"].items() if jid.startswith("merge-"))
    merge["steps"] = [s for s in merge["steps"]
                      if not str(s.get("uses", "")).startswith("docker/login-action@")]
    broken.write_text(yaml.safe_dump(doc))
    with pytest.raises(AssertionError, match="with no login first"):
        test_every_registry_write_has_its_login_first(catalog, broken, tmp_path)
