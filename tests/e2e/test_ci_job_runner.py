"""Every example's own build and merge jobs, run job by job as a GitHub runner would, publish to
registries that require a password.

For each example family, one of its images is re-expressed as a *twin* catalog: the example's
``[ci]`` table, the registries that image publishes to (their secret and variable names and
media types kept, each repository moved to a loopback registry of its own that requires
another user's password), the catalog's name, the image's name, and its tag and aliases as the
example's lock makes them, written out, with the image's contents replaced by the stand-in
stack (its real base, CANN and wheels cannot be fetched here); the example's other registries
are kept as well, each with a stand-in image publishing there that is never built (the
reusable workflows serve every registry of a catalog). The twin is locked and rendered into a
git repository, and its jobs are first compared with the example's committed workflows: the
reusable workflows' jobs (build, merge, pull request) and the main workflow's call jobs of the
image's group have the same names, actions, conditions, env and scripts, step for step, once
the loopback repositories read as the example's (only the matrix legs, the steps named for a
platform the twin does not build, the group's index and the hashed install pins may differ).
So the image's jobs that then run are the example's own.
They run for a manual run (``workflow_dispatch``) naming the image through the job-graph
interpreter (tests/services/gha.py), which decides, as GitHub does, which jobs and matrix legs
run and in what order: ``check`` (its ``cannery ci plan`` for real), the group's build call
job and, in the reusable build workflow, a leg per platform of the image, then the merge call
job and its one merge; the pull-request and lock-update jobs are skipped by their own
``if:``. It evaluates every expression: the job's and step's ``env:`` with
``${{ secrets.X }}`` / ``${{ vars.X }}`` taken from a test dict holding what the example's
repository would hold (passed on to the reusable workflows as the call jobs say), matrix,
inputs, github, runner and steps' outputs. The steps run here: each leg gets a fresh clone
(its checkout) and a runner temp directory of its own; each ``run:`` is run with ``bash -e``
(GitHub's default shell) with GitHub's default variables, ``$GITHUB_OUTPUT`` read back into
the step's outputs, artifacts carried between jobs (a missing one fails the download step).
Nothing of the test's own environment names a registry credential: the jobs publish only with
what they declare.

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
from tests.services.gha import Interpreter, StepCall, StepFailed
from tests.services.gha_events import Event
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


class Steps:
    """A GitHub runner's steps for the job-graph interpreter (tests/services/gha.py), which
    decides which jobs and legs run, in what order, and evaluates every expression: each leg
    gets a clone of the repository (its checkout) and a runner temp directory of its own, each
    ``run:`` runs with ``bash -e`` in the declared env, ``$GITHUB_OUTPUT`` read back."""

    def __init__(self, repo: Path, root: Path, machine: dict[str, str]) -> None:
        self.repo, self.root, self.machine = repo, root, machine
        self.artifacts = root / "artifacts"
        self.logs: list[str] = []
        self.legs: dict[str, int] = {}

    def place(self, leg: str) -> Path:
        return self.root / "runner" / str(self.legs.setdefault(leg, len(self.legs)))

    def runner(self, leg: str) -> dict[str, Any]:
        temp = self.place(leg) / "temp"
        temp.mkdir(parents=True, exist_ok=True)
        return {"os": "Linux", "arch": "X64", "name": leg, "temp": str(temp)}

    def __call__(self, call: StepCall) -> dict[str, str]:
        work, temp = self.place(call.leg) / "work", Path(call.runner["temp"])
        used, given = call.uses, call.with_
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
            found = sorted(self.artifacts.glob(given.get("pattern") or given.get("name", "")))
            if not found:
                raise StepFailed(f"no artifact {given}")
            for art in found:  # by pattern, each in a directory of its own unless merged
                flat = "name" in given or given.get("merge-multiple") == "true"
                shutil.copytree(art, dest if flat else dest / art.name, dirs_exist_ok=True)
            return {}
        assert not used, f"{used}: no stand-in for this action"
        if call.name.startswith("Install cannery"):
            return {}  # cannery is importable; `cannery` on PATH runs it
        if call.name.startswith("Free runner disk space"):
            return {}  # a hosted runner's preinstalled toolchains; this machine has none
        assert "${{" not in str(call.step["run"])  # event data reaches scripts through env only
        run = str(call.run)
        if LEG_BACKEND in run:
            assert LEG_CACHE in run
            run = run.replace(LEG_BACKEND, "--backend buildah --network host").replace(
                LEG_CACHE, "")
        output = temp / f"output-{len(self.logs)}"
        output.touch()
        env = {
            **self.machine, **call.defaults, "GITHUB_WORKSPACE": str(work),
            "GITHUB_OUTPUT": str(output), **call.env,
        }
        done = subprocess.run(["bash", "-e", "-c", run], cwd=work, env=env, capture_output=True,
                              text=True, timeout=1200, stdin=subprocess.DEVNULL, check=False)
        self.logs.append(f"## {call.name}\n{done.stdout}{done.stderr}")
        assert done.returncode == 0, f"{call.name}: exit {done.returncode}\n" + "\n".join(
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
          pool: list[tuple[LocalRegistry, str, str]],
          ) -> tuple[str, dict[str, Any], dict[str, Any], dict[str, str]]:
    """The example's catalog with everything that decides its CI jobs kept (``[ci]``, the
    registries the image publishes to with their secret names and media types, the image's name)
    and the image's contents replaced by the stand-in stack (its real inputs cannot be fetched
    here). The example's other registries are kept too, each with a stand-in image of its own
    publishing there (``IMAGE-on-REGISTRY``, never built here): the reusable workflows serve
    every registry of the catalog, so the twin's are the example's only with all of them.
    Returns the catalog text, the registries the image publishes to and the others (name → pool
    entry) and the secrets/variables a repository of that example would hold."""
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
    others: dict[str, Any] = {}
    for other in cat.images.values():
        for name in [other.registry or cat.catalog.registry,
                     *(other.mirrors if other.mirrors is not None else cat.catalog.mirrors)]:
            if name and name not in used and name not in others:
                others[name] = pool[len(used) + len(others)]
    registries: dict[str, Any] = {}
    creds: dict[str, str] = {}
    every = {**used, **others}
    for name in [n for n in raw["registries"] if n in every]:  # in the example's order
        reg, user, password = every[name]
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
    for name in others:
        doc["images"][f"{image}-on-{name}"] = {
            **doc["images"][image], "registry": name, "mirrors": []}
    return tomli_w.dumps(doc), used, others, creds


def _group(root: Path, image: str) -> int:
    """The group (call jobs build-<i>, merge-<i>) of the catalog at ``root`` that ``image``
    is in: the one whose build legs a manual run naming it fills."""
    from cannery.commands.ci import Event as PlanEvent
    from cannery.commands.ci import plan_outputs
    from cannery.commands.render import context

    ctx = context(root / "cannery.toml", None)
    out = plan_outputs(ctx.loaded.catalog, ctx.specs(), PlanEvent("workflow_dispatch",
                                                                  images=image))
    (i,) = [int(k.split("_")[1]) for k, v in out.items()
            if k.startswith("build_") and json.loads(v)["count"]]
    return i


def _same_jobs(example: str, image: str, repo: Path, used: dict[str, Any],
               platforms: list[str]) -> None:
    """The twin's jobs for the image are the example's own, step for step: the reusable
    workflows' (build, merge, pull request) jobs and the main workflow's call jobs of the
    image's group have the same names, actions, conditions, env and scripts, once the loopback
    repositories read as the example's. Only the matrix legs, the steps named for a platform
    the twin does not build (it builds fewer), the group's index, and the hashed install pins
    may differ. The jobs that list every group (check, lock-update) are not compared."""
    path = ROOT / "examples" / example / "cannery.toml"
    raw = tomllib.loads(path.read_text())
    main = raw["ci"].get("workflow", WORKFLOW)
    stem = main.removesuffix(".yml")
    mine_i, theirs_i = _group(path.parent, image), _group(repo, image)

    def load(root: Path, rel: str, replace: bool) -> dict[str, Any]:
        text = json.dumps(yaml.safe_load((root / rel).read_text()))
        if replace:  # the twin's loopback repositories, and its group index, as the example's
            for name, (reg, _, _) in used.items():
                real = raw["registries"][name]["repository"]
                text = text.replace(f"{reg.host}/{example}/{name}", real)
                text = text.replace(reg.host, real.split("/")[0])
            text = re.sub(rf"\b(build|merge)([_-]){theirs_i}\b", rf"\g<1>\g<2>{mine_i}", text)
            text = text.replace(f"(group {theirs_i})", f"(group {mine_i})")
        return dict(json.loads(text))

    def kept(step: dict[str, Any]) -> bool:
        named = re.findall(r"linux/[a-z0-9]+(?:/v\d)?", str(step.get("name", "")))
        return all(p in platforms for p in named)

    def shape(job: dict[str, Any]) -> dict[str, Any]:
        job = {k: v for k, v in job.items() if k != "strategy" or "uses" in job}
        job["steps"] = [
            {k: v for k, v in s.items() if not (k == "run" and str(s.get("name", "")).startswith(
                "Install cannery"))} for s in job.get("steps", []) if kept(s)]
        return job

    for rel in (f"{stem}-build.yml", f"{stem}-merge.yml", f"{stem}-pr.yml"):
        theirs, mine = load(repo, rel, True), load(ROOT / "examples" / example, rel, False)
        call_t, call_m = theirs["on"]["workflow_call"], mine["on"]["workflow_call"]
        assert call_t["inputs"] == call_m["inputs"], (example, rel)
        assert call_t.get("secrets") == call_m.get("secrets"), (example, rel)
        assert theirs["jobs"].keys() == mine["jobs"].keys(), (example, rel)
        for jid in theirs["jobs"]:
            a, b = shape(theirs["jobs"][jid]), shape(mine["jobs"][jid])
            for i, (x, y) in enumerate(zip(a.pop("steps"), b.pop("steps"), strict=True)):
                assert x == y, (example, rel, jid, i, _differ(x, y))
            assert a == b, (example, rel, jid, _differ(a, b))
    theirs, mine = load(repo, main, True), load(ROOT / "examples" / example, main, False)
    for jid in (f"build-{mine_i}", f"merge-{mine_i}"):
        a, b = theirs["jobs"][jid], mine["jobs"][jid]
        assert a == b, (example, jid, _differ(a, b))


def _differ(x: Any, y: Any) -> Any:
    """What differs between two steps, and only that (pytest's own diff cuts nested dicts)."""
    if isinstance(x, dict) and isinstance(y, dict):
        return {k: _differ(x.get(k), y.get(k)) for k in x.keys() | y.keys() if x.get(k) != y.get(k)}
    return (x, y)


def _machine(tmp_path: Path, world: BuildWorld) -> dict[str, str]:
    """The runner's own environment: a ``cannery`` and ``python`` on PATH, a home with no
    docker login and no containers auth file, the test CA; no registry credential."""
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
    return machine


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_each_examples_build_and_merge_jobs_publish_to_registries_that_require_a_password(
    world: BuildWorld, pool: list[tuple[LocalRegistry, str, str]], tmp_path: Path,
    example: str,
) -> None:
    image = EXAMPLES[example]
    text, used, others, creds = _twin(example, image, world, pool)
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

    machine = _machine(tmp_path, world)
    twin = tomllib.loads(text)
    _same_jobs(example, image, repo, {**used, **others}, twin["images"][image]["platforms"])
    # A user name may come from a variable rather than a secret (llamafactory-npu's do).
    steps = Steps(repo, tmp_path, machine)
    (run,) = Interpreter(repo, steps, secrets=dict(creds), variables=dict(creds),
                         runner=steps.runner).run(Event.dispatch({"images": image, "force": False}))
    ran = [leg.job for leg in run.ran() if not leg.uses]
    built = [leg for leg in run.ran() if leg.job.endswith("/build")]
    assert ran[0] == "check" and built and ran[-1].endswith("/merge"), (
        {k: j.result for k, j in run.jobs.items()}, steps.logs)
    assert [leg.matrix["image"] for leg in built] == [image] * len(built)
    assert [leg.matrix["image"] for leg in run.ran() if leg.job.endswith("/merge")] == [image]
    assert not [leg for leg in run.ran() if leg.job.endswith("/pr")]
    assert all(leg.result == "success" for leg in run.ran()), steps.logs
    assert json.loads(run.jobs["check"].outputs["images"]) == [image]

    # Published: the tag and each alias name one index in each registry the image publishes
    # to, the same digest in registries of the same media types, with the leg's platform
    # manifest; no registry answers without its password, and a registry of the pool that the
    # image does not publish to holds nothing of it.
    arch = "amd64" if any(leg.matrix.get("arch") == "amd64" for leg in built) else "arm64"
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
    assert len(digests) == len({twin["registries"][n].get("media_types", "oci") for n in used})
    for reg, user, password in pool[len(used):]:  # the others' too: nothing of the image
        url = f"https://{reg.host}/v2/{example}/{next(iter(used))}/manifests/{tag}"
        assert httpx.get(url, headers=accept, verify=ca, auth=(user, password)).status_code == 404
    # The merge verified what it pushed (its last step), in every registry.
    assert "## Verify the pushed image" in steps.logs[-1]
    for _, _, password in pool:
        assert password not in "\n".join(steps.logs)
