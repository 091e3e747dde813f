"""The stand-in stack both Dockerfiles build, generated here (nothing comes from the internet).

Shaped like the seed's (verl on CANN, see /work/shared/seed): a CANN base that already ships a
toolkit, the toolkit installer of the next version (incompressible filler: the size knob), a few
pure-Python wheels and a "torch" wheel with weight, a C extension of many translation units
compiled through setuptools that honours ``MAX_JOBS`` (vllm-ascend), a repository with a long
history (transformers), and a small framework pinned by commit (verl), bumped once.
"""

from __future__ import annotations

import io
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.e2e.buildenv import BuildWorld
from tests.services.standin import add_uv_wheels, make_toolkit_run, make_wheelhouse


@dataclass(frozen=True)
class Size:
    """The knobs: how big each part of the stand-in stack is."""

    toolkit_mb: int  # incompressible bytes in the toolkit installer (and the base's toolkit)
    units: int  # translation units in the compiled extension
    funcs: int  # functions per unit: the compile's weight per unit
    commits: int  # history of the transformers stand-in
    blob_kb: int  # incompressible bytes each of those commits adds
    torch_mb: int  # incompressible bytes in the torch wheel


SIZES = {
    "tiny": Size(toolkit_mb=1, units=8, funcs=2, commits=30, blob_kb=4, torch_mb=1),
    "moderate": Size(toolkit_mb=150, units=200, funcs=16, commits=2000, blob_kb=16, torch_mb=40),
    "large": Size(toolkit_mb=600, units=200, funcs=40, commits=4000, blob_kb=16, torch_mb=200),
}

WHEELS = [("six_standin", "1.16"), ("packaging_standin", "24.0"), ("tqdm_standin", "4.66")]
TORCH = ("torch_standin", "2.1")

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}


def git(*args: str, cwd: Path, data: bytes | None = None) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **_GIT_ENV}, input=data, check=True,
        capture_output=True,
    )
    return proc.stdout.decode().strip()


def _serve(work: Path, bare: Path) -> None:
    git("clone", "-q", "--bare", str(work), str(bare), cwd=work.parent)
    # Let clients fetch a bare commit id (`git fetch --depth 1 URL <commit>`), as GitHub does.
    git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=bare)
    git("config", "http.receivepack", "false", cwd=bare)


def _pyproject(name: str, version: str, packages: list[str], setup: bool = False) -> str:
    """Static metadata, so the resolver reads it without running a build."""
    text = (
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        f'\n[project]\nname = "{name}"\nversion = "{version}"\ndependencies = []\n'
    )
    if not setup:
        text += f"\n[tool.setuptools]\npackages = {packages!r}\n".replace("'", '"')
    return text


_EXT_SETUP = '''\
"""ascendops: many C units compiled into one shared library, as many at once as MAX_JOBS allows
(empty or unset: every core), as vllm-ascend's build does through CMake."""
import concurrent.futures
import os
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildLib(build_py):
    def run(self):
        super().run()
        jobs = int(os.environ.get("MAX_JOBS") or os.cpu_count() or 1)
        out = Path(self.build_lib) / "ascendops"
        objs = HERE / "build" / "obj"
        objs.mkdir(parents=True, exist_ok=True)

        def cc(src):
            obj = objs / (src.stem + ".o")
            subprocess.run(["gcc", "-O2", "-fPIC", "-c", str(src), "-o", str(obj)], check=True)
            return str(obj)

        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            built = list(pool.map(cc, sorted((HERE / "csrc").glob("*.c"))))
        subprocess.run(["gcc", "-shared", "-o", str(out / "libascendops.so"), *built, "-lm"],
                       check=True)
        (out / "_build.py").write_text(f"JOBS = {jobs}\\n")


setup(packages=["ascendops"], cmdclass={"build_py": BuildLib})
'''


