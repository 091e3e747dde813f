"""The generated workflow, run job by job as a GitHub runner would, publishes to registries that
require a password.

A small catalog is locked and rendered into a git repository, in each shape of registry login
the examples' workflows have: ``mirror``, a first registry and a mirror, each with its own
secrets in its own variables (llamafactory-npu, cann-bases); ``single``, each image to one
registry, its secrets in the plain ``CANNERY_REGISTRY_USER`` / ``_PASSWORD`` (mindspeed-rl,
verl-ascend, vllm-ascend). (Each example's own workflow file is checked for a login before
every registry write by tests/unit/test_workflow_logins.py; its images cannot be built here.)
Its workflow's jobs then run in order for a manual run (``workflow_dispatch``, no images
named): ``check``, each leg of ``build-tiny``, ``merge-tiny``; the ``pr-*`` and
lock-update jobs are skipped by their own ``if:``, as on GitHub. Each job gets a fresh clone
(its checkout), a runner temp directory of its own, and the environment it declares: the job's
and step's ``env:`` with ``${{ secrets.X }}`` / ``${{ vars.X }}`` taken from a test dict, the
other expressions (matrix, inputs, github, runner, steps' outputs) evaluated; each ``run:`` is
run with ``bash -e`` (GitHub's default shell), ``$GITHUB_OUTPUT`` read back into the step's
outputs, artifacts carried between jobs. Nothing of the test's own environment names a
registry credential: the jobs publish only with what they declare.

Where the runner cannot be reproduced here:
- the build leg runs ``--backend buildah`` in place of ``--backend buildx --builder
  "${BUILDER}" --registry-cache`` (``docker buildx`` cannot run here; how BuildKit gets the
  login is tests/e2e/test_build_buildx_login.py), with ``--network host`` so the build reaches
  the loopback wheel index;
- the "Install cannery" step is skipped: cannery is importable, and a ``cannery`` on PATH runs
  it (the install step is tested on its own);
- ``uses:`` steps are stood in for: checkout (the clone), setup-python (the test's Python),
  setup-buildx (a builder name), upload/download-artifact (a directory per artifact); the
  keyless steps (login and actions/attest, which need GitHub's OIDC) are skipped by their own
  ``if:`` in a private repository;
- the registries' TLS certificates are from the test CA, given as ``CANNERY_CA_CERT``;
- amd64 only (the catalog's one platform): no qemu.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import yaml

from tests.catalogs import write_ci_lock
from tests.e2e.buildenv import BuildWorld, cleanup_local_images, make_world
from tests.services.registry import LocalRegistry, password_registry
from tests.services.tlsca import LocalCA

pytestmark = pytest.mark.e2e

if shutil.which("buildah") is None:  # CI installs it (scripts/test.sh)
    if os.environ.get("CI"):
        raise RuntimeError("buildah is not installed: scripts/test.sh installs it")
    pytest.skip("buildah is not installed (run scripts/test.sh)", allow_module_level=True)

TAG = "ci-8.5.2-py3.11"
CATALOG = """\
[catalog]
name = "ci"
source = "https://example.com/cannery-ci"
registry = "first"
{mirrors}
python_index = "{files}/wheels/simple/"

[registries.first]
repository = "{first}/ci/{shape}"
user_secret = "FIRST_USERNAME"
password_secret = "FIRST_TOKEN"
{mirror_table}

[bases.standin]
image = "{base}"
python = "3.11"
os = "debian"
os_version = "12"
chip = "910b"
toolkit_version = "8.5.1"

[toolkits.host]
version = "8.5.2"
provided = "host"

[components.hello]
pip = ["hello-cannery==1.0"]

[images.tiny]
base = "standin"
toolkit = "host"
platforms = ["linux/amd64"]
tag = "ci-{{cann}}-py{{python}}"
components = ["hello"]
smoke_imports = ["hello_cannery"]

