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


NAMED = {
    "CANNERY_REGISTRY_QUAY_USER": "q-user",
    "CANNERY_REGISTRY_QUAY_PASSWORD": "q-secret",
    "CANNERY_REGISTRY_SWR_CN_USER": "s-user",
    "CANNERY_REGISTRY_SWR_CN_PASSWORD": "s-secret",
}
HOSTS = {"quay": "quay.io", "swr-cn": "swr.cn-south-1.myhuaweicloud.com"}


def test_each_registry_gets_its_own_named_credentials(tmp_path: Path) -> None:
    creds = Credentials(NAMED, tmp_path, env_host=NO_HOST, registries=HOSTS)
    assert creds.lookup("quay.io") == ("q-user", "q-secret")
    assert creds.lookup("swr.cn-south-1.myhuaweicloud.com") == ("s-user", "s-secret")
    # A base image's registry gets neither.
    assert creds.lookup("registry-1.docker.io") is None


def test_named_credentials_never_cross_to_another_registry(tmp_path: Path) -> None:
    only_quay = {k: v for k, v in NAMED.items() if "QUAY" in k}
    creds = Credentials(only_quay, tmp_path, env_host=NO_HOST, registries=HOSTS)
    assert creds.lookup("swr.cn-south-1.myhuaweicloud.com") is None
    assert creds.lookup("quay.io") == ("q-user", "q-secret")


def test_named_credentials_come_before_the_docker_config(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(
        '{"auths": {"quay.io": {"username": "docker", "password": "cfg"},'
        ' "swr.cn-south-1.myhuaweicloud.com": {"username": "d2", "password": "cfg2"}}}'
    )
    only_quay = {k: v for k, v in NAMED.items() if "QUAY" in k}
    creds = Credentials(only_quay, tmp_path, env_host=NO_HOST, registries=HOSTS)
    assert creds.lookup("quay.io") == ("q-user", "q-secret")
    assert creds.lookup("swr.cn-south-1.myhuaweicloud.com") == ("d2", "cfg2")
