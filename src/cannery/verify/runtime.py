"""Runtime checks in a fresh container of the pushed image, per platform (arm64 under qemu):
the image env already holds every variable the toolkit's env script sets (so nothing depends on
`source` having run: the review's third finding, checked dynamically), and the smoke imports
succeed. Containers are made with ``buildah from`` + ``buildah run`` (daemonless)."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shlex
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cannery.errors import FatalError
from cannery.oci import Credentials
from cannery.plan import ImageSpec
from cannery.render.dockerfile import SEARCH_PATHS, lacking_elements
from cannery.util.cmd import CommandError, run
from cannery.verify.model import Check

# Set by bash itself, not by an env script.
_SHELL_OWN = {"SHLVL", "_", "PWD", "OLDPWD"}


def _env(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and name.isidentifier():
            out[name] = value
    return out


def compare_env(image: dict[str, str], sourced: dict[str, str], platform: str) -> list[Check]:
    """A variable the script sets must already be in the image with the same value; for a
    search path, every element the script adds must already be in the image's
    (``lacking_elements``: not an empty or build-only devlib one, a trailing '/' aside)."""
    checks = []
    for name in sorted(sourced):
        if name in _SHELL_OWN or sourced[name] == image.get(name):
            continue
        have = image.get(name)
        if name in SEARCH_PATHS and have is not None:
            missing = lacking_elements(have, sourced[name])
            if not missing:
                continue
            detail = f"image lacks {', '.join(missing)}"
        else:
            detail = f"image has {have!r}; the env script sets {sourced[name]!r}"
        checks.append(Check(f"runtime env {name}", False, detail, platform))
    if not checks:
        checks.append(Check("runtime env", True, "env script changes nothing", platform))
    return checks


@contextmanager
def registry_auth_file(
    host: str, registries: dict[str, str] | None = None
) -> Iterator[dict[str, str]]:
    """What buildah needs added to its environment to pull from ``host`` with cannery's
    credentials: a private auth file (mode 0600, removed afterwards) named by
    REGISTRY_AUTH_FILE, never an argv. The rest of the environment is ``child_env``'s.
    ``registries``: catalog registry name → host, for the per-registry variables."""
    creds = Credentials(env_host=host, registries=registries).lookup(host)
    if creds is None:
        yield {}
        return
    tmp = Path(tempfile.mkdtemp(prefix="cannery-auth-"))
    try:
        path = tmp / "auth.json"
        token = base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            # containers/image names Docker Hub docker.io, not its API host.
            key = "docker.io" if host in ("registry-1.docker.io", "index.docker.io") else host
            json.dump({"auths": {key: {"auth": token}}}, fh)
        yield {"REGISTRY_AUTH_FILE": str(path)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def pull_argv(
    image_ref: str, platform: str, cert_dir: Path | None, plain_http: bool
) -> list[str]:
    """``buildah from`` for one platform of ``image_ref``. ``plain_http``: the registry client
    fell back to plain HTTP for this (loopback) host, so buildah must too; buildah has no
    "HTTP only" switch, and ``--tls-verify=false`` is given for exactly that case, never for a
    host that spoke TLS to cannery."""
    arch = platform.split("/")[1]
    argv = ["buildah", "from", "--quiet", "--arch", arch, "--pull"]
    if plain_http:
        argv.append("--tls-verify=false")
    elif cert_dir:
        argv += ["--cert-dir", str(cert_dir)]
    return [*argv, image_ref]


def runtime_checks(
    image_ref: str,
    platform: str,
    spec: ImageSpec,
    cert_dir: Path | None,
    host: str,
    plain_http: bool = False,
    registries: dict[str, str] | None = None,
) -> list[Check]:
    try:
        with registry_auth_file(host, registries) as auth_env:
            argv = pull_argv(image_ref, platform, cert_dir, plain_http)
            ctr = run(argv, extra_env=auth_env, timeout=600).strip()
    except CommandError as exc:
        return [Check("container", False, exc.message, platform)]
    try:
        checks = []
        image_env = _env(run(["buildah", "run", ctr, "--", "env"], timeout=300))
        # a toolkit the host provides is not in the image: nothing of it to compare
        scripts = list(spec.toolkit.env_scripts) if spec.toolkit else []
        if scripts:
            sources = " && ".join(f"source {shlex.quote(s)} >/dev/null" for s in scripts)
            try:
                sourced = _env(
                    run(["buildah", "run", ctr, "--", "bash", "-c", f"{sources} && env"],
                        timeout=300)
                )
            except CommandError as exc:
                checks.append(
                    Check("runtime env", False, f"sourcing failed: {exc.message}", platform)
                )
            else:
                checks += compare_env(image_env, sourced, platform)
        py = spec.python_install
        if py is not None:
            # the Python the image installs is the one found first: a source build exactly,
            # distribution packages at least in the version's minor line
            want = py.version if py.install == "source" else ".".join(py.version.split(".")[:2])
            try:
                have = run(["buildah", "run", ctr, "--", "python3", "--version"],
                           timeout=300).strip()
                ok = have == f"Python {want}" or (
                    py.install == "packages" and have.startswith(f"Python {want}.")
                )
                checks.append(Check("python version", ok, "" if ok else
                                    f"python3 --version says {have!r}; catalog says {want}",
                                    platform))
            except CommandError as exc:
                checks.append(Check("python version", False, exc.message, platform))
        for module in spec.smoke_imports:
            try:
                run(["buildah", "run", ctr, "--", "python3", "-c", f"import {module}"],
                    timeout=300)
                checks.append(Check(f"import {module}", True, "", platform))
            except CommandError as exc:
                checks.append(Check(f"import {module}", False, exc.message, platform))
        return checks
    finally:
        with contextlib.suppress(FatalError):
            run(["buildah", "rm", ctr], timeout=120)
