"""``Credentials.docker_config``: the temporary Docker config a child that reads Docker's own
config (BuildKit through buildx) gets cannery's logins in. The end-to-end use, with a registry
that requires the login, is tests/e2e/test_build_buildx_login.py."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path

import pytest

from cannery.errors import FatalError
from cannery.oci.auth import HUB_KEY, Credentials


def _auth(user: str, password: str) -> dict[str, str]:
    return {"auth": base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_each_host_gets_the_login_cannery_would_send_it(tmp_path: Path) -> None:
    own = tmp_path / "own"
    own.mkdir()
    (own / "config.json").write_text(json.dumps({
        "auths": {"base.example.com": _auth("puller", "pull-pw"),
                  "unrelated.example.com": _auth("x", "y")},
        "credHelpers": {"unrelated.example.com": "nope"},
        "credsStore": "",
        "detachKeys": "ctrl-e,e",
    }))
    creds = Credentials(
        {"CANNERY_REGISTRY_HUB_USER": "me", "CANNERY_REGISTRY_HUB_PASSWORD": "hub-pw",
         "CANNERY_REGISTRY_USER": "generic", "CANNERY_REGISTRY_PASSWORD": "generic-pw",
         "BUILDX_CONFIG": "/somewhere/buildx"},
        own, env_host="push.example.com", registries={"hub": "registry-1.docker.io"},
    )
    hosts = ["registry-1.docker.io", "push.example.com", "base.example.com", "anon.example.com"]
    with creds.docker_config(hosts) as env:
        where = Path(env["DOCKER_CONFIG"])
        # buildah (containers/image) reads the same file, by its own variable
        assert env["REGISTRY_AUTH_FILE"] == str(where / "config.json")
        assert stat.S_IMODE(where.stat().st_mode) == 0o700
        assert stat.S_IMODE((where / "config.json").stat().st_mode) == 0o600
        config = json.loads((where / "config.json").read_text())
        assert "BUILDX_CONFIG" not in env  # the caller's own is kept
    assert not where.exists()
    assert config == {
        "detachKeys": "ctrl-e,e",
        "auths": {
            HUB_KEY: _auth("me", "hub-pw"),  # Docker Hub under the key docker login uses
            "push.example.com": _auth("generic", "generic-pw"),  # only the push host's
            "base.example.com": _auth("puller", "pull-pw"),  # from the user's own config
        },
    }


def test_removed_when_the_block_fails(tmp_path: Path) -> None:
    creds = Credentials({"CANNERY_REGISTRY_USER": "u", "CANNERY_REGISTRY_PASSWORD": "p"},
                        tmp_path)
    with pytest.raises(FatalError), creds.docker_config(["h.example.com"]) as env:
        assert env["BUILDX_CONFIG"] == str(tmp_path / "buildx")
        raise FatalError("the build failed")
    assert not Path(env["DOCKER_CONFIG"]).exists()


def test_credential_keys_dropped_in_any_case(tmp_path: Path) -> None:
    """Docker matches config keys without regard to case (Go's encoding/json): a user's
    "CredHelpers" would override cannery's login for its host, "Auths" would carry the user's
    other logins along. Neither reaches the temporary config."""
    (tmp_path / "config.json").write_text(json.dumps({
        "CredHelpers": {"push.example.com": "desktop"},
        "CREDSSTORE": "desktop",
        "Auths": {"other.example.com": _auth("x", "y")},
        "proxies": {},
    }))
    creds = Credentials({"CANNERY_REGISTRY_USER": "u", "CANNERY_REGISTRY_PASSWORD": "p"},
                        tmp_path, env_host="push.example.com")
    with creds.docker_config(["push.example.com"]) as env:
        config = json.loads((Path(env["DOCKER_CONFIG"]) / "config.json").read_text())
    assert config == {"proxies": {}, "auths": {"push.example.com": _auth("u", "p")}}
