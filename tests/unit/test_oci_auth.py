"""Where registry credentials come from: environment, Docker config `auths` (Docker Hub's key
included), and credential helpers through the real `docker-credential-*` protocol.

The helper is a fake (`docker-credential-cannerytest`, a shell script this test puts on PATH):
no real keychain can run here. It records its own /proc/self/cmdline and its stdin, so the test
can check that the secret is never in a child-process argv and the server is sent on stdin.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from cannery.errors import InputError
from cannery.oci import Credentials

SECRET = "hunter2-S3cret"


def _config(tmp: Path, data: object) -> Path:
    d = tmp / "docker"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(data))
    return d


def _auth(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


def test_missing_config_is_no_credentials(tmp_path: Path) -> None:
    assert Credentials({}, tmp_path / "none").lookup("quay.io") is None


def test_malformed_config_is_one_line_naming_the_file(tmp_path: Path) -> None:
    d = tmp_path / "docker"
    d.mkdir()
    (d / "config.json").write_text('{"auths": {\n  "quay.io": ')
    with pytest.raises(InputError) as exc:
        Credentials({}, d).lookup("quay.io")
    assert str(d / "config.json") in exc.value.message and "\n" not in exc.value.message
    assert exc.value.exit_code == 2


def test_bad_auth_field_names_the_key(tmp_path: Path) -> None:
    d = _config(tmp_path, {"auths": {"quay.io": {"auth": "%%%"}}})
    with pytest.raises(InputError, match=r"auths\.quay\.io\.auth"):
        Credentials({}, d).lookup("quay.io")


@pytest.mark.parametrize("key", ["quay.io", "https://quay.io", "https://quay.io/v1/",
                                 "http://quay.io"])
def test_auths_keys(tmp_path: Path, key: str) -> None:
    d = _config(tmp_path, {"auths": {key: {"auth": _auth("u", SECRET)}}})
    creds = Credentials({}, d)
    assert creds.lookup("quay.io") == ("u", SECRET)
    assert creds.lookup("ghcr.io") is None


@pytest.mark.parametrize("host", ["registry-1.docker.io", "docker.io", "index.docker.io"])
def test_docker_login_hub_key_is_found(tmp_path: Path, host: str) -> None:
    d = _config(tmp_path, {"auths": {"https://index.docker.io/v1/": {"auth": _auth("u", SECRET)}}})
    assert Credentials({}, d).lookup(host) == ("u", SECRET)


def test_username_password_fields(tmp_path: Path) -> None:
    d = _config(tmp_path, {"auths": {"quay.io": {"username": "u", "password": SECRET}}})
    assert Credentials({}, d).lookup("quay.io") == ("u", SECRET)


def test_environment_wins_and_can_be_scoped_to_one_host(tmp_path: Path) -> None:
    d = _config(tmp_path, {"auths": {"quay.io": {"auth": _auth("cfg", "cfgpw")}}})
    env = {"CANNERY_REGISTRY_USER": "ci", "CANNERY_REGISTRY_PASSWORD": SECRET}
    assert Credentials(env, d).lookup("quay.io") == ("ci", SECRET)
    assert Credentials(env, d).lookup("ghcr.io") == ("ci", SECRET)
    scoped = {**env, "CANNERY_REGISTRY_HOST": "ghcr.io"}
    assert Credentials(scoped, d).lookup("ghcr.io") == ("ci", SECRET)
    assert Credentials(scoped, d).lookup("quay.io") == ("cfg", "cfgpw")
    assert Credentials({"CANNERY_REGISTRY_USER": "ci"}, d).lookup("quay.io") == ("cfg", "cfgpw")
    assert SECRET not in repr(Credentials(env, d))


def test_docker_config_env_is_honoured(tmp_path: Path) -> None:
    d = _config(tmp_path, {"auths": {"quay.io": {"auth": _auth("u", SECRET)}}})
    assert Credentials({"DOCKER_CONFIG": str(d)}).lookup("quay.io") == ("u", SECRET)


@pytest.fixture
def helper(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """Put the fake helper on PATH; return the env to pass and the directory it records into."""
    bindir, rec = tmp_path / "bin", tmp_path / "rec"
    bindir.mkdir()
    rec.mkdir()
    script = bindir / "docker-credential-cannerytest"
    script.write_text(f"""#!/bin/sh
# Fake credential helper (the docker-credential-* protocol): records argv and stdin.
tr '\\0' ' ' < /proc/$$/cmdline >> {rec}/argv
echo "${{CANNERY_REGISTRY_PASSWORD:-unset}}" >> {rec}/env
echo >> {rec}/argv
read -r server
echo "$server" >> {rec}/stdin
case "$server" in
  quay.io|https://index.docker.io/v1/)
    printf '{{"ServerURL":"%s","Username":"robot","Secret":"{SECRET}"}}' "$server" ;;
  broken.example) echo 'not json' ;;
  token.example) printf '{{"ServerURL":"t","Username":"<token>","Secret":"{SECRET}"}}' ;;
  *) echo "credentials not found in native keychain"; exit 1 ;;
esac
""")
    script.chmod(0o755)
    env = {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    return env, rec


@pytest.mark.parametrize("style", ["credHelpers", "credsStore"])
def test_credential_helper_protocol(tmp_path: Path, helper, style: str) -> None:  # type: ignore[no-untyped-def]
    env, rec = helper
    env = {**env, "CANNERY_REGISTRY_PASSWORD": "env-secret", "CANNERY_REGISTRY_HOST": "x.example"}
    if style == "credHelpers":
        cfg = {"credHelpers": {"quay.io": "cannerytest", "ghcr.io": "cannerytest",
                               "registry-1.docker.io": "cannerytest"}}
    else:
        cfg = {"credsStore": "cannerytest"}
    # A helper entry wins over a stale `auths` entry for the same host.
    cfg["auths"] = {"quay.io": {"auth": _auth("stale", "stale")}}
    creds = Credentials(env, _config(tmp_path, cfg))
    assert creds.lookup("quay.io") == ("robot", SECRET)
    assert creds.lookup("registry-1.docker.io") == ("robot", SECRET)
    assert creds.lookup("ghcr.io") is None  # "credentials not found": anonymous
    argv = (rec / "argv").read_text().splitlines()
    assert len(argv) == 3
    for line in argv:
        assert line.split()[-1] == "get" and SECRET not in line
        assert "quay.io" not in line  # the server goes on stdin, not argv
    assert set((rec / "env").read_text().split()) == {"unset"}
    assert (rec / "stdin").read_text().split() == [
        "quay.io", "https://index.docker.io/v1/", "ghcr.io"]


def test_credential_helper_failures_are_one_line(tmp_path: Path, helper) -> None:  # type: ignore[no-untyped-def]
    env, _ = helper
    creds = Credentials(env, _config(tmp_path, {"credHelpers": {"broken.example": "cannerytest",
                                                                "token.example": "cannerytest",
                                                                "x.example": "absent"}}))
    with pytest.raises(InputError, match="malformed answer"):
        creds.lookup("broken.example")
    with pytest.raises(InputError, match="docker-credential-absent not found on PATH"):
        creds.lookup("x.example")
    with pytest.raises(InputError, match="an identity token, which cannery does not support"):
        creds.lookup("token.example")


def test_identity_token_entry_is_reported(tmp_path: Path) -> None:
    d = _config(tmp_path, {"auths": {"quay.io": {"identitytoken": SECRET}}})
    with pytest.raises(InputError, match=r"auths\.quay\.io: an identity token") as exc:
        Credentials({}, d).lookup("quay.io")
    assert SECRET not in exc.value.message