def c_unit(i: int, funcs: int) -> str:
    """One translation unit: ``funcs`` numeric kernels, enough for gcc -O2 to chew on."""
    out = ["#include <math.h>"]
    for k in range(funcs):
        out.append(
            f"double op{i}_{k}(const double *x, int n) {{\n"
            f"  double acc = {k}.5;\n"
            "  for (int j = 0; j < n; j++) {\n"
            f"    double v = x[j] * {k + 1}.25 + acc;\n"
            f"    switch ((j + {k}) & 7) {{\n"
            f"      case 0: acc += sin(v) * {i % 7 + 1}; break;\n"
            f"      case 1: acc -= cos(v) / (j + {k + 1}); break;\n"
            "      case 2: acc *= 1.0 + v / (1e6 + j); break;\n"
            f"      case 3: acc += sqrt(fabs(v)) * {k}; break;\n"
            "      case 4: acc = fma(acc, 0.999, v); break;\n"
            f"      case 5: acc += exp(-fabs(v)) * {i}; break;\n"
            "      case 6: acc -= log1p(fabs(v)); break;\n"
            "      default: acc += v * v / (1.0 + acc * acc);\n"
            "    }\n  }\n  return acc;\n}"
        )
    return "\n".join(out) + "\n"


def make_extension_source(work: Path, units: int, funcs: int) -> Path:
    """The vllm-ascend stand-in's source tree (also compiled alone, outside any image)."""
    (work / "csrc").mkdir(parents=True)
    (work / "ascendops").mkdir()
    for i in range(units):
        (work / "csrc" / f"unit{i:03d}.c").write_text(c_unit(i, funcs))
    (work / "setup.py").write_text(_EXT_SETUP)
    (work / "pyproject.toml").write_text(_pyproject("ascendops", "0.1.0", [], setup=True))
    (work / "ascendops" / "__init__.py").write_text("from ascendops._build import JOBS\n")
    (work / "ascendops" / "_build.py").write_text("JOBS = 0\n")
    return work


def make_extension_repo(bare: Path, units: int, funcs: int) -> str:
    work = make_extension_source(bare.parent / (bare.name + ".work"), units, funcs)
    git("init", "-q", "-b", "main", cwd=work)
    git("add", ".", cwd=work)
    git("commit", "-q", "-m", "ascendops 0.1.0", cwd=work)
    git("tag", "v0.1.0", cwd=work)
    _serve(work, bare)
    return git("rev-parse", "HEAD", cwd=work)


def make_history_repo(bare: Path, commits: int, blob_kb: int, files: int = 40) -> str:
    """The transformers stand-in: ``commits`` commits, each rewriting one of ``files`` data files
    with ``blob_kb`` KiB of random bytes, so the history is large and the last tree is small.
    Written with ``git fast-import`` (seconds, not minutes); tagged v4.0 at the tip."""
    bare.parent.mkdir(parents=True, exist_ok=True)
    git("init", "-q", "--bare", "-b", "main", str(bare), cwd=bare.parent)
    stream = io.BytesIO()

    def blob(data: bytes) -> bytes:
        return b"data %d\n" % len(data) + data + b"\n"

    fixed = {
        "pyproject.toml": _pyproject("tfm-standin", "4.0", ["tfm_standin"]).encode(),
        "tfm_standin/__init__.py": b'VERSION = "4.0"\n',
    }
    for n in range(commits):
        stream.write(b"commit refs/heads/main\n")
        stream.write(b"committer bench <bench@example.com> %d +0000\n" % (1_700_000_000 + n))
        stream.write(blob(b"change %d" % n))
        if n == 0:
            for path, data in fixed.items():
                stream.write(b"M 644 inline " + path.encode() + b"\n" + blob(data))
        stream.write(b"M 644 inline tests/fixtures/blob%02d.bin\n" % (n % files))
        stream.write(blob(os.urandom(blob_kb * 1024)))
    git("fast-import", "--quiet", cwd=bare, data=stream.getvalue())
    git("tag", "v4.0", "main", cwd=bare)
    git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=bare)
    git("config", "http.receivepack", "false", cwd=bare)
    git("gc", "-q", cwd=bare)
    return git("rev-parse", "v4.0^{commit}", cwd=bare)


