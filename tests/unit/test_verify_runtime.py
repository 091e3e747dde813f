"""verify's runtime half, the parts that need no container: the env comparison, the pull
command line (plain HTTP only when the client fell back to it), and the auth file buildah gets
(a private file named in the environment, never an argv)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from cannery.verify.runtime import compare_env, pull_argv, registry_auth_file

P = "linux/amd64"


def test_env_script_that_changes_nothing_passes() -> None:
    image = {"PATH": "/opt/cann/bin:/usr/bin", "ASCEND_HOME_PATH": "/opt/cann"}
    sourced = {**image, "PATH": "/opt/cann/bin:/usr/bin:/opt/cann/bin", "SHLVL": "2"}
    assert [(c.name, c.ok) for c in compare_env(image, sourced, P)] == [("runtime env", True)]


def test_a_variable_only_the_script_sets_fails_naming_it() -> None:
    image = {"PATH": "/usr/bin"}
    sourced = {"PATH": "/opt/cann/bin:/usr/bin", "ASCEND_HOME_PATH": "/opt/cann"}
    failed = {c.name: c.detail for c in compare_env(image, sourced, P) if not c.ok}
    assert set(failed) == {"runtime env PATH", "runtime env ASCEND_HOME_PATH"}
    assert "image lacks /opt/cann/bin" in failed["runtime env PATH"]


def test_a_build_only_devlib_and_a_trailing_slash_are_no_difference() -> None:
    """As the install step's check: CANN 8.5.2's script puts devlib on LD_LIBRARY_PATH (a stub
    the image must not carry) and writes two driver paths with a trailing '/'."""
    image = {"LD_LIBRARY_PATH": "/opt/cann/lib64:/usr/local/Ascend/driver/lib64/common"}
    sourced = {"LD_LIBRARY_PATH": "/opt/cann/devlib:/usr/local/Ascend/driver/lib64/common/:"
                                  + image["LD_LIBRARY_PATH"]}
    assert [(c.name, c.ok) for c in compare_env(image, sourced, P)] == [("runtime env", True)]
    sourced["LD_LIBRARY_PATH"] = "/opt/cann/aml/lib64/:" + image["LD_LIBRARY_PATH"]
    (check,) = compare_env(image, sourced, P)
    assert not check.ok and check.detail == "image lacks /opt/cann/aml/lib64/"


def test_pull_argv_plain_http_only_when_the_client_fell_back(tmp_path: Path) -> None:
    ref = "127.0.0.1:5000/x@sha256:" + "a" * 64
    tls = pull_argv(ref, "linux/arm64", tmp_path, plain_http=False)
    assert "--tls-verify=false" not in tls and tls[-1] == ref
    assert tls[tls.index("--cert-dir") + 1] == str(tmp_path)
    assert tls[tls.index("--arch") + 1] == "arm64"
    plain = pull_argv(ref, "linux/arm64", tmp_path, plain_http=True)
    assert "--tls-verify=false" in plain and "--cert-dir" not in plain


def test_auth_file_is_private_named_by_env_and_removed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CANNERY_REGISTRY_USER", "ci")
    monkeypatch.setenv("CANNERY_REGISTRY_PASSWORD", "pw-5ecret")
    monkeypatch.delenv("CANNERY_REGISTRY_HOST", raising=False)
    with registry_auth_file("127.0.0.1:5000") as extra:
        assert set(extra) == {"REGISTRY_AUTH_FILE"}  # no secret in the environment itself
        path = Path(extra["REGISTRY_AUTH_FILE"])
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert "127.0.0.1:5000" in json.loads(path.read_text())["auths"]
    assert not path.exists()
    monkeypatch.delenv("CANNERY_REGISTRY_PASSWORD")
    monkeypatch.setenv("DOCKER_CONFIG", str(path.parent / "nowhere"))
    with registry_auth_file("127.0.0.1:5000") as extra:
        assert extra == {}
