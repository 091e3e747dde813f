"""The end-to-end build world, made once per test session: two TLS registries behind the test CA
(one anonymous, holding the two-arch stand-in base image; one with htpasswd auth that images are
pushed to), the stand-in CANN installers and a wheel index over HTTPS, a git host (smart HTTP over
HTTPS) with the compiled component, and a catalog describing it."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.services.bases import cert_dir_for, push_base
from tests.services.githttp import GitHTTPSServer
from tests.services.registry import LocalRegistry
from tests.services.standin import ENV_TABLE, make_fastops_repo, make_toolkit_run, make_wheelhouse
from tests.services.tlsca import HTTPSFileServer, LocalCA

CATALOG = """\
[catalog]
name = "e2e"
source = "https://example.com/cannery-e2e"
registry = "local"

[registries.local]
repository = "{push_host}/e2e/{repo}"

[bases.standin]
image = "{base}"
python = "3.11"
os = "debian"
os_version = "12"
chip = "910b"
toolkit_version = "8.5.1"

{env_table}
[toolkits.standin-852]
version = "8.5.2"
env = "standin"
devlib = "/usr/local/Ascend/cann-{{version}}/{{uname_arch}}-linux/devlib/linux/{{uname_arch}}"
env_scripts = ["/usr/local/Ascend/ascend-toolkit/set_env.sh"]
install_args = ["--quiet", "--install", "--install-for-all"]

[[toolkits.standin-852.packages]]
name = "toolkit"
url = "{files}/Ascend-cann-toolkit_{{version}}_linux-{{uname_arch}}.run"

[components.hello]
pip = ["hello-cannery==1.0"]
pip_args = ["--index-url", "{files}/wheels/simple/"]

[components.fastops]
git = "{git}/fastops.git"
ref = "v1.0"
pip_args = ["--no-build-isolation"]
toolkit_build = true
jobs = {{ limit = 1, reason = "stand-in for the custom-kernel compile that runs out of memory" }}

[images.standin]
base = "standin"
toolkit = "standin-852"
soc = "ascend910b1"
recipe = "e2e"
platforms = ["linux/amd64", "linux/arm64"]
tag = "e2e-{{cann}}-{{chip}}-py{{python}}"
components = ["hello", "fastops"]
smoke_imports = ["cann_standin", "hello_cannery", "fastops"]
"""


@dataclass
class BuildWorld:
    ca: LocalCA
    registry: LocalRegistry  # anonymous: bases, hand-written images
    push_registry: LocalRegistry  # htpasswd: where cannery pushes
    user: str
    password: str
    files: HTTPSFileServer
    files_root: Path
    git: GitHTTPSServer
    fastops_commit: str
    base: str
    cert_dir: Path
    root: Path

    def catalog(self, where: Path, repo: str = "standin") -> Path:
        """Write the e2e catalog (pushing to ``e2e/<repo>``) to ``where/catalog.toml``."""
        where.mkdir(parents=True, exist_ok=True)
        text = CATALOG.format(
            push_host=self.push_registry.host,
            repo=repo,
            base=self.base,
            env_table=ENV_TABLE,
            files=self.files.url,
            git=self.git.url,
        )
        path = where / "catalog.toml"
        path.write_text(text)
        return path

    def installer(self, arch: str) -> Path:
        uname = {"amd64": "x86_64", "arm64": "aarch64"}[arch]
        return self.files_root / f"Ascend-cann-toolkit_8.5.2_linux-{uname}.run"

    def env(self, **extra: str) -> dict[str, str]:
        """The environment cannery runs in: the test CA, and the push registry's credentials."""
        return dict(
            os.environ,
            CANNERY_CA_CERT=str(self.ca.ca_cert),
            CANNERY_REGISTRY_USER=self.user,
            CANNERY_REGISTRY_PASSWORD=self.password,
            **extra,
        )

    def stop(self) -> None:
        self.push_registry.stop()
        self.git.stop()
        self.files.stop()
        self.registry.stop()


def make_world(root: Path, ca: LocalCA) -> BuildWorld:
    os.environ.setdefault("BUILDAH_ISOLATION", "chroot")  # no OCI runtime can run here
    (root / "registry").mkdir(parents=True)
    registry = LocalRegistry(root / "registry", tls=(ca.server_cert, ca.server_key))
    (root / "push").mkdir(parents=True)
    user, password = "builder", secrets.token_urlsafe(18)
    htpasswd = root / "push" / "htpasswd"
    # bcrypt via Python's crypt is not available everywhere; htpasswd reads the password on stdin.
    subprocess.run(
        ["htpasswd", "-iBc", str(htpasswd), user], input=password, text=True, check=True,
        capture_output=True,
    )
    push_registry = LocalRegistry(
        root / "push", tls=(ca.server_cert, ca.server_key), htpasswd=htpasswd
    )
    files_root = root / "www"
    files_root.mkdir()
    for arch in ("amd64", "arm64"):
        uname = {"amd64": "x86_64", "arm64": "aarch64"}[arch]
        make_toolkit_run(files_root / f"Ascend-cann-toolkit_8.5.2_linux-{uname}.run", "8.5.2", arch)
    make_wheelhouse(files_root / "wheels")
    files = HTTPSFileServer(files_root, ca)
    commit = make_fastops_repo(root / "git" / "fastops.git")
    git = GitHTTPSServer(root / "git", ca)
    base = push_base(registry.host, ca, root / "base")
    certs = cert_dir_for(ca, root / "certs")
    return BuildWorld(
        ca, registry, push_registry, user, password, files, files_root, git, commit, base, certs,
        root,
    )


def cleanup_local_images() -> None:
    """Drop what builds left in buildah's local storage (the registry keeps the results)."""
    if shutil.which("buildah"):
        subprocess.run(["buildah", "rm", "--all"], capture_output=True, check=False)
        subprocess.run(["buildah", "rmi", "--prune"], capture_output=True, check=False)