def make_framework_repo(bare: Path, revisions: int) -> list[str]:
    """The verl stand-in: a small pure-Python package, one commit per revision; return them
    (the first is the pin, each later one a bump)."""
    work = bare.parent / (bare.name + ".work")
    (work / "verl_standin").mkdir(parents=True)
    (work / "pyproject.toml").write_text(_pyproject("verl-standin", "0.5", ["verl_standin"]))
    commits = []
    for n in range(1, revisions + 1):
        (work / "verl_standin" / "__init__.py").write_text(f"REVISION = {n}\n")
        if n == 1:
            git("init", "-q", "-b", "main", cwd=work)
        git("add", ".", cwd=work)
        git("commit", "-q", "-m", f"verl revision {n}", cwd=work)
        commits.append(git("rev-parse", "HEAD", cwd=work))
    _serve(work, bare)
    return commits


@dataclass(frozen=True)
class Stack:
    ext_commit: str
    history_commit: str
    framework: list[str]
    seed_base: str  # the CANN base the seed starts from: the stand-in base plus toolkit 8.5.1


def make_stack(world: BuildWorld, size: Size, work: Path, bumps: int) -> Stack:
    """Add the stand-in stack to ``world``: installers and wheels on its file server, repos on
    its git host, and the seed's CANN base (with a toolkit already in it) in its registry."""
    for arch in ("amd64", "arm64"):
        make_toolkit_run(world.installer(arch), "8.5.2", arch, filler_bytes=size.toolkit_mb << 20)
    old = make_toolkit_run(
        world.files_root / "base" / "Ascend-cann-toolkit_8.5.1_linux-x86_64.run", "8.5.1", "amd64",
        filler_bytes=size.toolkit_mb << 20,
    )
    wheels = world.files_root / "wheels"
    for name, version in WHEELS:
        make_wheelhouse(wheels, name, version)
    make_wheelhouse(wheels, *TORCH, filler_bytes=size.torch_mb << 20)
    add_uv_wheels(wheels)  # (b)'s installer
    gitroot = world.root / "git"
    ext = make_extension_repo(gitroot / "ascendops.git", size.units, size.funcs)
    history = make_history_repo(gitroot / "tfm.git", size.commits, size.blob_kb)
    framework = make_framework_repo(gitroot / "verl.git", bumps + 1)
    seed_base = _cann_base(world, old, work)
    return Stack(ext, history, framework, seed_base)


def _cann_base(world: BuildWorld, installer: Path, work: Path) -> str:
    """The base the seed starts FROM (like ascendhub's cann:8.5.1 image): the stand-in OS base
    with toolkit 8.5.1 installed (downloaded, installed and deleted in one step, so the base
    holds the install only), pushed to the world's anonymous registry; return it by digest.
    Made once, untimed."""
    ref = f"{world.registry.host}/bench/cann:8.5.1"
    url = f"{world.files.url}/{installer.relative_to(world.files_root).as_posix()}"
    work.mkdir(parents=True, exist_ok=True)
    (work / "Dockerfile.cannbase").write_text(
        f"FROM {world.base}\n"
        f"RUN curl -fsSL -o /tmp/toolkit.run {url} && "
        "bash /tmp/toolkit.run --quiet --install --install-for-all && rm /tmp/toolkit.run\n"
    )
    certs = ["--cert-dir", str(world.cert_dir)]
    subprocess.run(
        ["buildah", "build", "--quiet", "--platform", "linux/amd64", *certs, "--layers",
         "--network", "host", "-f", str(work / "Dockerfile.cannbase"),
         "-t", "localhost/bench-cann-base", str(work)],
        check=True, capture_output=True,
    )
    digest = work / "cannbase.digest"
    subprocess.run(
        ["buildah", "push", "--quiet", *certs, "--digestfile", str(digest),
         "localhost/bench-cann-base", f"docker://{ref}"],
        check=True, capture_output=True,
    )
    return f"{ref}@{digest.read_text().strip()}"
