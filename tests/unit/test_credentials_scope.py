"""Push credentials from the environment go to the push registry only, never to a base
image's registry (a `cannery build` talks to both: it locks the base, then pushes)."""

from __future__ import annotations

from pathlib import Path

from cannery.oci.auth import NO_HOST, Credentials, push_host

ENV = {"CANNERY_REGISTRY_USER": "ci", "CANNERY_REGISTRY_PASSWORD": "s3cret"}


def test_env_credentials_follow_the_push_host(tmp_path: Path) -> None:
    creds = Credentials(ENV, tmp_path, env_host="quay.io")
    assert creds.lookup("quay.io") == ("ci", "s3cret")
    assert creds.lookup("swr.cn-south-1.myhuaweicloud.com") is None


def test_registry_host_variable_names_the_host_instead(tmp_path: Path) -> None:
    env = {**ENV, "CANNERY_REGISTRY_HOST": "registry.internal:5000"}
    creds = Credentials(env, tmp_path, env_host="quay.io")
    assert creds.lookup("registry.internal:5000") == ("ci", "s3cret")
    assert creds.lookup("quay.io") is None


def test_several_push_hosts_send_env_credentials_nowhere(tmp_path: Path) -> None:
    host = push_host(["quay.io/ascend/verl", "registry.internal:5000/verl"])
    assert host == NO_HOST
    creds = Credentials(ENV, tmp_path, env_host=host)
    assert creds.lookup("quay.io") is None and creds.lookup("registry.internal:5000") is None
    assert push_host(["quay.io/a/b", "quay.io/c"]) == "quay.io"
