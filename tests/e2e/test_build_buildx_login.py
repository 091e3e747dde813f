"""BuildKit pushes with cannery's login: ``--backend buildx --push --registry-cache`` against a
real registry on loopback that requires a password (htpasswd, TLS with the test CA).

``docker buildx`` cannot be installed here, so a script named ``docker`` stands in for it, and
does what matters here as BuildKit does: it takes registry logins from ``$DOCKER_CONFIG/
config.json`` alone (``auths``, as ``docker login`` writes them) and with them pushes the image
by digest and exports its registry cache to the cache ref (here: the same tiny image under the
cache tag). It records what it was handed: the config's contents and modes, its environment
(names only) and argv. Everything else is real: cannery's credential lookup, the temporary
config, the registry's 401 without the login, the merge and tag move.

Before cannery wrote the temporary config, BuildKit had only docker's own login (none in CI),
so the first push answered 401: this test fails there.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.catalogs import tiny
from tests.conftest import ROOT
from tests.e2e.test_build_buildx import fake_docker_dir
from tests.services.registry import LocalRegistry, password_registry, push_image
from tests.services.tlsca import LocalCA

pytestmark = pytest.mark.e2e

USER, PASSWORD = "leg", "Pa55-for-buildkit-only"
AUTH = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()  # as `docker login` stores it

FAKE_BUILDX = """#!{python}
import base64, json, os, ssl, stat, sys
sys.path.insert(0, {root!r})
from tests.services.registry import push_image
argv = sys.argv[1:]
where = os.environ.get("DOCKER_CONFIG", "")
record = {{"argv": argv, "env": sorted(os.environ), "docker_config": where,
          "buildx_config": os.environ.get("BUILDX_CONFIG")}}
config = {{}}
if where and os.path.isfile(os.path.join(where, "config.json")):
    path = os.path.join(where, "config.json")
    record["modes"] = [stat.S_IMODE(os.stat(where).st_mode), stat.S_IMODE(os.stat(path).st_mode)]
    record["links"] = sorted(n for n in os.listdir(where) if os.path.islink(os.path.join(where, n)))
    config = json.load(open(path))
    record["config"] = config
with open(os.environ["FAKE_DOCKER_LOG"], "a") as fh:
    fh.write(json.dumps(record) + "\\n")
if os.environ.get("FAKE_DOCKER_FAIL"):
    print("#12 ERROR: process did not complete successfully: exit code: 1")
    sys.exit(1)
out = dict(o.split("=", 1) for o in argv[argv.index("--output") + 1].split(","))
cache = argv[argv.index("--cache-to") + 1].split(",")[1].removeprefix("ref=")
host, _, repo = out["name"].partition("/")
entry = config.get("auths", {{}}).get(host)
auth = tuple(base64.b64decode(entry["auth"]).decode().split(":", 1)) if entry else None
arch = argv[argv.index("--platform") + 1].split("/")[1]
try:
    # the cache export: the cache ref's tag; the image: by digest (the same bytes here)
    digest = push_image("https://" + host, repo, cache.rpartition(":")[2], arch,
                        note="built by the buildx stand-in",
                        verify=ssl.create_default_context(cafile=os.environ["CANNERY_CA_CERT"]),
                        auth=auth)
except Exception as exc:
    print(f"#9 ERROR: failed to push {{out['name']}}: {{exc}}")
    sys.exit(1)
import httpx, ssl
size = len(httpx.get(f"https://{{host}}/v2/{{repo}}/manifests/{{digest}}", auth=auth,
                     verify=ssl.create_default_context(cafile=os.environ["CANNERY_CA_CERT"]),
                     headers={{"Accept": "application/vnd.oci.image.manifest.v1+json"}}).content)
desc = {{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest,
         "size": size}}
with open(argv[argv.index("--metadata-file") + 1], "w") as fh:
    json.dump({{"containerimage.descriptor": desc, "containerimage.digest": digest}}, fh)
