"""The end-to-end build world, made once per test session: two TLS registries behind the test CA
(one anonymous, holding the two-arch stand-in base image; one with htpasswd auth that images are
pushed to), the stand-in CANN installers and a wheel index over HTTPS, a git host (smart HTTP over
HTTPS) with the compiled component, and a catalog describing it."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.services.bases import cert_dir_for, push_base
from tests.services.githttp import GitHTTPSServer
from tests.services.registry import LocalRegistry, password_registry
from tests.services.standin import (
    make_fastops_repo,
    make_toolkit_run,
    make_wheelhouse,
    toolkit_table,
)
from tests.services.tlsca import HTTPSFileServer, LocalCA

CATALOG = """\
[catalog]
name = "e2e"
source = "https://example.com/cannery-e2e"
registry = "local"
python_index = "{files}/wheels/simple/"

[registries.local]
repository = "{push_host}/e2e/{repo}"

[bases.standin]
image = "{base}"
python = "3.11"
os = "debian"
os_version = "12"
chip = "910b"
toolkit_version = "8.5.1"

{toolkit_table}
[components.hello]
pip = ["hello-cannery==1.0"]

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


def own_images(text: str, images: str) -> str:
    """The world's catalog ``text`` with ``images`` (TOML) in place of its image, and without
    what those do not use, which the loader refuses: the fastops component and the toolkit's
    devlib (only fastops builds against it), the hello component, the standin base and the
    toolkit unless named."""
    text = text[: text.index("[images.standin]")]
    text = _drop(text, "components.fastops")
    text = re.sub(r'devlib = "[^"]*"\n', "", text)
    if '"hello"' not in images:
        text = _drop(text, "components.hello")
    if 'base = "standin"' not in images:
        text = _drop(text, "bases.standin")
    if 'toolkit = "standin-852"' not in images:
        text = _drop(_drop(text, "toolkits.standin-852"), "[toolkits.standin-852.packages]")
    return text + images


def _drop(text: str, table: str) -> str:
    """``text`` without the TOML table ``table`` (its header line up to the next header)."""
    return re.sub(rf"\[{re.escape(table)}\]\n(?:[^\[\n][^\n]*\n|\n)*", "", text)


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
            toolkit_table=toolkit_table("standin-852", self.files.url),
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
        """The environment cannery runs in: the test CA, the push registry's credentials, and
        a cache of this world's own (layer records, git and uv caches)."""
        return {
            **os.environ,
            "CANNERY_CACHE_DIR": str(self.root / "cache"),
            "CANNERY_CA_CERT": str(self.ca.ca_cert),
            "CANNERY_REGISTRY_USER": self.user,
            "CANNERY_REGISTRY_PASSWORD": self.password,
            **extra,
        }

    def stop(self) -> None:
        self.push_registry.stop()
        self.git.stop()
        self.files.stop()
        self.registry.stop()


def make_world(
    root: Path, ca: LocalCA, ports: dict[str, int] | None = None, keep: bool = False
) -> BuildWorld:
    """Start the world under ``root``. ``ports`` fixes the servers' ports (registry, push,
    files, git) and ``keep`` reuses what an earlier run left there (the demo runs twice)."""
    ports = ports or {}
    os.environ.setdefault("BUILDAH_ISOLATION", "chroot")  # no OCI runtime can run here
    use_own_storage(root / "containers")
    (root / "registry").mkdir(parents=True, exist_ok=True)
    registry = LocalRegistry(
        root / "registry", tls=(ca.server_cert, ca.server_key), port=ports.get("registry", 0)
    )
    (root / "push").mkdir(parents=True, exist_ok=True)
    secret = root / "push" / "password"
    user = "builder"
    if keep and secret.is_file():
        password = secret.read_text()
    else:
        password = secrets.token_urlsafe(18)
        fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(password)
    push_registry = password_registry(
        root / "push", (ca.server_cert, ca.server_key), user, password, port=ports.get("push", 0)
    )
    files_root = root / "www"
    if not (keep and files_root.is_dir()):
        files_root.mkdir(exist_ok=True)
        for arch in ("amd64", "arm64"):
            uname = {"amd64": "x86_64", "arm64": "aarch64"}[arch]
            make_toolkit_run(
                files_root / f"Ascend-cann-toolkit_8.5.2_linux-{uname}.run", "8.5.2", arch
            )
        make_wheelhouse(files_root / "wheels")
    files = HTTPSFileServer(files_root, ca, port=ports.get("files", 0))
    bare = root / "git" / "fastops.git"
    if keep and bare.is_dir():
        commit = subprocess.run(
            ["git", "--git-dir", str(bare), "rev-parse", "v1.0^{commit}"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    else:
        commit = make_fastops_repo(bare)
    git = GitHTTPSServer(root / "git", ca, port=ports.get("git", 0))
    base_ref = root / "base" / "reference"
    if keep and base_ref.is_file():
        base = base_ref.read_text()
    else:
        base = push_base(registry.host, ca, root / "base")
        base_ref.write_text(base)
    certs = cert_dir_for(ca, root / "certs")
    return BuildWorld(
        ca, registry, push_registry, user, password, files, files_root, git, commit, base, certs,
        root,
    )


def use_own_storage(root: Path) -> None:
    """Point buildah (in this process and every child: cannery, the tests) at a storage of
    this world's own, so concurrent runs never share, or delete, each other's containers."""
    if os.environ.get("CONTAINERS_STORAGE_CONF", "").startswith(str(root)):
        return
    root.mkdir(parents=True, exist_ok=True)
    conf = root / "storage.conf"
    conf.write_text(
        "[storage]\n"
        'driver = "overlay"\n'
        f'graphroot = "{root / "storage"}"\n'
        f'runroot = "{root / "run"}"\n'
    )
    os.environ["CONTAINERS_STORAGE_CONF"] = str(conf)


def working_containers() -> list[str]:
    """The names of the working containers in this world's buildah storage."""
    out = subprocess.run(["buildah", "containers", "--format", "{{.ContainerName}}"],
                         capture_output=True, text=True, check=True).stdout
    return sorted(out.split())


def cleanup_local_images() -> None:
    """Drop this world's buildah storage (the registries keep the results)."""
    conf = os.environ.get("CONTAINERS_STORAGE_CONF")
    if not conf or not shutil.which("buildah"):
        return
    subprocess.run(["buildah", "rm", "--all"], capture_output=True, check=False)
    subprocess.run(["buildah", "rmi", "--all", "--force"], capture_output=True, check=False)
    shutil.rmtree(Path(conf).parent, ignore_errors=True)
    del os.environ["CONTAINERS_STORAGE_CONF"]
