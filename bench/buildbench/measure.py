"""Timing and sizing: builds as a user runs them (fresh processes), images as the registry
holds them."""

from __future__ import annotations

import base64
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.e2e.buildenv import BuildWorld

from .stack import make_extension_source

MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"


@dataclass
class Series:
    """Repeated timings of one thing (seconds)."""

    runs: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    @property
    def spread(self) -> float:
        return max(self.runs) - min(self.runs)


def cache_bytecode() -> None:
    """Compile cannery's modules once, as installing a wheel does. With PYTHONDONTWRITEBYTECODE
    set (as on these machines) an editable install compiles every module again in every
    command, a cost (about 70 ms) that no installed cannery pays and no seed-style build has."""
    import compileall

    import cannery

    compileall.compile_dir(Path(cannery.__file__).parent, quiet=1)


def children_cpu() -> float:
    """CPU seconds (user + system) of every child process waited for so far, and theirs:
    a build's own work, which load does not stretch as it stretches wall time (the
    registries and file servers are not waited for until the end, so not in it)."""
    import resource

    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def run(argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    proc = subprocess.run(
        argv, env=env, cwd=cwd, capture_output=True, text=True, check=False,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:3])} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    start = time.perf_counter()
    out = run(argv, env)
    return time.perf_counter() - start, out


def seed_authfile(world: BuildWorld) -> Path:
    """The push registry's login for buildah, in an auth file of the world's own (mode 0600;
    never in argv), written once."""
    path = world.root / "seed-auth.json"
    if not path.exists():
        token = base64.b64encode(f"{world.user}:{world.password}".encode()).decode()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump({"auths": {world.push_registry.host: {"auth": token}}}, fh)
    return path


def seed_build(
    world: BuildWorld, dockerfile: Path, repo: str, verl: str, no_cache: bool
) -> tuple[float, str]:
    """Build (a) with buildah as a seed user would (`--layers`), push it; return the seconds
    and the pushed manifest's digest. It pushes where (b) pushes, with the same login (the
    push registry, htpasswd: every request checks the password), so neither side's push is
    spared the other's registry work."""
    certs = ["--cert-dir", str(world.cert_dir)]
    build = ["buildah", "build", "--quiet", "--platform", "linux/amd64", "--format", "docker",
             "--layers", *certs, "--network", "host", "--build-arg", f"VERL_COMMIT={verl}",
             "-f", str(dockerfile), "-t", "localhost/bench-seed"]
    if no_cache:
        build.append("--no-cache")
    build.append(str(dockerfile.parent))
    digest = dockerfile.parent / "seed.digest"
    push = ["buildah", "push", "--quiet", *certs, "--authfile", str(seed_authfile(world)),
            "--digestfile", str(digest), "localhost/bench-seed",
            f"docker://{world.push_registry.host}/bench/{repo}:latest"]
    start = time.perf_counter()
    run(build)
    run(push)
    return time.perf_counter() - start, digest.read_text().strip()


def cannery_build(
    world: BuildWorld, catalog: Path, force: bool, src: Path | None = None
) -> tuple[float, dict]:  # type: ignore[type-arg]
    """`cannery build --push` of (b); return the seconds and its JSON summary. ``src``: run
    the cannery sources there (first on PYTHONPATH) instead of the installed ones."""
    argv = [sys.executable, "-m", "cannery", "build", "--catalog", str(catalog), "--push",
            "--network", "host", "--json", "--log-dir", str(catalog.parent / "logs")]
    if force:
        argv.append("--force")
    env = world.env(PYTHONPATH=str(src)) if src is not None else world.env()
    took, out = timed(argv, env)
    return took, json.loads(out)


def export_revision(rev: str, dest: Path) -> Path:
    """The cannery sources of git revision ``rev`` of this checkout, exported into ``dest``
    (``git archive``) and compiled to bytecode as ``cache_bytecode`` does; return the
    directory to put first on PYTHONPATH."""
    root = Path(__file__).resolve().parents[2]
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(root), "archive", rev, "src/cannery"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    import compileall

    compileall.compile_dir(dest / "src" / "cannery", quiet=1)
    return dest / "src"


def pushed_digest(summary: dict) -> str:  # type: ignore[type-arg]
    return str(summary["images"][0]["platforms"][0]["digest"])


@dataclass(frozen=True)
class ImageSize:
    compressed: int  # the layers as pushed (gzip)
    uncompressed: int  # the same layers unpacked
    layers: int


def image_size(
    world: BuildWorld, host: str, repo: str, digest: str, auth: bool
) -> ImageSize:
    """Read the pushed manifest and stream every layer, counting bytes before and after gunzip."""
    creds = (world.user, world.password) if auth else None
    with httpx.Client(verify=str(world.ca.ca_cert), auth=creds, timeout=120) as client:
        resp = client.get(f"https://{host}/v2/{repo}/manifests/{digest}",
                          headers={"Accept": MANIFEST})
        resp.raise_for_status()
        layers = resp.json()["layers"]
        compressed = uncompressed = 0
        for layer in layers:
            unzip = zlib.decompressobj(wbits=31)
            with client.stream("GET", f"https://{host}/v2/{repo}/blobs/{layer['digest']}",
                               follow_redirects=True) as blob:
                blob.raise_for_status()
                for chunk in blob.iter_bytes(1 << 20):
                    compressed += len(chunk)
                    uncompressed += len(unzip.decompress(chunk))
            uncompressed += len(unzip.flush())
    return ImageSize(compressed, uncompressed, len(layers))


def compile_alone(units: int, funcs: int, jobs: int) -> float:
    """The extension's compile by itself, on this machine (no container): its own setup.py
    with MAX_JOBS=jobs, in a fresh copy of the sources."""
    with tempfile.TemporaryDirectory(prefix="bench-compile-") as tmp:
        src = make_extension_source(Path(tmp) / "src", units, funcs)
        env = {**os.environ, "MAX_JOBS": str(jobs)}
        argv = [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(Path(tmp) / "b")]
        start = time.perf_counter()
        run(argv, env, cwd=src)
        return time.perf_counter() - start


def write_layers(local: str) -> float:
    """Compress and write an image's layers once, as a cold build's export does (`buildah
    push`, every layer new): the part of a build no Dockerfile can avoid, besides the compile."""
    with tempfile.TemporaryDirectory(prefix="bench-layers-") as tmp:
        took, _ = timed(["buildah", "push", "--quiet", "--format", "v2s2", local,
                         f"dir:{Path(tmp) / 'layout'}"])
        shutil.rmtree(tmp, ignore_errors=True)
    return took


def local_rendered_image() -> str:
    out = run(["buildah", "images", "--format", "{{.Name}}:{{.Tag}}"])
    names = [n for n in out.split() if "cannery-build/rendered" in n]
    if not names:
        raise SystemExit("no local image of (b) to measure the layer write with")
    return names[0]