[ci]
runners = {{ "linux/amd64" = "ubuntu-latest" }}
"""
LEG_BACKEND = '--backend buildx --builder "${BUILDER}"'
LEG_CACHE = "--registry-cache "


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, test_ca: LocalCA) -> Iterator[BuildWorld]:
    w = make_world(tmp_path_factory.mktemp("ciworld"), test_ca)
    yield w
    w.stop()
    cleanup_local_images()


@pytest.fixture(scope="module")
def mirror(world: BuildWorld, test_ca: LocalCA) -> Iterator[tuple[LocalRegistry, str, str]]:
    """A second registry that requires a password, another user's."""
    root = world.root / "mirror"
    root.mkdir()
    user, password = "mirrorer", secrets.token_urlsafe(18)
    reg = password_registry(root, (test_ca.server_cert, test_ca.server_key), user, password)
    yield reg, user, password
    reg.stop()


def _git(repo: Path, *args: str) -> str:
    ident = ["-c", "user.name=ci", "-c", "user.email=ci@example.com"]
    return subprocess.run(["git", *ident, *args], cwd=repo, capture_output=True, text=True,
                          check=True).stdout


class Runner:
    """Runs one workflow's jobs the way a GitHub runner does, for one event."""

    def __init__(self, doc: dict[str, Any], repo: Path, root: Path, machine: dict[str, str],
                 secret: dict[str, str], variables: dict[str, str]) -> None:
        self.doc, self.repo, self.root, self.machine = doc, repo, root, machine
        self.secrets, self.vars = secret, variables
        self.github = {"event_name": "workflow_dispatch", "ref": "refs/heads/main",
                       "ref_name": "main", "token": "",
                       "event": {"repository": {"fork": False, "private": True}, "before": ""}}
        self.inputs = {"images": "", "force": False}
        self.needs: dict[str, Any] = {}
        self.artifacts = root / "artifacts"
        self.ran: list[str] = []
        self.logs: list[str] = []

    # --- expressions: the subset the generated workflow uses
    def _context(self, extra: dict[str, Any]) -> dict[str, Any]:
        def ns(v: Any) -> Any:
            if isinstance(v, dict):
                return SimpleNamespace(**{k.replace("-", "_"): ns(x) for k, x in v.items()})
            return v

        ctx = {"github": self.github, "inputs": self.inputs, "secrets": self.secrets,
               "vars": self.vars, "needs": self.needs, **extra}
        return {k: ns(v) for k, v in ctx.items()} | {
            "contains": lambda a, b: b in a, "fromJSON": json.loads,
            "true": True, "false": False,
        }

    def evaluate(self, expr: str, extra: dict[str, Any]) -> Any:
        py = re.sub(r"!(?!=)", " not ", expr).replace("&&", " and ").replace("||", " or ")
        py = re.sub(r"(?<=[a-z])-(?=[a-z])", "_", py)  # needs.lock-update → needs.lock_update
        return eval(py, {"__builtins__": {}}, self._context(extra))  # the workflow's text

    def expand(self, text: str, extra: dict[str, Any]) -> str:
        def one(m: re.Match[str]) -> str:
            value = self.evaluate(m[1], extra)
            if isinstance(value, bool):
                return "true" if value else "false"
            return "" if value is None else str(value)

        return re.sub(r"\$\{\{\s*(.*?)\s*\}\}", one, text)

    def condition(self, cond: object, extra: dict[str, Any]) -> bool:
        if cond is None:
            return True
        text = str(cond).strip()
        m = re.fullmatch(r"\$\{\{\s*(.*?)\s*\}\}", text, re.S)
        return bool(self.evaluate(m[1] if m else text, extra))

    # --- jobs
    def run_all(self) -> None:
        results: dict[str, str] = {}
        for jid, job in self.doc["jobs"].items():
            needs = job.get("needs", [])
            needs = [needs] if isinstance(needs, str) else needs
            if any(results.get(n) != "success" for n in needs) or not self.condition(
                job.get("if"), {}
            ):
                results[jid] = "skipped"
                continue
            legs = (job.get("strategy") or {}).get("matrix", {}).get("include") or [{}]
            outputs: dict[str, str] = {}
            for leg in legs:
                outputs = self.run_job(jid, job, leg)
            results[jid] = "success"
            self.needs[jid] = {"outputs": outputs, "result": "success"}
        self.results = results

    def run_job(self, jid: str, job: dict[str, Any], leg: dict[str, Any]) -> dict[str, str]:
        name = f"{jid}-{leg.get('arch', 'job')}"
        self.ran.append(name)
        temp = self.root / "runner" / name / "temp"
        work = self.root / "runner" / name / "work"
        temp.mkdir(parents=True)
        steps: dict[str, Any] = {}
        extra = {"matrix": leg, "runner": {"temp": str(temp)}, "steps": steps}
        for step in job["steps"]:
            extra["steps"] = steps
            if not self.condition(step.get("if"), extra):
                continue
            outputs = self.run_step(job, step, extra, work, temp)
            if "id" in step:
                steps[step["id"]] = {"outputs": outputs}
        return {k: self.expand(v, extra) for k, v in (job.get("outputs") or {}).items()}

    def run_step(self, job: dict[str, Any], step: dict[str, Any], extra: dict[str, Any],
                 work: Path, temp: Path) -> dict[str, str]:
        used = str(step.get("uses", ""))
        given = {k: self.expand(str(v), extra) for k, v in (step.get("with") or {}).items()}
        if used.startswith("actions/checkout@"):
            subprocess.run(["git", "clone", "-q", str(self.repo), str(work)], check=True)
            return {}
        if used.startswith("actions/setup-python@"):
            return {}
        if used.startswith("docker/setup-buildx-action@"):
            return {"name": "builder-stand-in"}
        if used.startswith("actions/upload-artifact@"):
            src = Path(given["path"])
            assert any(src.rglob("*")), f"{given['name']}: no files (if-no-files-found: error)"
            shutil.copytree(src, self.artifacts / given["name"])
            return {}
        if used.startswith("actions/download-artifact@"):
            dest = Path(given["path"])
            found = sorted(self.artifacts.glob(given.get("pattern", given.get("name", ""))))
            assert found, given
            for art in found:
                shutil.copytree(art, dest, dirs_exist_ok=True)
            return {}
        assert not used, f"{used}: no stand-in for this action"
        if str(step["name"]).startswith("Install cannery"):
            return {}  # cannery is importable; `cannery` on PATH runs it
        run = str(step["run"])
        assert "${{" not in run  # event data reaches scripts through env only
        if LEG_BACKEND in run:
            assert LEG_CACHE in run
            run = run.replace(LEG_BACKEND, "--backend buildah --network host").replace(
                LEG_CACHE, "")
        output = temp / f"output-{len(self.logs)}"
        output.touch()
        declared = {**(job.get("env") or {}), **(step.get("env") or {})}
        env = {
            **self.machine,
            "CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(work),
            "GITHUB_REF": self.github["ref"], "GITHUB_EVENT_NAME": self.github["event_name"],
            "RUNNER_TEMP": str(temp), "GITHUB_OUTPUT": str(output),
            **{k: self.expand(str(v), extra) for k, v in declared.items()},
        }
        done = subprocess.run(["bash", "-e", "-c", run], cwd=work, env=env, capture_output=True,
                              text=True, timeout=1200, stdin=subprocess.DEVNULL, check=False)
        self.logs.append(f"## {step['name']}\n{done.stdout}{done.stderr}")
        assert done.returncode == 0, f"{step['name']}: exit {done.returncode}\n" + "\n".join(
            self.logs)[-6000:]
        return dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)


