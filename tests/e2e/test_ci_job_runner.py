"""Every example's own build and merge jobs, run job by job as a GitHub runner would, publish to
registries that require a password.

For each example family, one of its images is re-expressed as a *twin* catalog: the example's
``[ci]`` table, the registries that image publishes to (their secret and variable names and
media types kept, each repository moved to a loopback registry of its own that requires
another user's password), the catalog's name, the image's name, and its tag and aliases as the
example's lock makes them, written out, with the image's contents
replaced by the stand-in stack (its real base, CANN and wheels cannot be fetched here). The
twin is locked and rendered into a git repository, and its jobs are first compared with the
example's committed workflow: the same names, actions, conditions, env and scripts, step for
step, once the loopback repositories read as the example's (only the matrix legs, the steps
named for a platform the twin does not build, and the hashed install pins may differ). So the
image's jobs that then run are the example's own.
They run in order for a manual run (``workflow_dispatch``, no images named): ``check``, each
leg of the image's build job, its merge job; the ``pr-*`` and lock-update jobs are skipped by
their own ``if:``, as on GitHub. Each job gets a fresh clone (its checkout), a runner temp
directory of its own, and the environment it declares: the job's and step's ``env:`` with
``${{ secrets.X }}`` / ``${{ vars.X }}`` taken from a test dict holding what the example's
repository would hold, the other expressions (matrix, inputs, github, runner, steps' outputs)
evaluated; each ``run:`` is run with ``bash -e`` (GitHub's default shell), ``$GITHUB_OUTPUT``
read back into the step's outputs, artifacts carried between jobs. Nothing of the test's own
environment names a registry credential: the jobs publish only with what they declare.

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
- the "Free runner disk space" step is skipped (it removes a hosted runner's toolchains);
- each twin builds the amd64 leg where the example builds amd64 (no qemu), and mindspeed-rl,
  which builds arm64 only, its arm64 leg under qemu.
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
import tomli_w
import tomllib
import yaml

from cannery.catalog.load import load_catalog
from cannery.lock import read_lock
from cannery.plan import plan_image
from tests.catalogs import write_ci_lock
from tests.e2e.buildenv import BuildWorld, cleanup_local_images, make_world
from tests.services.registry import LocalRegistry, password_registry
from tests.services.tlsca import LocalCA

pytestmark = pytest.mark.e2e

if shutil.which("buildah") is None:  # CI installs it (scripts/test.sh)
    if os.environ.get("CI"):
        raise RuntimeError("buildah is not installed: scripts/test.sh installs it")
    pytest.skip("buildah is not installed (run scripts/test.sh)", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ".github/workflows/cannery-images.yml"
LEG_BACKEND = '--backend buildx --builder "${BUILDER}"'
LEG_CACHE = "--registry-cache "


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, test_ca: LocalCA) -> Iterator[BuildWorld]:
    w = make_world(tmp_path_factory.mktemp("ciworld"), test_ca)
    yield w
    w.stop()
    cleanup_local_images()


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
        # Outside string literals only: an image name ('8-5-2-910b-openeuler') keeps its dashes.
        parts = re.split(r"('[^']*')", expr)
        for i in range(0, len(parts), 2):
            code = re.sub(r"!(?!=)", " not ", parts[i]).replace("&&", " and ")
            code = code.replace("||", " or ")
            parts[i] = re.sub(r"(?<=[a-z])-(?=[a-z])", "_", code)  # needs.lock-update
        py = "".join(parts)
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
        if str(step["name"]).startswith("Free runner disk space"):
            return {}  # a hosted runner's preinstalled toolchains; this machine has none
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


# Each example's jobs are run for one of its images, chosen for the login shape it exercises.
EXAMPLES = {
    # four registries, two with Docker media types
    "cann-bases": "9.1.0-beta.3-910b-openeuler24.03-py3.11-runtime",
    "llamafactory-npu": "a2-ubuntu",  # a mirror; user names from variables, not secrets
    "mindspeed-rl": "mindspeed-rl",  # arm64 only (a leg under qemu); no secret names given
    "verl-ascend": "qwen3-5-a2",  # the seed's image; per-registry secret names
    "vllm-ascend": "daily-a2-ubuntu",  # an image published to its own registry, not the default
}
DEFAULT_USER, DEFAULT_PASSWORD = "REGISTRY_USER", "REGISTRY_PASSWORD"  # no names in the catalog


@pytest.fixture(scope="module")
def pool(world: BuildWorld, test_ca: LocalCA) -> Iterator[list[tuple[LocalRegistry, str, str]]]:
    """Four registries that each require a password, each another user's: one per registry an
    example image publishes to (cann-bases has four)."""
    regs = [(world.push_registry, world.user, world.password)]
    for n in range(3):
        root = world.root / f"pool{n}"
        root.mkdir()
        user, password = f"pusher{n}", secrets.token_urlsafe(18)
        regs.append((password_registry(root, (test_ca.server_cert, test_ca.server_key), user,
                                       password), user, password))
    yield regs
    for reg, _, _ in regs[1:]:
        reg.stop()


def _twin(example: str, image: str, world: BuildWorld,
          pool: list[tuple[LocalRegistry, str, str]]) -> tuple[str, dict[str, Any], dict[str, str]]:
    """The example's catalog with everything that decides its CI jobs kept (``[ci]``, the
    registries the image publishes to with their secret names and media types, the image's name)
    and the image's contents replaced by the stand-in stack (its real inputs cannot be fetched
    here). Returns the catalog text, the registries it publishes to (name → pool entry) and the
    secrets/variables a repository of that example would hold."""
    path = ROOT / "examples" / example / "cannery.toml"
    raw = tomllib.loads(path.read_text())
    cat = load_catalog(path).catalog
    spec = cat.images[image]
    # The example's own tag and aliases, as its lock makes them, written out: the stand-in base
    # would fill {chip}, {os_version}... with its own values.
    planned = plan_image(cat, image, read_lock(path.with_name("cannery.lock")))
    first = spec.registry or cat.catalog.registry
    assert first, f"{example}: {image} publishes nowhere"
    mirrors = spec.mirrors if spec.mirrors is not None else cat.catalog.mirrors
    used = {name: pool[i] for i, name in enumerate([first, *mirrors])}
    registries: dict[str, Any] = {}
    creds: dict[str, str] = {}
    for name, (reg, user, password) in used.items():
        table = dict(raw["registries"][name])
        table["repository"] = f"{reg.host}/{example}/{name}"
        registries[name] = table
        creds[table.get("user_secret") or table.get("user_var") or DEFAULT_USER] = user
        creds[table.get("password_secret") or DEFAULT_PASSWORD] = password
    ci = {k: v for k, v in raw["ci"].items() if k != "original"}  # compare's, not CI's
    amd64 = "linux/amd64" in spec.platforms
    doc = {
        "catalog": {"name": cat.catalog.name, "source": f"https://example.com/{example}",
                    "registry": first, "mirrors": list(mirrors),
                    "python_index": f"{world.files.url}/wheels/simple/"},
        "registries": registries,
        "bases": {"standin": {"image": world.base, "python": "3.11", "os": "debian",
                              "os_version": "12", "chip": "910b", "toolkit_version": "8.5.1"}},
        "toolkits": {"host": {"version": "8.5.2", "provided": "host"}},
        "components": {"hello": {"pip": ["hello-cannery==1.0"]}},
        "images": {image: {
            "base": "standin", "toolkit": "host",
            # amd64 where the example builds it (no qemu); arm64 only where that is all it has
            "platforms": ["linux/amd64"] if amd64 else list(spec.platforms),
            "tag": planned.tag, "aliases": list(planned.aliases),
            "components": ["hello"], "smoke_imports": ["hello_cannery"],
        }},
        "ci": ci,
    }
    return tomli_w.dumps(doc), used, creds


def _same_jobs(example: str, image: str, twin: dict[str, Any], used: dict[str, Any],
               platforms: list[str]) -> None:
    """The twin's jobs for the image are the example's own, step for step: same names, actions,
    conditions, env and scripts, once the loopback repositories read as the example's. Only the
    matrix legs and the steps named for a platform the twin does not build (it builds fewer)
    and the hashed install pins (the twin's lock holds stand-ins) may differ. The jobs that list
    every image (check, lock-update) are not compared: the twin has one."""
    path = ROOT / "examples" / example / "cannery.toml"
    raw = tomllib.loads(path.read_text())
    wf = ROOT / "examples" / example / raw["ci"].get("workflow", WORKFLOW)
    mine = yaml.safe_load(wf.read_text())
    text = json.dumps(twin)
    for name, (reg, _, _) in used.items():
        text = text.replace(f"{reg.host}/{example}/{name}", raw["registries"][name]["repository"])
        text = text.replace(reg.host, raw["registries"][name]["repository"].split("/")[0])
    theirs = json.loads(text)

    def built(step: dict[str, Any]) -> bool:
        named = re.findall(r"linux/[a-z0-9]+(?:/v\d)?", str(step.get("name", "")))
        return all(p in platforms for p in named)

    def shape(job: dict[str, Any]) -> dict[str, Any]:
        job = {k: v for k, v in job.items() if k != "strategy"}
        job["steps"] = [
            {k: v for k, v in s.items() if not (k == "run" and str(s.get("name", "")).startswith(
                "Install cannery"))} for s in job["steps"] if built(s)]
        return job

    shared = [j for j in theirs["jobs"] if j in mine["jobs"]]
    assert any(j.startswith("build") for j in shared) and any(j.startswith("merge")
                                                                for j in shared), shared
    for jid in shared:
        if not jid.endswith(f"-{image}"):  # check and lock-update list every image
            continue
        a, b = shape(theirs["jobs"][jid]), shape(mine["jobs"][jid])
        for i, (x, y) in enumerate(zip(a.pop("steps"), b.pop("steps"), strict=True)):
            assert x == y, (example, jid, i, _differ(x, y))
        assert a == b, (example, jid)
        legs = (theirs["jobs"][jid].get("strategy") or {}).get("matrix", {}).get("include", [])
        all_legs = (mine["jobs"][jid].get("strategy") or {}).get("matrix", {}).get("include", [])
        assert all(leg in all_legs for leg in legs), (example, jid)


def _differ(x: Any, y: Any) -> Any:
    """What differs between two steps, and only that (pytest's own diff cuts nested dicts)."""
    if isinstance(x, dict) and isinstance(y, dict):
        return {k: _differ(x.get(k), y.get(k)) for k in x.keys() | y.keys() if x.get(k) != y.get(k)}
    return (x, y)


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_each_examples_build_and_merge_jobs_publish_to_registries_that_require_a_password(
    world: BuildWorld, pool: list[tuple[LocalRegistry, str, str]], tmp_path: Path,
    example: str,
) -> None:
    image = EXAMPLES[example]
    text, used, creds = _twin(example, image, world, pool)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "cannery.toml").write_text(text)
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

    twin = tomllib.loads(text)
    doc = yaml.safe_load((repo / twin["ci"].get("workflow", WORKFLOW)).read_text())
    _same_jobs(example, image, doc, used, twin["images"][image]["platforms"])
    # A user name may come from a variable rather than a secret (llamafactory-npu's do).
    runner = Runner(doc, repo, tmp_path, machine, secret=dict(creds), variables=dict(creds))
    runner.run_all()
    built = [r for r in runner.ran if r.startswith("build")]
    assert runner.ran[0] == "check-job" and built and runner.ran[-1].startswith("merge"), (
        runner.results, runner.needs, runner.logs)
    assert json.loads(runner.needs["check"]["outputs"]["images"]) == [image]

    # Published: the tag and each alias name one index in each registry the image publishes
    # to, the same digest in registries of the same media types, with the leg's platform
    # manifest; no registry answers without its password, and a registry of the pool that the
    # image does not publish to holds nothing of it.
    arch = "amd64" if any(r.endswith("-amd64") for r in built) else "arm64"
    tag = twin["images"][image]["tag"]
    ca = ssl.create_default_context(cafile=str(world.ca.ca_cert))
    accept = {"Accept": "application/vnd.oci.image.index.v1+json, "
                        "application/vnd.docker.distribution.manifest.list.v2+json"}
    digests = set()
    for name, (reg, user, password) in used.items():
        url = f"https://{reg.host}/v2/{example}/{name}/manifests/{tag}"
        assert httpx.get(url, headers=accept, verify=ca).status_code == 401
        resp = httpx.get(url, headers=accept, verify=ca, auth=(user, password))
        assert resp.status_code == 200, (name, resp.text)
        assert [m["platform"]["architecture"] for m in resp.json()["manifests"]] == [arch]
        digests.add(resp.headers["docker-content-digest"])
        for alias in twin["images"][image]["aliases"]:
            resp = httpx.get(url.replace(f"/manifests/{tag}", f"/manifests/{alias}"),
                             headers=accept, verify=ca, auth=(user, password))
            assert resp.headers["docker-content-digest"] in digests, (name, alias)
    assert len(digests) == len({t.get("media_types", "oci") for t in twin["registries"].values()})
    for reg, user, password in pool[len(used):]:
        url = f"https://{reg.host}/v2/{example}/{next(iter(used))}/manifests/{tag}"
        assert httpx.get(url, headers=accept, verify=ca, auth=(user, password)).status_code == 404
    # The merge verified what it pushed (its last step), in every registry.
    assert "## Verify the pushed image" in runner.logs[-1]
    for _, _, password in pool:
        assert password not in "\n".join(runner.logs)
