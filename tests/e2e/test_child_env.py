"""No secret in cannery's environment reaches third-party code (issue 13, item 3).

Real children, each of which writes the environment it was given to a file: a PEP 517 build
backend that ``uv pip compile`` runs to read a source tree's metadata (exactly what a
``setup.py`` could do), a ``GIT_SSH_COMMAND`` that ``git ls-remote`` starts, and a plain
``stream``/``run`` child. The environment holds cannery's registry credentials in every form and
other secrets; the dumps must hold none of them, and must hold the harmless variable beside
them (so an empty dump cannot pass).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from cannery.errors import LockError
from cannery.lock import resolve_git
from cannery.pydeps import PythonRequest, resolve_python
from cannery.tls import git_ca_bundle
from cannery.util.cmd import run, stream
from cannery.util.env import child_env, is_credential_name
from tests.services.pyindex import PackageIndex
from tests.services.tlsca import LocalCA

pytestmark = pytest.mark.e2e

SECRETS = {
    "CANNERY_REGISTRY_USER": "ci-user",
    "CANNERY_REGISTRY_PASSWORD": "pw-global-5ecret",
    "CANNERY_REGISTRY_QUAY_USER": "quay-user",
    "CANNERY_REGISTRY_QUAY_PASSWORD": "pw-quay-5ecret",
    "DOCKER_AUTH_CONFIG": '{"auths":{"quay.io":{"auth":"Y2k6c2VjcmV0"}}}',
    "GITHUB_TOKEN": "ghs_5ecret",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "oidc-5ecret",
    "AWS_SECRET_ACCESS_KEY": "aws-5ecret",
}
KEPT = {"CANNERY_CHILD_ENV_PROBE": "visible", "SSH_AUTH_SOCK": "/tmp/agent.sock"}

BACKEND = '''
import json, os

def _dump():
    with open(os.environ["CANNERY_CHILD_ENV_DUMP"], "w") as fh:
        json.dump(dict(os.environ), fh)

def get_requires_for_build_wheel(config_settings=None):
    _dump()
    return []

def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    _dump()
    info = os.path.join(metadata_directory, "envdump-1.0.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as fh:
        fh.write("Metadata-Version: 2.1\\nName: envdump\\nVersion: 1.0\\n")
    return "envdump-1.0.dist-info"

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _dump()
    raise RuntimeError("metadata is enough")
'''


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    dump = tmp_path / "env.json"
    for k, v in {**SECRETS, **KEPT, "CANNERY_CHILD_ENV_DUMP": str(dump)}.items():
        monkeypatch.setenv(k, v)
    yield dump


def _assert_clean(dump: Path) -> None:
    seen = json.loads(dump.read_text())
    assert seen["CANNERY_CHILD_ENV_PROBE"] == "visible"  # the dump is of the real environment
    assert seen["SSH_AUTH_SOCK"] == "/tmp/agent.sock"  # what tools need stays
    leaked = sorted(k for k in SECRETS if k in seen)
    assert not leaked, leaked
    values = json.dumps(seen)
    assert not [v for v in SECRETS.values() if v in values]


def test_uv_build_backend_sees_no_credential(
    secret_env: Path, tmp_path: Path, test_ca: LocalCA
) -> None:
    """A source tree's build backend runs inside ``uv pip compile`` (as setup.py would)."""
    tree = tmp_path / "envdump"
    tree.mkdir()
    (tree / "pyproject.toml").write_text(
        # No static [project] table: uv must ask the backend for the metadata.
        '[build-system]\nrequires = []\nbuild-backend = "dumpbackend"\nbackend-path = ["."]\n'
    )
    (tree / "dumpbackend.py").write_text(BACKEND)
    index = PackageIndex(tmp_path / "index", test_ca)
    try:
        req = PythonRequest(
            image="probe", arch="amd64", python="3.11", index_url=index.url,
            extra_index_urls=(), requirements=(f"envdump @ file://{tree}",), wheels=(), git=(),
        )
        with git_ca_bundle(test_ca.ca_cert) as ca:
            resolve_python(req, ca)
    finally:
        index.stop()
    assert secret_env.is_file(), "the build backend never ran"
    _assert_clean(secret_env)


def test_git_and_its_ssh_command_see_no_credential(secret_env: Path, tmp_path: Path) -> None:
    script = tmp_path / "ssh-dump"
    script.write_text(
        "#!/bin/sh\n"
        'python3 -c \'import json, os; json.dump(dict(os.environ), '
        'open(os.environ["CANNERY_CHILD_ENV_DUMP"], "w"))\'\n'
        "exit 1\n"
    )
    script.chmod(0o755)
    os.environ["GIT_SSH_COMMAND"] = str(script)
    try:
        with pytest.raises(LockError, match="cannot list refs"):
            resolve_git("ssh://git.invalid/repo.git", "v1")
    finally:
        del os.environ["GIT_SSH_COMMAND"]
    _assert_clean(secret_env)


def test_stream_and_run_children_and_extras(secret_env: Path, tmp_path: Path) -> None:
    dump_py = 'import json, os; json.dump(dict(os.environ), open(os.environ["OUT"], "w"))'
    log = tmp_path / "log"
    rc, _ = stream(["python3", "-c", dump_py], log, extra_env={"OUT": str(secret_env)})
    assert rc == 0
    _assert_clean(secret_env)
    # An extra cannot put a secret back: child_env filters what it is given too.
    run(["python3", "-c", dump_py],
        extra_env={"OUT": str(secret_env), "CANNERY_REGISTRY_PASSWORD": "again-5ecret"})
    _assert_clean(secret_env)
    assert "again-5ecret" not in secret_env.read_text()


@pytest.mark.parametrize(
    "name, secret",
    [
        ("CANNERY_REGISTRY_SWR_PASSWORD", True), ("cannery_registry_user", True),
        ("NPM_TOKEN", True), ("TWINE_PASSWORD", True), ("UV_INDEX_PRIVATE_PASSWORD", True),
        ("MY_API_KEY", True), ("GOOGLE_CREDENTIALS", True), ("DOCKER_AUTH_CONFIG", True),
        ("SSH_AUTH_SOCK", False), ("DOCKER_CONFIG", False), ("REGISTRY_AUTH_FILE", False),
        ("HTTPS_PROXY", False), ("UV_KEYRING_PROVIDER", False), ("TOKENIZERS_PARALLELISM", False),
        ("PATH", False), ("CANNERY_CA_CERT", False),
    ],
)
def test_the_rule_by_name(name: str, secret: bool) -> None:
    assert is_credential_name(name) is secret
    assert (name in child_env(base={name: "x"})) is not secret
