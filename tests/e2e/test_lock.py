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
import subprocess
from pathlib import Path

import pytest

from cannery.lock import read_lock
from tests.catalogs import minimal
from tests.services.registry import LocalRegistry, push_image, push_index
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


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "v.git"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "f").write_text("1")
    _git(repo, "add", "f")
    _git(repo, "commit", "-qm", "one")
    _git(repo, "tag", "-a", "v0.18.0", "-m", "release")  # annotated: ls-remote must peel it
    (repo / "f").write_text("2")
    _git(repo, "commit", "-qam", "two")
    return repo


@pytest.fixture
def setup(
    tmp_path: Path,
    registry: LocalRegistry,
    https_files: tuple[HTTPSFileServer, Path],
    git_repo: Path,
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
    assert f"@{setup['index']} AS base" in text
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
    root = tmp_path_factory.mktemp("authreg")
    htpasswd = root / "htpasswd"
    subprocess.run(
        ["htpasswd", "-Bbc", str(htpasswd), "puller", "s3cret-Passw0rd"],
        check=True,
        capture_output=True,
    )
    reg = LocalRegistry(root, tls=(test_ca.server_cert, test_ca.server_key), htpasswd=htpasswd)
    yield reg
    reg.stop()


def test_tls_registry_with_credentials_from_docker_config(  # type: ignore[no-untyped-def]
    tmp_path: Path, cli, auth_registry, test_ca, https_files, git_repo, monkeypatch
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
    assert re.search(r"FAILED", bad.stdout + bad.stderr)
    unknown = subprocess.run(
        ["bash", "-o", "pipefail", "-c", body],
        env=dict(env, TARGETARCH="s390x"),
        capture_output=True,
        text=True,
    )
    assert unknown.returncode == 1 and "TARGETARCH=s390x" in unknown.stderr


@pytest.mark.parametrize("needs_login", [False, True], ids=["anonymous-token", "login-token"])
def test_bearer_token_auth(  # type: ignore[no-untyped-def]
    needs_login: bool, tmp_path: Path, cli, https_files, git_repo, test_ca, monkeypatch
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
                registry=reg.host, base_image=base_image, files=server.url, git=f"file://{git_repo}"
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
        res = cli("lock", "--catalog", str(catalog), "--ca-cert", str(test_ca.ca_cert))
        assert res.code == 0, res.err
        lock = read_lock(catalog.parent / "cannery.lock")
        urls = {e.url.split("/v.git")[0] for e in lock.git.values()}
        assert urls == {public.url, private.url}
        assert _git(setup["git"], "rev-parse", "main") in {e.commit for e in lock.git.values()}
        # and no bundle is left behind in the temporary directory
        import tempfile

        assert not list(Path(tempfile.gettempdir()).glob("cannery-ca-*.pem"))
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