MIRROR = """
[registries.mirror]
repository = "{mirror}/ci/{shape}"
user_secret = "MIRROR_USERNAME"
password_secret = "MIRROR_TOKEN"
"""


@pytest.mark.parametrize("shape", ["mirror", "single"])
def test_the_generated_jobs_publish_to_registries_that_require_a_password(
    world: BuildWorld, mirror: tuple[LocalRegistry, str, str], tmp_path: Path, shape: str
) -> None:
    mirror_reg, mirror_user, mirror_password = mirror
    repo = tmp_path / "repo"
    repo.mkdir()
    mirrored = shape == "mirror"
    (repo / "cannery.toml").write_text(CATALOG.format(
        files=world.files.url, first=world.push_registry.host, base=world.base, shape=shape,
        mirrors='mirrors = ["mirror"]' if mirrored else "",
        mirror_table=MIRROR.format(mirror=mirror_reg.host, shape=shape) if mirrored else ""))
    # CI's pins of cannery itself: stand-ins (the Install step is skipped below), so the lock
    # does not resolve cannery's whole dependency tree from the test index.
    write_ci_lock(repo / "cannery.toml")
    # The repository's own preparation (a developer's machine): lock, render, commit.
    dev = {k: v for k, v in world.env().items() if not k.startswith("CANNERY_REGISTRY_")}
    for args in (["lock", "--catalog", "cannery.toml"], ["render", "--catalog", "cannery.toml"]):
        done = subprocess.run([sys.executable, "-m", "cannery", *args], cwd=repo, env=dev,
                              capture_output=True, text=True, check=False, timeout=600)
        assert done.returncode == 0, done.stderr
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "catalog, lock and rendered files")

    bindir = tmp_path / "bin"
    bindir.mkdir()
    shim = bindir / "cannery"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m cannery "$@"\n')
    shim.chmod(0o755)
    (bindir / "python").symlink_to(sys.executable)
    home = tmp_path / "home"  # the runner's home: no docker login, no containers auth file
    home.mkdir()
    machine = {
        k: v for k, v in os.environ.items()
        if k in ("LANG", "PYTHONPATH", "BUILDAH_ISOLATION", "CONTAINERS_STORAGE_CONF", "TMPDIR")
    }
    machine.update(PATH=f"{bindir}:{os.environ['PATH']}", HOME=str(home),
                   CANNERY_CA_CERT=str(world.ca.ca_cert),
                   CANNERY_CACHE_DIR=str(world.root / "cache"))
    assert not [k for k in machine if k.startswith("CANNERY_REGISTRY_")]

    doc = yaml.safe_load((repo / ".github" / "workflows" / "cannery-images.yml").read_text())
    step_env = [s.get("env", {}) for j in doc["jobs"].values() for s in j["steps"]]
    names = {k for e in step_env for k in e if k.startswith("CANNERY_REGISTRY_")}
    assert names == ({"CANNERY_REGISTRY_FIRST_USER", "CANNERY_REGISTRY_FIRST_PASSWORD",
                      "CANNERY_REGISTRY_MIRROR_USER", "CANNERY_REGISTRY_MIRROR_PASSWORD"}
                     if mirrored else {"CANNERY_REGISTRY_USER", "CANNERY_REGISTRY_PASSWORD"})
    users = {"FIRST_USERNAME": world.user, "MIRROR_USERNAME": mirror_user}
    runner = Runner(
        doc, repo, tmp_path, machine,
        secret={**users, "FIRST_TOKEN": world.password, "MIRROR_TOKEN": mirror_password},
        variables=users,  # a user name may come from a variable rather than a secret
    )
    runner.run_all()
    assert runner.ran == ["check-job", "build-tiny-amd64", "merge-tiny-job"], runner.results
    assert runner.results["pr-tiny"] == "skipped"
    assert json.loads(runner.needs["check"]["outputs"]["images"]) == ["tiny"]

    # Published: the tag names one index in each registry, the same digest, with the leg's
    # platform manifest; neither registry answers without its password.
    ca = ssl.create_default_context(cafile=str(world.ca.ca_cert))
    accept = {"Accept": "application/vnd.oci.image.index.v1+json"}
    digests = set()
    for reg, auth in ((world.push_registry, (world.user, world.password)),
                      (mirror_reg, (mirror_user, mirror_password))):
        url = f"https://{reg.host}/v2/ci/{shape}/manifests/{TAG}"
        assert httpx.get(url, headers=accept, verify=ca).status_code == 401
        resp = httpx.get(url, headers=accept, verify=ca, auth=auth)
        if reg is mirror_reg and not mirrored:
            assert resp.status_code == 404  # published where the catalog says, only there
            continue
        assert resp.status_code == 200, (reg.host, resp.text)
        index = resp.json()
        assert [m["platform"]["architecture"] for m in index["manifests"]] == ["amd64"]
        digests.add(resp.headers["docker-content-digest"])
    assert len(digests) == 1
    # The merge verified what it pushed (its last step), in every registry.
    assert "## Verify the pushed image" in runner.logs[-1]
    for password in (world.password, mirror_password):
        assert password not in "\n".join(runner.logs)