print("#1 pushed", digest)
"""


@pytest.fixture(scope="module")
def private(tmp_path_factory: pytest.TempPathFactory, test_ca: LocalCA) -> Iterator[LocalRegistry]:
    reg = password_registry(tmp_path_factory.mktemp("private"),
                            (test_ca.server_cert, test_ca.server_key), USER, PASSWORD)
    yield reg
    reg.stop()


def _world(
    tmp_path: Path, private: LocalRegistry, registry: LocalRegistry, test_ca: LocalCA,
    repo: str = "team/image",
) -> tuple[Path, dict[str, str]]:
    """``repo``: where the image goes in ``private`` (a module-wide registry: a test that must
    build names its own, or an earlier test's push of the same inputs is skipped as done)."""
    push_image(registry.url, "lg/base", "1", "amd64")  # the base: anonymous, another host
    bindir = fake_docker_dir(tmp_path, FAKE_BUILDX.format(python=sys.executable, root=str(ROOT)))
    catalog = tmp_path / "cannery.toml"
    catalog.write_text(tiny("login", f"{private.host}/{repo}", f"{registry.host}/lg/base:1",
                            "lg-{cann}", platforms=("linux/amd64",), registry="private"))
    # The user's own docker config: other settings are kept, other logins are not handed on.
    own = tmp_path / "dotdocker"
    (own / "cli-plugins").mkdir(parents=True)
    (own / "buildx" / "instances").mkdir(parents=True)
    (own / "config.json").write_text(json.dumps({
        "proxies": {"default": {"noProxy": "127.0.0.1"}},
        "auths": {"other.example.com": {"auth": "b3RoZXI6b3RoZXItc2VjcmV0"}},
        "credHelpers": {"helped.example.com": "nothing"},
    }))
    env = dict(
        os.environ,
        PATH=f"{bindir}:{os.environ['PATH']}",
        DOCKER_CONFIG=str(own),
        FAKE_DOCKER_LOG=str(tmp_path / "docker.log"),
        CANNERY_CA_CERT=str(test_ca.ca_cert),
        CANNERY_REGISTRY_PRIVATE_USER=USER,
        CANNERY_REGISTRY_PRIVATE_PASSWORD=PASSWORD,
    )
    env.pop("BUILDX_CONFIG", None)
    return catalog, env


def _cannery(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cannery", *args], env=env, capture_output=True,
                          text=True, check=False, timeout=300)


def test_buildkit_pushes_and_exports_its_cache_with_cannerys_login(
    tmp_path: Path, private: LocalRegistry, registry: LocalRegistry, test_ca: LocalCA
) -> None:
    catalog, env = _world(tmp_path, private, registry, test_ca)
    proc = _cannery("build", "--catalog", str(catalog), "--backend", "buildx", "--builder",
                    "ci-builder", "--registry-cache", "--push", "--json",
                    "--log-dir", str(tmp_path / "logs"), env=env)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    (call,) = [json.loads(line) for line in (tmp_path / "docker.log").read_text().splitlines()]
    # A config of its own, private to the user, with the one login the build needs: the push
    # registry's (the image and its cache), not the base's registry, not the user's others.
    assert call["docker_config"] != env["DOCKER_CONFIG"]
    assert call["modes"] == [0o700, 0o600]
    auth = {private.host: {"auth": AUTH}}
    assert call["config"] == {"proxies": {"default": {"noProxy": "127.0.0.1"}}, "auths": auth}
    # buildx still finds the builders it stored, and docker its plugins, in the user's config
    assert call["buildx_config"] == str(tmp_path / "dotdocker" / "buildx")
    assert call["links"] == ["cli-plugins"]
    # No secret in its argv or in a variable; the file is gone once the build is done.
    assert PASSWORD not in " ".join(call["argv"])
    assert not [n for n in call["env"] if n.startswith("CANNERY_REGISTRY_")]
    assert not Path(call["docker_config"]).exists()
    for log in (tmp_path / "logs").rglob("*.log"):
        assert PASSWORD not in log.read_text() and AUTH not in log.read_text()
    assert PASSWORD not in proc.stdout + proc.stderr
    # The leg's push and cache export reached the registry, and the tag moved after the merge.
    summary = json.loads(proc.stdout)["images"][0]
    assert summary["tags_moved"] == ["lg-9.1.0"]
    ca = ssl.create_default_context(cafile=str(test_ca.ca_cert))
    accept = "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json"
    for ref in ("lg-9.1.0", "cache-one-amd64"):
        resp = httpx.get(f"https://{private.host}/v2/team/image/manifests/{ref}",
                         auth=(USER, PASSWORD), verify=ca, headers={"Accept": accept})
        assert resp.status_code == 200, ref
    anonymous = httpx.get(f"https://{private.host}/v2/team/image/tags/list", verify=ca)
    assert anonymous.status_code == 401  # the registry does require the login


def test_a_failed_build_leaves_no_config_behind(
    tmp_path: Path, private: LocalRegistry, registry: LocalRegistry, test_ca: LocalCA
) -> None:
    """BuildKit fails: the leg fails, naming the engine's last lines, and the temporary
    config (the login in it) is removed all the same."""
    catalog, env = _world(tmp_path, private, registry, test_ca, repo="team/failing")
    env["FAKE_DOCKER_FAIL"] = "1"
    proc = _cannery("build", "--catalog", str(catalog), "--backend", "buildx",
                    "--registry-cache", "--push", "--platform", "linux/amd64", "--digest-dir",
                    str(tmp_path / "digests"), "--log-dir", str(tmp_path / "logs"), env=env)
    assert proc.returncode == 1, proc.stderr
    assert "#12 ERROR: process did not complete successfully" in proc.stderr
    (call,) = [json.loads(line) for line in (tmp_path / "docker.log").read_text().splitlines()]
    assert call["config"]["auths"] == {private.host: {"auth": AUTH}}
    assert not Path(call["docker_config"]).exists()
