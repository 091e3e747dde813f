"""`cannery lock` against real services on 127.0.0.1: Debian's docker-registry (plain, and TLS
with htpasswd auth), a local git repository, and an HTTPS file server signed by a test CA.

The CANN installers cannot be fetched here; small stand-in `.run` files take their place.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cannery import __version__
from cannery.lock import read_lock
from tests.catalogs import minimal, pyproject
from tests.services.peak import Measured, run_measured
from tests.services.pyindex import PackageIndex
from tests.services.registry import LocalRegistry, password_registry, push_image, push_index
from tests.services.tlsca import HTTPSFileServer, LocalCA

pytestmark = pytest.mark.e2e


def _git(cwd: Path, *args: str) -> str:
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.com",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.com",
    )
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture(scope="module")
def py_index(tmp_path_factory: pytest.TempPathFactory, test_ca: LocalCA) -> Iterator[PackageIndex]:
    """A local package index (HTTPS, test CA) with stand-ins for what the test catalog needs."""
    index = PackageIndex(tmp_path_factory.mktemp("pyindex"), test_ca)
    index.add("torch", "2.9.0", ("numpy-lite>=1",))
    index.add("torch-npu", "2.9.0", ("torch==2.9.0",))
    index.add("numpy-lite", "1.0")
    index.add("numpy-lite", "2.0")
    index.add("setuptools", "80.0")
    # what `cannery lock` resolves [ci] install (this cannery's version) to
    index.add("cannery", __version__.split("+")[0])
    yield index
    index.stop()


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "v.git"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "f").write_text("1")
    # a Python project with static metadata: `cannery lock` reads its dependencies
    (repo / "pyproject.toml").write_text(pyproject("vllm", "0.18.0"))
    _git(repo, "add", "f", "pyproject.toml")
    _git(repo, "commit", "-qm", "one")
    _git(repo, "tag", "-a", "v0.18.0", "-m", "release")  # annotated: ls-remote must peel it
    (repo / "f").write_text("2")
    (repo / "pyproject.toml").write_text(pyproject("vllm-ascend", "0.18.0"))
    _git(repo, "commit", "-qam", "two")
    return repo


@pytest.fixture
def setup(
    tmp_path: Path,
    registry: LocalRegistry,
    https_files: tuple[HTTPSFileServer, Path],
    git_repo: Path,
    py_index: PackageIndex,
) -> dict[str, object]:
    server, root = https_files
    files = {}
    for arch in ("x86_64", "aarch64"):
        name = f"Ascend-cann-toolkit_8.5.2_linux-{arch}.run"
        data = f"#!/bin/sh\necho stand-in {arch} {tmp_path.name}\n".encode()
        (root / name).write_bytes(data)
        files[arch] = hashlib.sha256(data).hexdigest()
    repo = f"ascendhub/cann-{tmp_path.name.lower()}"
    index_digest = push_index(registry.url, repo, "8.5.1-910b-ubuntu22.04-py3.11", "first")
    base_image = f"{registry.host}/{repo}:8.5.1-910b-ubuntu22.04-py3.11"
    catalog = tmp_path / "catalog.toml"
    catalog.write_text(
        minimal(
            registry=registry.host,
            base_image=base_image,
            files=server.url,
            git=f"file://{git_repo}",
            index=py_index.url,
        )
    )
    return {
        "catalog": catalog,
        "index": index_digest,
        "files": files,
        "repo": repo,
        "git": git_repo,
        "base_image": base_image,
    }


def test_lock_resolves_every_moving_reference(setup, cli, test_ca: LocalCA) -> None:  # type: ignore[no-untyped-def]
    catalog: Path = setup["catalog"]
    res = cli("lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert))
    assert res.code == 0, res.err
    lock = read_lock(catalog.parent / "cannery.lock")
    assert lock.bases[setup["base_image"]].digest == setup["index"]
    git: Path = setup["git"]
    tag_commit = _git(git, "rev-parse", "v0.18.0^{commit}")
    main_commit = _git(git, "rev-parse", "main")
    assert tag_commit != main_commit
    commits = {e.ref: e.commit for e in lock.git.values()}
    assert commits == {"v0.18.0": tag_commit, "main": main_commit}
    shas = {k.rsplit("-", 1)[-1].removesuffix(".run"): v.sha256 for k, v in lock.urls.items()}
    assert shas == setup["files"]

    # Rendering now uses only locked values.
    out = catalog.parent / "out"
    assert cli("render", "dockerfile", "--catalog", str(catalog), "--out", str(out)).code == 0
    text = (out / "one.Dockerfile").read_text()
    assert f"@{setup['index']} AS arch-amd64" in text
    assert "UNLOCKED" not in text
    assert setup["files"]["aarch64"] in text and tag_commit in text


def test_relock_is_stable_and_update_moves_one_entry(setup, cli, registry, test_ca) -> None:  # type: ignore[no-untyped-def]
    catalog: Path = setup["catalog"]
    lockfile = catalog.parent / "cannery.lock"
    assert cli("lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert)).code == 0
    first = lockfile.read_bytes()
    res = cli("lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert))
    assert res.code == 0 and "unchanged" in res.out
    assert lockfile.read_bytes() == first

    # The tag moves upstream: the lock keeps the old digest until asked to update it.
    moved = push_index(registry.url, setup["repo"], "8.5.1-910b-ubuntu22.04-py3.11", "second")
    assert moved != setup["index"]
    assert cli("lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert)).code == 0
    assert lockfile.read_bytes() == first
    assert (
        cli(
            "lock", "--catalog", str(catalog), "--update", "b910", "--ca-cert", str(test_ca.ca_cert)
        ).code
        == 0
    )
    after = read_lock(lockfile)
    assert after.bases[setup["base_image"]].digest == moved
    # Nothing else was re-resolved.
    old_text = first.decode()
    new_text = lockfile.read_text()
    changed = [ln for ln in new_text.splitlines() if ln not in old_text.splitlines()]
    assert any(line.startswith("digest") for line in changed)
    assert all(line.startswith(("digest", "resolved_at")) for line in changed), changed


def test_unknown_update_name(setup, cli, test_ca) -> None:  # type: ignore[no-untyped-def]
    res = cli(
        "lock",
        "--catalog",
        str(setup["catalog"]),
        "--update",
        "nope",
        "--ca-cert",
        str(test_ca.ca_cert),
    )
    assert res.code == 2 and "--update nope" in res.err


def test_untrusted_certificate_fails_and_writes_nothing(setup, cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("CANNERY_CA_CERT", raising=False)
    catalog: Path = setup["catalog"]
    res = cli("lock", "--catalog", str(catalog))
    assert res.code == 2
    assert "not trusted" in res.err and "--ca-cert" in res.err
    assert "Traceback" not in res.err
    assert not (catalog.parent / "cannery.lock").exists()


def test_ca_from_environment(setup, cli, monkeypatch, test_ca) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("CANNERY_CA_CERT", str(test_ca.ca_cert))
    assert cli("lock", "--catalog", str(setup["catalog"])).code == 0


def test_unreachable_registry(tmp_path: Path, cli, https_files, git_repo, test_ca) -> None:  # type: ignore[no-untyped-def]
    from tests.services.registry import free_port

    server, _ = https_files
    catalog = tmp_path / "catalog.toml"
    catalog.write_text(
        minimal(registry=f"127.0.0.1:{free_port()}", files=server.url, git=f"file://{git_repo}")
    )
    res = cli("lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert))
    assert res.code == 2
    assert "registry unreachable" in res.err and "Traceback" not in res.err
    assert not (tmp_path / "cannery.lock").exists()


def test_missing_git_ref(setup, cli, test_ca) -> None:  # type: ignore[no-untyped-def]
    catalog: Path = setup["catalog"]
    catalog.write_text(catalog.read_text().replace('ref = "main"', 'ref = "no-such-branch"'))
    res = cli("lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert))
    assert res.code == 2 and "no tag or branch named 'no-such-branch'" in res.err


@pytest.fixture(scope="module")
def auth_registry(tmp_path_factory, test_ca: LocalCA):  # type: ignore[no-untyped-def]
    reg = password_registry(tmp_path_factory.mktemp("authreg"),
                            (test_ca.server_cert, test_ca.server_key), "puller", "s3cret-Passw0rd")
    yield reg
    reg.stop()


def test_tls_registry_with_credentials_from_docker_config(  # type: ignore[no-untyped-def]
    tmp_path: Path, cli, auth_registry, test_ca, https_files, git_repo, monkeypatch, py_index
) -> None:
    import ssl

    ctx = ssl.create_default_context(cafile=str(test_ca.ca_cert))
    digest = push_image(
        auth_registry.url,
        "ascendhub/cann",
        "8.5.1-910b-ubuntu22.04-py3.11",
        verify=ctx,
        auth=("puller", "s3cret-Passw0rd"),
    )
    server, _ = https_files
    catalog = tmp_path / "catalog.toml"
    base_image = f"{auth_registry.host}/ascendhub/cann:8.5.1-910b-ubuntu22.04-py3.11"
    catalog.write_text(
        minimal(
            registry=auth_registry.host,
            base_image=base_image,
            files=server.url,
            git=f"file://{git_repo}",
            index=py_index.url,
        )
    )
    # No credentials: the registry says 401 and lock says so, without a traceback.
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "empty"))
    res = cli("lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert))
    assert res.code == 2 and "401" in res.err

    cfg = tmp_path / "docker"
    cfg.mkdir()
    token = base64.b64encode(b"puller:s3cret-Passw0rd").decode()
    (cfg / "config.json").write_text(json.dumps({"auths": {auth_registry.host: {"auth": token}}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(cfg))
    res = cli("--debug", "lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert))
    assert res.code == 0, res.err
    assert read_lock(tmp_path / "cannery.lock").bases[base_image].digest == digest
    lock_text = (tmp_path / "cannery.lock").read_text()
    for text in (res.out, res.err, lock_text):
        assert "s3cret" not in text and token not in text


def test_rendered_installer_step_fails_closed_on_checksum_mismatch(  # type: ignore[no-untyped-def]
    setup, cli, test_ca, https_files, tmp_path: Path
) -> None:
    """Run the rendered toolkit RUN body with bash (as a builder would) against the HTTPS server:
    the real installer runs; a tampered installer stops at sha256sum before it is executed."""
    catalog: Path = setup["catalog"]
    assert cli("lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert)).code == 0
    out = tmp_path / "out"
    assert cli("render", "dockerfile", "--catalog", str(catalog), "--out", str(out)).code == 0
    import dockerfile

    cmds = dockerfile.parse_file(str(out / "one.Dockerfile"))
    body = next(c.value[0] for c in cmds if c.cmd == "RUN" and "toolkit.run" in c.value[0])
    env = dict(os.environ, TARGETARCH="amd64", CURL_CA_BUNDLE=str(test_ca.ca_cert))
    ok = subprocess.run(
        ["bash", "-o", "pipefail", "-c", body], env=env, capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr
    assert f"stand-in x86_64 {setup['catalog'].parent.name}" in ok.stdout

    _, root = https_files
    (root / "Ascend-cann-toolkit_8.5.2_linux-x86_64.run").write_text("#!/bin/sh\necho EVIL\n")
    bad = subprocess.run(
        ["bash", "-o", "pipefail", "-c", body], env=env, capture_output=True, text=True
    )
    assert bad.returncode != 0
    assert "EVIL" not in bad.stdout
    # the check names the URL and both digests
    evil = hashlib.sha256(b"#!/bin/sh\necho EVIL\n").hexdigest()
    assert re.search(rf"cannery: https://\S+/Ascend-cann-toolkit_8\.5\.2_linux-x86_64\.run: "
                     rf"sha256 {evil}, but cannery\.lock has [0-9a-f]{{64}}", bad.stderr)
    unknown = subprocess.run(
        ["bash", "-o", "pipefail", "-c", body],
        env=dict(env, TARGETARCH="s390x"),
        capture_output=True,
        text=True,
    )
    assert unknown.returncode == 1 and "TARGETARCH=s390x" in unknown.stderr


@pytest.mark.parametrize("needs_login", [False, True], ids=["anonymous-token", "login-token"])
def test_bearer_token_auth(  # type: ignore[no-untyped-def]
    needs_login: bool, tmp_path: Path, cli, https_files, git_repo, test_ca, monkeypatch, py_index
) -> None:
    """A registry behind a token service (Bearer auth, as Docker Hub and quay.io do): lock
    follows the 401 challenge to the realm, with the scope the registry asked for, and
    presents Docker-config credentials to the token service only."""
    from tests.services.token import TokenServer

    storage = tmp_path / "registry"
    storage.mkdir()
    open_reg = LocalRegistry(storage)  # push without auth, then serve the same storage
    digest = push_image(open_reg.url, "ascendhub/cann", "8.5.1-910b-ubuntu22.04-py3.11")
    open_reg.stop()
    creds = ("puller", "t0ken-Passw0rd") if needs_login else None
    tokens = TokenServer(tmp_path / "token", credentials=creds)
    reg = LocalRegistry(storage, auth=tokens.registry_auth())
    try:
        server, www = https_files
        for arch in ("x86_64", "aarch64"):
            (www / f"Ascend-cann-toolkit_8.5.2_linux-{arch}.run").write_text("#!/bin/sh\n")
        base_image = f"{reg.host}/ascendhub/cann:8.5.1-910b-ubuntu22.04-py3.11"
        catalog = tmp_path / "catalog.toml"
        catalog.write_text(
            minimal(
                registry=reg.host,
                base_image=base_image,
                files=server.url,
                git=f"file://{git_repo}",
                index=py_index.url,
            )
        )
        cfg = tmp_path / "docker"
        cfg.mkdir()
        monkeypatch.setenv("DOCKER_CONFIG", str(cfg))
        if needs_login:
            res = cli("lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert))
            assert res.code == 2 and "token service refused (401)" in res.err
            token = base64.b64encode(":".join(creds).encode()).decode()  # type: ignore[arg-type]
            (cfg / "config.json").write_text(json.dumps({"auths": {reg.host: {"auth": token}}}))
        res = cli("lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert))
        assert res.code == 0, res.err
        assert read_lock(tmp_path / "cannery.lock").bases[base_image].digest == digest
        last = tokens.requests[-1]
        assert last["service"] == "cannery-test"
        assert last["scope"] == "repository:ascendhub/cann:pull"
        assert last["authorization"] == ("Basic" if needs_login else "")
        if creds:
            for text in (res.out, res.err):
                assert creds[1] not in text
    finally:
        reg.stop()
        tokens.stop()


def test_git_over_https_ca_cert_adds_trust_to_the_system_roots(  # type: ignore[no-untyped-def]
    setup, cli, test_ca: LocalCA, tmp_path: Path, monkeypatch
) -> None:
    """Two git servers over HTTPS (real `git http-backend`): one signed by a CA the system
    trusts (SSL_CERT_FILE, which the bundle's system part reads), one by the --ca-cert CA.
    Both must resolve: --ca-cert adds to git's trust, it does not replace it."""
    from tests.services.githttp import GitHTTPSServer
    from tests.services.tlsca import make_ca

    system_ca = make_ca(tmp_path / "system-ca", name="system CA")
    repos = tmp_path / "repos"
    repos.mkdir()
    _git(tmp_path, "clone", "-q", "--bare", str(setup["git"]), str(repos / "v.git"))
    public = GitHTTPSServer(repos, system_ca)
    private = GitHTTPSServer(repos, test_ca)
    try:
        catalog: Path = setup["catalog"]
        text = catalog.read_text()
        local = f'git = "file://{setup["git"]}"'
        assert text.count(local) == 2
        text = text.replace(local, f'git = "{public.url}/v.git"', 1)
        catalog.write_text(text.replace(local, f'git = "{private.url}/v.git"', 1))
        monkeypatch.setenv("SSL_CERT_FILE", str(system_ca.ca_cert))
        monkeypatch.delenv("CANNERY_CA_CERT", raising=False)
        import tempfile

        # a temporary directory of its own: other runs on the machine leave theirs in /tmp
        (tmp_path / "tmp").mkdir()
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
        res = cli("lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert))
        assert res.code == 0, res.err
        lock = read_lock(catalog.parent / "cannery.lock")
        urls = {e.url.split("/v.git")[0] for e in lock.git.values()}
        assert urls == {public.url, private.url}
        assert _git(setup["git"], "rev-parse", "main") in {e.commit for e in lock.git.values()}
        # and no bundle is left behind in the temporary directory
        assert not list(Path(tempfile.gettempdir()).glob("cannery-ca-*"))
    finally:
        public.stop()
        private.stop()


def test_lock_named_images_resolves_only_theirs_and_keeps_the_rest(setup, cli, test_ca) -> None:  # type: ignore[no-untyped-def]
    catalog: Path = setup["catalog"]
    catalog.write_text(
        catalog.read_text().replace(
            'recipe = "s"\n', 'recipe = "s"\ncomponents = ["torch", "vllm"]\n'
        )
    )
    lockfile = catalog.parent / "cannery.lock"
    ca = ("--ca-cert", str(test_ca.ca_cert))
    assert cli("lock", "two", "--catalog", str(catalog), *ca).code == 0
    assert {e.ref for e in read_lock(lockfile).git.values()} == {"v0.18.0"}  # not one's "main"
    assert cli("lock", "--catalog", str(catalog), *ca).code == 0
    both = read_lock(lockfile)
    assert {e.ref for e in both.git.values()} == {"v0.18.0", "main"}
    res = cli("lock", "two", "--catalog", str(catalog), "--update", "all", *ca)
    assert res.code == 0, res.err
    after = read_lock(lockfile)
    main = next(k for k, e in both.git.items() if e.ref == "main")
    assert after.git[main] == both.git[main]  # image one's entry kept as it was
    res = cli("lock", "nope", "--catalog", str(catalog), *ca)
    assert res.code == 2 and "unknown image nope" in res.err


# ------------------------------------------------------------ Python dependencies


def _python_step(dockerfile_text: str) -> str:
    import dockerfile

    cmds = dockerfile.parse_string(dockerfile_text)
    return next(c.value[0] for c in cmds if c.cmd == "RUN" and "--require-hashes" in c.value[0])


def test_python_dependencies_locked_per_platform_and_installed_with_hashes(  # type: ignore[no-untyped-def]
    setup, cli, test_ca, py_index, tmp_path: Path
) -> None:
    """`cannery lock` resolves the image's Python dependencies with uv against the local index
    (the test CA's HTTPS); the rendered step installs exactly those, hash-checked, with a real
    pip into a fresh venv; a wheel changed on the index after locking is refused."""
    import venv

    catalog: Path = setup["catalog"]
    res = cli("lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert))
    assert res.code == 0, res.err
    lock = read_lock(catalog.parent / "cannery.lock")
    assert set(lock.python) == {"one/amd64", "one/arm64", "two/amd64", "two/arm64"}
    reqs = lock.python["one/arm64"].requirements
    names = [r.split("==")[0] for r in reqs]
    # the pins, torch's own dependency, and the git sources' build requirement (setuptools)
    assert sorted(names) == ["numpy-lite", "setuptools", "torch", "torch-npu"], reqs
    assert "numpy-lite==2.0 " in reqs[0] and re.search(r"--hash=sha256:[0-9a-f]{64}$", reqs[0])

    res = cli("plan", "--catalog", str(catalog), "--json")
    one = json.loads(res.out)["images"][0]
    assert one["unpinned"] == [] and one["unlocked"] == []
    out = tmp_path / "out"
    res = cli("render", "dockerfile", "--locked", "--catalog", str(catalog), "--out", str(out))
    assert res.code == 0, res.err
    text = (out / "one.Dockerfile").read_text()
    assert "UNPINNED" not in text and "constraints.txt torch==" not in text
    assert "-r /opt/src" not in text  # requirements files are in the lock, not read at build
    assert text.count("--no-deps --no-build-isolation") == 2  # both git components
    step = _python_step(text)
    hadolint = shutil.which("hadolint", path=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    assert hadolint
    lint = subprocess.run(
        [hadolint, "--no-color", str(out / "one.Dockerfile")], capture_output=True, text=True
    )
    assert " error:" not in lint.stdout and "SC3" not in lint.stdout, lint.stdout

    def install(into: Path) -> subprocess.CompletedProcess[str]:
        venv.create(into, with_pip=True)
        opt = into / "opt"
        # pip as a clean build sees it: this machine's pip.conf and find-links are not in play,
        # and REQUESTS_CA_BUNDLE would override --cert (a known pip quirk)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("PIP_") and k not in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
        }
        env.update(
            PATH=f"{into / 'bin'}:{os.environ['PATH']}",
            TARGETARCH="amd64",
            PIP_CERT=str(test_ca.ca_cert),
            PIP_CONFIG_FILE=os.devnull,
            PIP_DISABLE_PIP_VERSION_CHECK="1",
        )
        return subprocess.run(
            ["bash", "-o", "pipefail", "-c", step.replace("/opt/cannery", str(opt))],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    good = install(tmp_path / "venv-good")
    assert good.returncode == 0, good.stderr
    py = tmp_path / "venv-good" / "bin" / "python"
    check = subprocess.run(
        [str(py), "-c", "import torch, torch_npu, numpy_lite; print(numpy_lite.VERSION)"],
        capture_output=True,
        text=True,
    )
    assert check.stdout.strip() == "2.0", check.stderr
    constraints = (tmp_path / "venv-good" / "opt" / "constraints.txt").read_text().split()
    assert "torch==2.9.0" in constraints and "numpy-lite==2.0" in constraints

    # The index now serves different bytes under the same name and version.
    wheel = next(py_index.files.glob("numpy_lite-2.0-*.whl"))
    original = wheel.read_bytes()
    try:
        from tests.services.pyindex import make_wheel

        make_wheel(py_index.files, "numpy-lite", "2.0", ("evil>=0",))
        py_index.publish()
        bad = install(tmp_path / "venv-bad")
        assert bad.returncode != 0
        assert "THESE PACKAGES DO NOT MATCH THE HASHES" in bad.stderr
        site = list((tmp_path / "venv-bad" / "lib").glob("python*/site-packages/numpy_lite"))
        assert site == []
    finally:
        wheel.write_bytes(original)
        py_index.publish()


def test_python_lock_goes_stale_when_the_catalog_changes(  # type: ignore[no-untyped-def]
    setup, cli, test_ca
) -> None:
    catalog: Path = setup["catalog"]
    assert cli("lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert)).code == 0
    catalog.write_text(
        catalog.read_text()
        .replace("pin = true\n", 'pin = true\n\n[components.extra]\npip = ["numpy-lite<2"]\n', 1)
        .replace(
            'components = ["torch", "vllm", "vllm-ascend"]',
            'components = ["torch", "extra", "vllm", "vllm-ascend"]',
        )
    )
    res = cli("plan", "--catalog", str(catalog))
    assert "UNPINNED" in res.out
    res = cli(
        "render",
        "dockerfile",
        "--locked",
        "--catalog",
        str(catalog),
        "--out",
        str(catalog.parent / "out"),
    )
    assert res.code == 2 and "UNPINNED component extra: numpy-lite<2" in res.err
    assert cli("lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert)).code == 0
    lock = read_lock(catalog.parent / "cannery.lock")
    assert any(r.startswith("numpy-lite==1.0 ") for r in lock.python["one/amd64"].requirements)


def test_wheel_component_dependencies_are_locked_too(  # type: ignore[no-untyped-def]
    setup, cli, test_ca, https_files
) -> None:
    """A wheel component is pinned by its sha256; its own dependencies come from the Python
    lock (uv reads the wheel's metadata over the test CA's HTTPS), so it installs --no-deps."""
    from tests.services.pyindex import make_wheel

    server, www = https_files
    make_wheel(www, "extra-tool", "1.0", ("numpy-lite<2",))
    catalog: Path = setup["catalog"]
    catalog.write_text(
        catalog.read_text()
        .replace(
            "pin = true\n",
            "pin = true\n\n[components.extra-tool]\n"
            f'wheel = "{server.url}/extra_tool-1.0-py3-none-any.whl"\n',
            1,
        )
        .replace('components = ["torch", "vllm"', 'components = ["torch", "extra-tool", "vllm"')
    )
    res = cli("lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert))
    assert res.code == 0, res.err
    reqs = read_lock(catalog.parent / "cannery.lock").python["one/arm64"].requirements
    assert any(r.startswith("numpy-lite==1.0 ") for r in reqs), reqs
    assert not any("extra" in r for r in reqs)  # the wheel itself is installed by its own step
    out = catalog.parent / "out"
    res = cli("render", "dockerfile", "--locked", "--catalog", str(catalog), "--out", str(out))
    assert res.code == 0, res.err
    text = (out / "one.Dockerfile").read_text()
    wheel_step = next(s for s in text.split("\n\n") if "extra-tool wheel" in s)
    assert "--no-deps" in wheel_step and "--no-build-isolation" not in wheel_step


# ------------------------------------------------------------ commit prefixes (short SHAs)


def _colliding_commits(repo: Path) -> tuple[str, str]:
    """Two root commits of ``repo`` whose ids share their first 7 hex digits, on branches
    ``c1`` and ``c2``. Commit ids are computed here first (sha1 of the object, fixed dates and
    the empty tree), so the search is deterministic and git writes only the two found."""
    import hashlib

    empty_tree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
    who = "t <t@example.com> 1700000000 +0000"
    seen: dict[str, int] = {}
    i = 0
    while True:
        body = f"tree {empty_tree}\nauthor {who}\ncommitter {who}\n\nc{i}\n".encode()
        sha = hashlib.sha1(b"commit %d\0" % len(body) + body).hexdigest()
        if sha[:7] in seen:
            break
        seen[sha[:7]] = i
        i += 1
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.com", GIT_AUTHOR_DATE="1700000000 +0000",
        GIT_COMMITTER_DATE="1700000000 +0000",
    )
    shas = []
    for n, msg in enumerate((seen[sha[:7]], i), start=1):
        made = subprocess.run(
            ["git", "commit-tree", empty_tree, "-m", f"c{msg}"], cwd=repo, env=env, check=True,
            capture_output=True, text=True,
        ).stdout.strip()
        _git(repo, "branch", f"c{n}", made)
        shas.append(made)
    assert shas[0][:7] == shas[1][:7] and shas[0] != shas[1]
    return shas[0], shas[1]


def test_commit_prefix_is_locked_to_the_full_commit(setup, cli, test_ca) -> None:  # type: ignore[no-untyped-def]
    """A component's ref may be a short SHA (7-39 hex): `cannery lock` fetches the remote's
    branches and tags and records the one commit it names; the Dockerfile fetches that full
    commit. A commit that is no branch tip is found (ls-remote alone could not)."""
    catalog: Path = setup["catalog"]
    git: Path = setup["git"]
    first = _git(git, "rev-parse", "main")
    (git / "f").write_text("3")
    _git(git, "commit", "-qam", "three")  # the commit named is no branch tip any more
    catalog.write_text(catalog.read_text().replace('ref = "main"', f'ref = "{first[:9]}"'))
    res = cli("lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert))
    assert res.code == 0, res.err
    lock = read_lock(catalog.parent / "cannery.lock")
    entry = lock.git[f"file://{git}#{first[:9]}"]
    assert entry.commit == first and entry.ref == first[:9]
    out = catalog.parent / "out"
    assert cli("render", "dockerfile", "--catalog", str(catalog), "--out", str(out)).code == 0
    text = (out / "one.Dockerfile").read_text()
    assert f"--depth 1 file://{git} {first};" in text and "UNLOCKED" not in text
    # --update all keeps a resolved prefix: it names one commit for good
    before = (catalog.parent / "cannery.lock").read_text()
    res = cli("lock", "--catalog", str(catalog), "--update", "vllm-ascend",
              "--ca-cert", str(test_ca.ca_cert))
    assert res.code == 0, res.err
    assert (catalog.parent / "cannery.lock").read_text() == before


@pytest.mark.parametrize("case", ["ambiguous", "missing"])
def test_commit_prefix_ambiguous_or_missing_is_one_line_naming_the_component(  # type: ignore[no-untyped-def]
    case: str, setup, cli, test_ca
) -> None:
    catalog: Path = setup["catalog"]
    git: Path = setup["git"]
    a, b = _colliding_commits(git)
    if case == "ambiguous":
        prefix = a[:7]
    else:
        commits = _git(git, "rev-list", "--all").split()
        prefix = next(p for p in (f"{n:07x}" for n in range(1 << 28))
                      if not any(c.startswith(p) for c in commits))
    text = catalog.read_text().replace('ref = "main"', f'ref = "{prefix}"')
    catalog.write_text(text)
    res = cli("lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert))
    assert res.code == 2
    from tests.catalogs import line_of

    needle = f'ref = "{prefix}"'
    where = f"{catalog}:{line_of(text, needle)}: component vllm-ascend: "
    errors = _errors(res.err)
    assert len(errors) == 1 and errors[0].startswith(f"cannery: error: {where}"), res.err
    if case == "ambiguous":
        assert f"commit prefix {prefix!r} is ambiguous (2 commits: " in res.err
        assert a[:12] in res.err and b[:12] in res.err
    else:
        assert f"no commit starts with {prefix!r}" in res.err
    assert not (catalog.parent / "cannery.lock").exists()


@pytest.mark.parametrize("kind", ["zip", "tar.gz"])
def test_wheel_bundle_dependencies_are_locked(  # type: ignore[no-untyped-def]
    kind: str, setup, cli, test_ca, https_files, tmp_path: Path
) -> None:
    """A `.zip` or `.tar.gz` of wheels (torch_npu's and sgl-kernel-npu's release shape) from
    the test CA's HTTPS server: `cannery lock` pins the bundle's sha256 and resolves the
    dependencies of every wheel in it (uv reads them from disk: a bundle URL would be an
    sdist to it), so the bundle installs --no-deps; a member path is never followed."""
    import tarfile
    import zipfile

    from tests.services.pyindex import make_wheel

    server, www = https_files
    wheels = [make_wheel(tmp_path / "w", "kernel-a", "1.0", ("torch==2.9.0",)),
              make_wheel(tmp_path / "w", "kernel-b", "1.0"),
              # an x86_64 wheel beside them, as torch_npu's daily bundle holds both arches:
              # only amd64's resolution reads it (its bound shows where it was read)
              make_wheel(tmp_path / "w", "kernel-c", "1.0", ("numpy-lite<2",),
                         tag="cp311-cp311-manylinux_2_28_x86_64")]
    bundle = www / f"kernels-{tmp_path.name}.{kind}"
    # kernel-b's member path climbs out of the archive: it is read under its base name
    names = [f"dist/{wheels[0].name}", f"../../{wheels[1].name}", f"dist/{wheels[2].name}"]
    if kind == "zip":
        with zipfile.ZipFile(bundle, "w") as zf:
            for w, name in zip(wheels, names, strict=True):
                zf.write(w, name)
    else:
        with tarfile.open(bundle, "w:gz") as tf:
            for w, name in zip(wheels, names, strict=True):
                tf.add(w, name)
    catalog: Path = setup["catalog"]
    text = catalog.read_text()
    catalog.write_text(
        text.replace(
            "pin = true\n",
            f'pin = true\n\n[components.kernels]\nwheel = "{server.url}/{bundle.name}"\n', 1,
        ).replace('components = ["torch", "vllm"', 'components = ["torch", "kernels", "vllm"')
    )
    res = cli("lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert))
    assert res.code == 0, res.err
    lock = read_lock(catalog.parent / "cannery.lock")
    assert lock.urls[f"{server.url}/{bundle.name}"].sha256 == hashlib.sha256(
        bundle.read_bytes()).hexdigest()
    amd64 = lock.python["one/amd64"].requirements
    assert any(r.startswith("numpy-lite==1.0 ") for r in amd64), amd64  # kernel-c's bound
    reqs = lock.python["one/arm64"].requirements
    assert any(r.startswith("numpy-lite==2.0 ") for r in reqs), reqs  # no x86_64 wheel here
    assert not any(r.startswith("kernel") for r in reqs + amd64)  # the bundle installs them
    import tempfile

    # followed, "../../" from the bundle's directory would have written it here
    assert not (Path(tempfile.gettempdir()) / wheels[1].name).exists()
    out = catalog.parent / "out"
    res = cli("render", "dockerfile", "--locked", "--catalog", str(catalog), "--out", str(out))
    assert res.code == 0, res.err
    step = next(s for s in (out / "one.Dockerfile").read_text().split("\n\n")
                if f"kernels: a {kind} of wheels" in s)
    assert "xargs -0 python3 -m pip install --no-cache-dir" in step and "--no-deps" in step


def test_url_input_and_wheel_bundle_over_their_limits_are_refused(  # type: ignore[no-untyped-def]
    setup, cli, test_ca, https_files, tmp_path: Path, monkeypatch
) -> None:
    """The limits on what `lock` downloads and unpacks, made small here to be reached: a `url`
    input over DOWNLOAD_LIMIT, a bundle over BUNDLE_LIMIT, and a small bundle whose wheels
    inflate past BUNDLE_LIMIT are each one line naming the URL and the limit, exit 2, no lock
    written."""
    import io
    import tarfile
    import zipfile

    import cannery.download
    import cannery.pydeps

    server, www = https_files
    catalog: Path = setup["catalog"]
    lockfile = catalog.parent / "cannery.lock"
    ca = ("--ca-cert", str(test_ca.ca_cert))
    run_file = max(len(p.read_bytes()) for p in www.glob("Ascend-cann-toolkit_*.run"))
    monkeypatch.setattr(cannery.download, "DOWNLOAD_LIMIT", run_file - 1)
    res = cli("lock", "--catalog", str(catalog), *ca)
    assert res.code == 2 and "Ascend-cann-toolkit_8.5.2_linux-" in res.err, res.err
    assert f"bytes is over the {run_file - 1} bytes limit" in res.err and not lockfile.exists()
    monkeypatch.undo()

    text = catalog.read_text()
    for kind in ("tar.gz", "zip"):
        bundle = www / f"limits-{tmp_path.name}.{kind}"
        url = f"{server.url}/{bundle.name}"
        catalog.write_text(text.replace(
            "pin = true\n", f'pin = true\n\n[components.kernels]\nwheel = "{url}"\n', 1,
        ).replace('components = ["torch", "vllm"', 'components = ["torch", "kernels", "vllm"'))
        names = ("a-1.0-py3-none-any.whl", "b-1.0-py3-none-any.whl")
        raw = io.BytesIO()
        if kind == "zip":
            with zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as zf:
                for name in names:
                    zf.writestr(name, bytes(3000))
        else:
            with tarfile.open(fileobj=raw, mode="w:gz") as tf:
                for name in names:
                    info = tarfile.TarInfo(name)
                    info.size = 3000
                    tf.addfile(info, io.BytesIO(bytes(3000)))
        bundle.write_bytes(raw.getvalue())
        size = len(raw.getvalue())
        # the wheels together over the limit: a .tar.gz inflates as one stream, a zip's
        # second wheel has what the first left of it
        over = (f"{url}: the wheel bundle: inflates to more than 5000 bytes" if kind == "tar.gz"
                else f"{url}: the wheel bundle, member {names[1]}: larger than 2000 bytes")
        for limit, want in ((size - 1, f"{url}: answer of {size} bytes is over the "
                             f"{size - 1} bytes limit"), (5000, over)):
            monkeypatch.setattr(cannery.pydeps, "BUNDLE_LIMIT", limit)
            res = cli("lock", "--catalog", str(catalog), *ca)
            errors = _errors(res.err)
            assert res.code == 2 and errors == [f"cannery: error: {want}"], res.err
            assert not lockfile.exists()


def _lock_measured_with_bundle(
    catalog: Path, url: str, test_ca: LocalCA, tmp_path: Path
) -> Measured:
    """Add the wheel bundle at ``url`` to image one (component ``kernels``) and run `cannery
    lock` in a child whose peak memory is measured."""
    catalog.write_text(catalog.read_text().replace(
        "pin = true\n", f'pin = true\n\n[components.kernels]\nwheel = "{url}"\n', 1,
    ).replace('components = ["torch", "vllm"', 'components = ["torch", "kernels", "vllm"'))
    env = dict(os.environ, DOCKER_CONFIG=str(tmp_path / "no-docker"))
    return run_measured(["lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert)],
                        catalog.parent, env)


def _errors(err: str) -> list[str]:
    """What `cannery lock` wrote to stderr, without its progress lines."""
    return [ln for ln in err.splitlines() if not ln.startswith("lock: ")]


@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_wheel_bundle_bomb_is_refused_in_bounded_memory(  # type: ignore[no-untyped-def]
    kind: str, setup, test_ca, https_files, tmp_path: Path, capsys
) -> None:
    """A bundle of about 1 MiB holding a 1 GiB wheel of zeros: `cannery lock` stops at the
    inflation ratio, one line naming the bundle and the member, exit 2, no lock written, its
    own peak memory (VmHWM, measured in the child) under 200 MiB; it used to read every member
    whole (1 GiB)."""
    import tarfile
    import zipfile
    import zlib

    server, www = https_files
    bundle = www / f"bomb-{tmp_path.name}.{kind}"
    name = "dist/kernel_bomb-1.0-py3-none-any.whl"
    zeros = bytes(1 << 20)
    if kind == "zip":
        with zipfile.ZipFile(bundle, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf, \
                zf.open(name, "w", force_zip64=True) as member:
            for _ in range(1024):
                member.write(zeros)
    else:
        comp = zlib.compressobj(9, zlib.DEFLATED, 31)
        info = tarfile.TarInfo(name)
        info.size = 1 << 30
        with bundle.open("wb") as out:
            out.write(comp.compress(info.tobuf()))
            for _ in range(1024):
                out.write(comp.compress(zeros))
            out.write(comp.compress(bytes(1024)) + comp.flush())
    assert bundle.stat().st_size < 2 << 20
    catalog: Path = setup["catalog"]
    run = _lock_measured_with_bundle(catalog, f"{server.url}/{bundle.name}", test_ca, tmp_path)
    with capsys.disabled():
        print(f"\nlock, a {bundle.stat().st_size / (1 << 20):.2f} MiB {kind} bundle holding a "
              f"1 GiB wheel: peak VmHWM {run.peak_mib:.1f} MiB")
    assert run.peak_kib < 200 << 10, run.peak_kib
    errors = _errors(run.err)
    assert run.code == 2 and len(errors) == 1, run.err
    # a zip names the member (its compressed size is known), a .tar.gz inflates as one stream
    where = f"{server.url}/{bundle.name}: the wheel bundle" + (
        f", member {name}" if kind == "zip" else "")
    assert errors[0] == (f"cannery: error: {where}: inflates to more than 100 times its "
                         "compressed size (a decompression bomb?)")
    assert not (catalog.parent / "cannery.lock").exists()


def test_wheel_bundle_members_are_copied_a_chunk_at_a_time(  # type: ignore[no-untyped-def]
    setup, test_ca, https_files, tmp_path: Path, capsys
) -> None:
    """A 300 MiB wheel in a 5 MiB .tar.gz (within the ratio cap) is copied to its file as it
    is inflated: `cannery lock` stays well under the wheel's size in memory (the stand-in
    wheel is no zip, so uv refuses it once it is on disk: one line, exit 2)."""
    import tarfile
    import zlib

    server, www = https_files
    bundle = www / f"big-{tmp_path.name}.tar.gz"
    comp = zlib.compressobj(1, zlib.DEFLATED, 31)
    info = tarfile.TarInfo("kernel_big-1.0-py3-none-any.whl")
    info.size = 300 << 20
    noise = 12 << 10  # random bytes a MiB: inflating stays within the ratio cap
    zeros = bytes((1 << 20) - noise)
    with bundle.open("wb") as out:
        out.write(comp.compress(info.tobuf()))
        for _ in range(300):
            out.write(comp.compress(os.urandom(noise)) + comp.compress(zeros))
        out.write(comp.compress(bytes(1024)) + comp.flush())
    catalog: Path = setup["catalog"]
    run = _lock_measured_with_bundle(catalog, f"{server.url}/{bundle.name}", test_ca, tmp_path)
    with capsys.disabled():
        print(f"\nlock, a {bundle.stat().st_size / (1 << 20):.1f} MiB bundle holding a 300 MiB "
              f"wheel: peak VmHWM {run.peak_mib:.1f} MiB")
    assert run.peak_kib < 200 << 10, run.peak_kib
    errors = _errors(run.err)
    assert run.code == 2 and len(errors) == 1, run.err
    # the whole wheel was copied out (no cap refused it): uv is what refused it
    assert errors[0].startswith("cannery: error: Python dependencies of one/"), errors[0]
    assert "uv pip compile" in errors[0] and "the wheel bundle" not in errors[0], errors[0]


def test_a_tracked_branch_moves_only_with_update(setup, cli, test_ca) -> None:  # type: ignore[no-untyped-def]
    """A new commit on a branch a component tracks: `cannery lock` keeps the locked commit
    (and a --locked render uses it); `--update NAME` (what the scheduled workflow runs, as
    `--update all`) moves that entry and the Python pins that read it, nothing else; two
    components on one branch are each a name for it."""
    catalog: Path = setup["catalog"]
    git: Path = setup["git"]
    ca = ("--ca-cert", str(test_ca.ca_cert))
    catalog.write_text(catalog.read_text().replace(
        "[images.one]",
        f'[components.twin]\ngit = "file://{git}"\nref = "main"\ninstall = "none"\n\n'
        "[images.one]",
    ).replace('components = ["torch", "vllm", "vllm-ascend"]',
              'components = ["torch", "vllm", "vllm-ascend", "twin"]'))
    lockfile = catalog.parent / "cannery.lock"
    assert cli("lock", "--catalog", str(catalog), *ca).code == 0
    before = read_lock(lockfile)
    key = f"file://{git}#main"
    old_commit = before.git[key].commit
    (git / "f").write_text("moved")
    _git(git, "commit", "-qam", "upstream moves")
    new_commit = _git(git, "rev-parse", "main")
    assert cli("lock", "--catalog", str(catalog), *ca).code == 0
    assert read_lock(lockfile) == before
    out = catalog.parent / "out"
    res = cli("render", "dockerfile", "--locked", "--catalog", str(catalog), "--out", str(out))
    assert res.code == 0 and old_commit in (out / "one.Dockerfile").read_text()
    res = cli("lock", "--catalog", str(catalog), "--update", "vllm-ascend", *ca)
    assert res.code == 0, res.err
    after = read_lock(lockfile)
    assert after.git[key].commit == new_commit
    assert after.bases == before.bases and after.urls == before.urls
    assert {k: v for k, v in after.git.items() if k != key} == {
        k: v for k, v in before.git.items() if k != key}
    assert all(after.python[k].inputs != before.python[k].inputs for k in before.python
               if k.startswith("one/"))


def _tree_not_installed_with_requirements(setup: dict[str, Path]) -> Path:
    """MindSpeed-RL's shape in the test catalog: vllm fetched only (install = "none") at a
    new tag whose requirements file (numpy-lite<2) must still be installed."""
    catalog: Path = setup["catalog"]
    git: Path = setup["git"]
    (git / "req.txt").write_text("numpy-lite<2\n")
    _git(git, "add", "req.txt")
    _git(git, "commit", "-qm", "requirements")
    _git(git, "tag", "v-req")
    catalog.write_text(catalog.read_text().replace(
        'ref = "v0.18.0"\nversion = "v0.18.0"\ninstall = "editable"',
        'ref = "v-req"\nversion = "v0.18.0"\ninstall = "none"\nrequirements = ["req.txt"]',
    ))
    return catalog


def test_requirements_of_a_tree_that_is_not_installed_are_locked(setup, cli, test_ca) -> None:  # type: ignore[no-untyped-def]
    """MindSpeed-RL's shape: a git tree only fetched (install = "none") whose requirements
    file must still be installed. `cannery lock` resolves it at the locked commit, and the
    --locked Dockerfile installs the result (the tree itself is not pip-installed)."""
    catalog = _tree_not_installed_with_requirements(setup)
    res = cli("lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert))
    assert res.code == 0, res.err
    reqs = read_lock(catalog.parent / "cannery.lock").python["one/amd64"].requirements
    assert any(r.startswith("numpy-lite==1.0 ") for r in reqs), reqs
    out = catalog.parent / "out"
    res = cli("render", "dockerfile", "--locked", "--catalog", str(catalog), "--out", str(out))
    assert res.code == 0, res.err
    text = (out / "one.Dockerfile").read_text()
    assert "numpy-lite==1.0 " in _python_step(text)
    vllm = next(s for s in text.split("\n\n") if "git init -q /opt/src/vllm;" in s)
    assert "pip install" not in vllm and "rm -rf /opt/src/vllm/.git" in vllm


def test_rendered_step_installs_the_requirements_of_a_tree_it_does_not_install(  # type: ignore[no-untyped-def]
    setup, cli, test_ca, tmp_path: Path
) -> None:
    """Without Python pins, the component's own RUN (run here with bash, as a builder would:
    real git from the local repository, real pip from the local index) fetches the tree and
    installs its requirements file, and not the tree."""
    import venv

    from cannery.lock import dump_lock

    catalog = _tree_not_installed_with_requirements(setup)
    assert cli("lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert)).code == 0
    lockfile = catalog.parent / "cannery.lock"
    lockfile.write_text(dump_lock(read_lock(lockfile).model_copy(update={"python": {}})))
    out = catalog.parent / "out"
    assert cli("render", "dockerfile", "--catalog", str(catalog), "--out", str(out)).code == 0
    import dockerfile

    cmds = dockerfile.parse_file(str(out / "one.Dockerfile"))
    body = next(c.value[0] for c in cmds if c.cmd == "RUN" and "git init -q /opt/src/vllm;" in
                c.value[0])
    assert "-r /opt/src/vllm/req.txt" in body
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    opt = tmp_path / "opt"
    (opt / "cannery").mkdir(parents=True)
    (opt / "cannery" / "constraints.txt").write_text("")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PIP_") and k not in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")}
    env.update(PATH=f"{env_dir / 'bin'}:{os.environ['PATH']}", PIP_CERT=str(test_ca.ca_cert),
               PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", TARGETARCH="amd64")
    run = subprocess.run(["bash", "-o", "pipefail", "-c", body.replace("/opt/", f"{opt}/")],
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    check = subprocess.run(
        [str(env_dir / "bin" / "python"), "-c",
         "import importlib.util as u, numpy_lite; print(numpy_lite.VERSION, "
         "u.find_spec('vllm') is None)"],
        capture_output=True, text=True,
    )
    assert check.stdout.split() == ["1.0", "True"], check.stderr
    assert (opt / "src" / "vllm" / "req.txt").is_file()  # the tree stays, without .git
    assert not (opt / "src" / "vllm" / ".git").exists()


def test_commit_prefix_over_https_trusts_the_ca_cert(  # type: ignore[no-untyped-def]
    setup, cli, test_ca: LocalCA, tmp_path: Path, monkeypatch
) -> None:
    """The prefix clone goes over git's smart HTTP (real `git http-backend`, the test CA's
    certificate) with --ca-cert's trust, as ls-remote does; without it, exit 2, no lock."""
    from tests.services.githttp import GitHTTPSServer

    repos = tmp_path / "repos"
    repos.mkdir()
    _git(tmp_path, "clone", "-q", "--bare", str(setup["git"]), str(repos / "v.git"))
    server = GitHTTPSServer(repos, test_ca)
    try:
        catalog: Path = setup["catalog"]
        first = _git(setup["git"], "rev-parse", "main")
        catalog.write_text(catalog.read_text().replace(
            f'git = "file://{setup["git"]}"\nref = "main"',
            f'git = "{server.url}/v.git"\nref = "{first[:8]}"'))
        monkeypatch.delenv("CANNERY_CA_CERT", raising=False)
        res = cli("lock", "--catalog", str(catalog))
        assert res.code == 2 and "component vllm-ascend: " in res.err, res.err
        assert "cannot fetch to resolve commit prefix" in res.err
        assert not (catalog.parent / "cannery.lock").exists()
        res = cli("lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert))
        assert res.code == 0, res.err
        entry = read_lock(catalog.parent / "cannery.lock").git[f"{server.url}/v.git#{first[:8]}"]
        assert entry.commit == first
    finally:
        server.stop()


def test_git_over_https_never_follows_a_redirect_to_plain_http(  # type: ignore[no-untyped-def]
    setup, cli, test_ca: LocalCA, tmp_path: Path
) -> None:
    """An https git URL whose server redirects to http:// is refused (exit 2, no lock), for a
    branch (ls-remote) and a commit prefix (the clone) alike: git follows such a redirect by
    default, which would let a plain-http hop choose the locked commit. Real git on both ends."""
    import http.server
    import threading

    from tests.services.githttp import _CGIHandler
    from tests.services.tlsca import HTTPSServer

    repos = tmp_path / "repos"
    repos.mkdir()
    _git(tmp_path, "clone", "-q", "--bare", str(setup["git"]), str(repos / "v.git"))
    hits: list[str] = []

    class Plain(_CGIHandler):
        project_root = str(repos)

        def _cgi(self) -> None:
            hits.append(self.path)
            super()._cgi()

    plain = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Plain)
    threading.Thread(target=plain.serve_forever, daemon=True).start()
    to = f"http://127.0.0.1:{plain.server_address[1]}"

    class Redirect(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(302)
            self.send_header("Location", to + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_POST = do_GET

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPSServer(Redirect, test_ca)
    try:
        catalog: Path = setup["catalog"]
        original = catalog.read_text()
        first = _git(setup["git"], "rev-parse", "main")
        for ref in ("main", first[:8]):
            catalog.write_text(original.replace(
                f'git = "file://{setup["git"]}"\nref = "main"',
                f'git = "{server.url}/v.git"\nref = "{ref}"'))
            res = cli("lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert))
            assert res.code == 2 and "component vllm-ascend: " in res.err, res.err
            assert "Traceback" not in res.err and "not supported" in res.err.splitlines()[-1]
            assert not (catalog.parent / "cannery.lock").exists()
            assert hits == [], hits
    finally:
        server.stop()
        plain.shutdown()
        plain.server_close()


def _served_with_ssl_verify_off(setup: dict, test_ca: LocalCA, tmp_path: Path):  # type: ignore[no-untyped-def,type-arg]
    """The component's repository served over HTTPS by the test CA's server, and a HOME whose
    git config says http.sslVerify = false (what cannery must not obey)."""
    from tests.services.githttp import GitHTTPSServer

    repos = tmp_path / "repos"
    repos.mkdir()
    _git(tmp_path, "clone", "-q", "--bare", str(setup["git"]), str(repos / "v.git"))
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[http]\n\tsslVerify = false\n")
    return GitHTTPSServer(repos, test_ca), home


def test_git_tls_is_verified_whatever_the_environment_or_git_config_say(  # type: ignore[no-untyped-def]
    setup, cli, test_ca: LocalCA, tmp_path: Path, monkeypatch
) -> None:
    """GIT_SSL_NO_VERIFY in cannery's environment, or http.sslVerify = false in the user's git
    config, would make git skip certificate checks: without --ca-cert the test CA's server is
    still refused (exit 2, no lock), for a branch and a commit prefix alike."""
    server, home = _served_with_ssl_verify_off(setup, test_ca, tmp_path)
    try:
        catalog: Path = setup["catalog"]
        original = catalog.read_text()
        first = _git(setup["git"], "rev-parse", "main")
        monkeypatch.delenv("CANNERY_CA_CERT", raising=False)
        for env in ({"GIT_SSL_NO_VERIFY": "1"}, {"HOME": str(home)}):
            with monkeypatch.context() as m:
                for k, v in env.items():
                    m.setenv(k, v)
                for ref in ("main", first[:8]):
                    catalog.write_text(original.replace(
                        f'git = "file://{setup["git"]}"\nref = "main"',
                        f'git = "{server.url}/v.git"\nref = "{ref}"'))
                    res = cli("lock", "--catalog", str(catalog))
                    assert res.code == 2 and "component vllm-ascend: " in res.err, (env, res.err)
                    assert not (catalog.parent / "cannery.lock").exists()
    finally:
        server.stop()


def test_the_python_resolution_checkout_verifies_git_tls_too(  # type: ignore[no-untyped-def]
    setup, test_ca: LocalCA, tmp_path: Path, monkeypatch
) -> None:
    """The tree `cannery lock` checks out to read a git component's Python dependencies comes
    from the same catalog URL as the commit: with http.sslVerify = false in the user's git
    config and no trust for the test CA, the fetch is refused (LockError), not done."""
    from cannery.errors import LockError
    from cannery.pydeps import GitPackage, _checkout

    server, home = _served_with_ssl_verify_off(setup, test_ca, tmp_path)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CANNERY_CACHE_DIR", str(tmp_path / "cache"))
    commit = _git(setup["git"], "rev-parse", "main")
    try:
        pkg = GitPackage(name="v", url=f"{server.url}/v.git", commit=commit,
                         requirements=(), with_deps=True)
        with pytest.raises(LockError, match="cannot fetch"):
            _checkout(pkg, tmp_path / "tree", None)
        held = subprocess.run(["git", "-C", str(tmp_path / "tree"), "cat-file", "-e", commit],
                              capture_output=True)
        assert held.returncode != 0  # nothing was fetched
    finally:
        server.stop()
