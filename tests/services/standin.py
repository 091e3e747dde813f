# ruff: noqa: E501  (the stand-in set_env.sh lines are as long as the real ones)
"""Stand-ins for what cannot be fetched here: the CANN installers, a compiled component, a wheel.

- ``make_toolkit_run``: a self-extracting ``.run`` (like Ascend's makeself archives) that takes
  ``--quiet --install [--install-for-all]``, refuses the wrong CPU architecture, and installs the
  CANN >= 8.5 layout ASCEND.md describes, with the env scripts of the toolkit
  (``ascend-toolkit/set_env.sh``), AscendNPU-IR and NNAL exporting every variable Ascend's 8.5 base
  images persist (prepending search paths without guarding empty values, as the real ones do).
- ``make_old_toolkit_run``: the same installer for CANN 8.3's ``ascend-toolkit`` layout
  (everything under ``/usr/local/Ascend/ascend-toolkit/<version>``, ``latest`` pointing at it).
- ``make_fastops_repo``: a git repository whose ``setup.py`` compiles a few C files into a shared
  library with as many parallel jobs as ``MAX_JOBS`` allows, and records that number.
- ``make_wheelhouse``: a pure-Python wheel behind a PEP 503 simple index (a directory to serve).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

UNAME = {"amd64": "x86_64", "arm64": "aarch64"}

# What the stand-in env scripts export, in order; {home} is the versioned install root. The
# full set Ascend's CANN 8.5 base images persist (the built-in cann-8 table), written as those
# images' Dockerfiles write them: unguarded prepends, trailing '/' on two driver paths, and the
# build-only devlib on LD_LIBRARY_PATH that 8.5.2's adds (which the image ENV leaves out).
SET_ENV = """\
# Stand-in for CANN's ascend-toolkit/set_env.sh: the same names, the same unguarded prepends.
export ASCEND_TOOLKIT_HOME={home}
export ASCEND_TOOLKIT_LATEST_HOME=/usr/local/Ascend/ascend-toolkit/latest
export LD_LIBRARY_PATH=/usr/local/Ascend/driver/lib64:/usr/local/Ascend/driver/lib64/common/:/usr/local/Ascend/driver/lib64/driver/:${{LD_LIBRARY_PATH}}
export LD_LIBRARY_PATH=${{ASCEND_TOOLKIT_HOME}}/lib64:${{ASCEND_TOOLKIT_HOME}}/lib64/plugin/opskernel:${{ASCEND_TOOLKIT_HOME}}/lib64/plugin/nnengine:${{ASCEND_TOOLKIT_HOME}}/opp/built-in/op_impl/ai_core/tbe/op_tiling:${{LD_LIBRARY_PATH}}
export LD_LIBRARY_PATH=${{ASCEND_TOOLKIT_HOME}}/tools/aml/lib64:${{ASCEND_TOOLKIT_HOME}}/tools/aml/lib64/plugin:${{LD_LIBRARY_PATH}}
export LD_LIBRARY_PATH=${{ASCEND_TOOLKIT_LATEST_HOME}}/lib64:${{ASCEND_TOOLKIT_LATEST_HOME}}/lib64/plugin/opskernel:${{ASCEND_TOOLKIT_LATEST_HOME}}/lib64/plugin/nnengine:${{ASCEND_TOOLKIT_LATEST_HOME}}/opp/built-in/op_impl/ai_core/tbe/op_tiling:${{LD_LIBRARY_PATH}}
export LD_LIBRARY_PATH=${{ASCEND_TOOLKIT_LATEST_HOME}}/tools/aml/lib64:${{ASCEND_TOOLKIT_LATEST_HOME}}/tools/aml/lib64/plugin:${{LD_LIBRARY_PATH}}
export LD_LIBRARY_PATH=${{ASCEND_TOOLKIT_HOME}}/devlib:${{LD_LIBRARY_PATH}}
export PYTHONPATH=${{ASCEND_TOOLKIT_HOME}}/python/site-packages:${{ASCEND_TOOLKIT_HOME}}/opp/built-in/op_impl/ai_core/tbe:${{PYTHONPATH}}
export PYTHONPATH=${{ASCEND_TOOLKIT_LATEST_HOME}}/python/site-packages:${{ASCEND_TOOLKIT_LATEST_HOME}}/opp/built-in/op_impl/ai_core/tbe:${{PYTHONPATH}}
export PATH=${{ASCEND_TOOLKIT_HOME}}/bin:${{ASCEND_TOOLKIT_HOME}}/tools/ccec_compiler/bin:${{ASCEND_TOOLKIT_HOME}}/tools/profiler/bin:${{ASCEND_TOOLKIT_HOME}}/tools/ascend_system_advisor/asys:${{PATH}}
export PATH=${{ASCEND_TOOLKIT_HOME}}/tools/show_kernel_debug_data:${{ASCEND_TOOLKIT_HOME}}/tools/msobjdump:${{PATH}}
export PATH=${{ASCEND_TOOLKIT_LATEST_HOME}}/bin:${{ASCEND_TOOLKIT_LATEST_HOME}}/compiler/ccec_compiler/bin:${{ASCEND_TOOLKIT_LATEST_HOME}}/tools/ccec_compiler/bin:${{PATH}}
export ASCEND_AICPU_PATH=${{ASCEND_TOOLKIT_HOME}}
export ASCEND_OPP_PATH=${{ASCEND_TOOLKIT_HOME}}/opp
export TOOLCHAIN_HOME=${{ASCEND_TOOLKIT_HOME}}/toolkit
export ASCEND_HOME_PATH=${{ASCEND_TOOLKIT_HOME}}
export CMAKE_PREFIX_PATH=${{TOOLCHAIN_HOME}}/tools/tikicpulib/lib/cmake:${{ASCEND_TOOLKIT_HOME}}/lib64/cmake
"""

# AscendNPU-IR's share/info/ascendnpu-ir/bin/set_env.sh, as its installer writes it.
BISHENG_SET_ENV = """\
#!/bin/sh
export PATH="{home}/tools/bishengir/bin:${{PATH}}"
"""

# NNAL's atb/set_env.sh: reads ZSH_VERSION unguarded, as the real one does (a `set -u` shell
# stops there).
NNAL_SET_ENV = """\
# Stand-in for NNAL's atb/set_env.sh (ATB and LCCL).
if [ -n "$ZSH_VERSION" ]; then :; fi
export ATB_HOME_PATH=/usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_1
export LD_LIBRARY_PATH=${ATB_HOME_PATH}/lib:${ATB_HOME_PATH}/examples:${ATB_HOME_PATH}/tests/atbopstest:${LD_LIBRARY_PATH}
export PATH=${ATB_HOME_PATH}/bin:$PATH
export ATB_STREAM_SYNC_EVERY_KERNEL_ENABLE=0
export ATB_STREAM_SYNC_EVERY_RUNNER_ENABLE=0
export ATB_STREAM_SYNC_EVERY_OPERATION_ENABLE=0
export ATB_OPSRUNNER_KERNEL_CACHE_LOCAL_COUNT=1
export ATB_OPSRUNNER_KERNEL_CACHE_GLOABL_COUNT=5
export ATB_WORKSPACE_MEM_ALLOC_ALG_TYPE=1
export ATB_COMPARE_TILING_EVERY_KERNEL=0
export ATB_SHARE_MEMORY_NAME_SUFFIX=""
export ATB_MATMUL_SHUFFLE_K_ENABLE=1
export LCCL_DETERMINISTIC=0
export LCCL_PARALLEL=0
"""

# Where the stand-in installs its env scripts (the catalog's env_scripts, as Ascend's names).
ENV_SCRIPTS = (
    "/usr/local/Ascend/ascend-toolkit/set_env.sh",
    "/usr/local/Ascend/cann-{version}/share/info/ascendnpu-ir/bin/set_env.sh",
    "/usr/local/Ascend/nnal/atb/set_env.sh",
)


def toolkit_table(name: str, files: str) -> str:
    """The catalog's toolkit entry for the stand-in installers served under ``files``: CANN
    8.5.2 over the base's 8.5.1, the built-in cann-8 env table, the env scripts the installer
    writes, one package per arch."""
    scripts = ", ".join(f'"{s}"' for s in ENV_SCRIPTS)
    return (
        f"[toolkits.{name}]\n"
        'version = "8.5.2"\n'
        'env = "cann-8"\n'
        'devlib = "/usr/local/Ascend/cann-{version}/{uname_arch}-linux/devlib/linux/{uname_arch}"\n'
        f"env_scripts = [{scripts}]\n"
        'install_args = ["--quiet", "--install", "--install-for-all"]\n'
        "\n"
        f"[[toolkits.{name}.packages]]\n"
        'name = "toolkit"\n'
        f'url = "{files}/Ascend-cann-toolkit_{{version}}_linux-{{uname_arch}}.run"\n'
    )


_HEADER = """\
#!/bin/bash
# Stand-in CANN {version} installer for {uname} (self-extracting, like a makeself .run).
set -eu
install=0
for a in "$@"; do
  case "$a" in
    --quiet|--install-for-all) ;;
    --install) install=1 ;;
    --check) exit 0 ;;
    *) echo "unknown option: $a" >&2; exit 2 ;;
  esac
done
[ "$install" = 1 ] || {{ echo "usage: $0 --install [--quiet] [--install-for-all]" >&2; exit 2; }}
[ "$(uname -m)" = "{uname}" ] || {{ echo "this installer is for {uname}, not $(uname -m)" >&2; exit 1; }}
line=$(awk '/^__PAYLOAD__$/ {{ print NR + 1; exit 0 }}' "$0")
tail -n +"$line" "$0" | base64 -d | tar -xz -C / --no-same-owner
echo "installed stand-in CANN {version} ({uname})" > /usr/local/Ascend/cann-{version}/version.info
exit 0
__PAYLOAD__
"""


def _tar_add(tar: tarfile.TarFile, name: str, data: bytes = b"", mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def _tar_dir(tar: tarfile.TarFile, name: str) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = 0o755
    info.mtime = 0
    tar.addfile(info)


def _tar_link(tar: tarfile.TarFile, name: str, target: str) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    info.mtime = 0
    tar.addfile(info)


# CANN <= 8.3's ascend-toolkit/set_env.sh, as the 8.3.RC2 image's ENV lines write it (the
# built-in "cann-8.3" table): everything under ascend-toolkit/latest.
OLD_SET_ENV = """\
# Stand-in for CANN 8.3's ascend-toolkit/set_env.sh (the ascend-toolkit layout).
export ASCEND_TOOLKIT_HOME=/usr/local/Ascend/ascend-toolkit/latest
export LD_LIBRARY_PATH=/usr/local/Ascend/driver/lib64/common/:/usr/local/Ascend/driver/lib64/driver/:${LD_LIBRARY_PATH}
export LD_LIBRARY_PATH=${ASCEND_TOOLKIT_HOME}/lib64:${ASCEND_TOOLKIT_HOME}/lib64/plugin/opskernel:${ASCEND_TOOLKIT_HOME}/lib64/plugin/nnengine:${ASCEND_TOOLKIT_HOME}/opp/built-in/op_impl/ai_core/tbe/op_tiling:${LD_LIBRARY_PATH}
export LD_LIBRARY_PATH=${ASCEND_TOOLKIT_HOME}/tools/aml/lib64:${ASCEND_TOOLKIT_HOME}/tools/aml/lib64/plugin:${LD_LIBRARY_PATH}
export PYTHONPATH=${ASCEND_TOOLKIT_HOME}/python/site-packages:${ASCEND_TOOLKIT_HOME}/opp/built-in/op_impl/ai_core/tbe:${PYTHONPATH}
export PATH=${ASCEND_TOOLKIT_HOME}/bin:${ASCEND_TOOLKIT_HOME}/compiler/ccec_compiler/bin:${ASCEND_TOOLKIT_HOME}/tools/ccec_compiler/bin:${PATH}
export ASCEND_AICPU_PATH=${ASCEND_TOOLKIT_HOME}
export ASCEND_OPP_PATH=${ASCEND_TOOLKIT_HOME}/opp
export TOOLCHAIN_HOME=${ASCEND_TOOLKIT_HOME}/toolkit
export ASCEND_HOME_PATH=${ASCEND_TOOLKIT_HOME}
"""

# CANN 8.3's NNAL atb/set_env.sh: the old C++ ABI, and the 8.3.RC2 image's plain values.
OLD_NNAL_SET_ENV = """\
# Stand-in for CANN 8.3's NNAL atb/set_env.sh.
if [ -n "$ZSH_VERSION" ]; then :; fi
export ATB_HOME_PATH=/usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_0
export LD_LIBRARY_PATH=${ATB_HOME_PATH}/lib:${ATB_HOME_PATH}/examples:${ATB_HOME_PATH}/tests/atbopstest:${LD_LIBRARY_PATH}
export PATH=${ATB_HOME_PATH}/bin:$PATH
export ATB_STREAM_SYNC_EVERY_KERNEL_ENABLE=0
export ATB_STREAM_SYNC_EVERY_RUNNER_ENABLE=0
export ATB_STREAM_SYNC_EVERY_OPERATION_ENABLE=0
export ATB_OPSRUNNER_SETUP_CACHE_ENABLE=1
export ATB_OPSRUNNER_KERNEL_CACHE_LOCAL_COUNT=1
export ATB_OPSRUNNER_KERNEL_CACHE_GLOABL_COUNT=5
export ATB_WORKSPACE_MEM_ALLOC_ALG_TYPE=1
export ATB_WORKSPACE_MEM_ALLOC_GLOBAL=1
export ATB_COMPARE_TILING_EVERY_KERNEL=0
export ATB_HOST_TILING_BUFFER_BLOCK_NUM=128
export ATB_DEVICE_TILING_BUFFER_BLOCK_NUM=32
export ATB_SHARE_MEMORY_NAME_SUFFIX=""
export ATB_MATMUL_SHUFFLE_K_ENABLE=1
export LCCL_DETERMINISTIC=0
export LCCL_PARALLEL=0
"""

OLD_ENV_SCRIPTS = ("/usr/local/Ascend/ascend-toolkit/set_env.sh",
                   "/usr/local/Ascend/nnal/atb/set_env.sh")


def make_old_toolkit_run(out: Path, version: str, arch: str) -> Path:
    """The stand-in installer's second mode: CANN 8.3's ascend-toolkit layout (8.0–8.2 lay it
    out the same; their NNAL values differ), the
    toolkit in /usr/local/Ascend/ascend-toolkit/<version> with `latest` pointing at it, its
    set_env.sh and NNAL's (old ABI) as CANN 8.3 writes them. Same options and checks."""
    uname = UNAME[arch]
    home = f"usr/local/Ascend/ascend-toolkit/{version}"
    payload = io.BytesIO()
    with tarfile.open(fileobj=payload, mode="w:gz", format=tarfile.GNU_FORMAT) as tar:
        for d in ("usr/local/Ascend", "usr/local/Ascend/ascend-toolkit", home, f"{home}/bin",
                  f"{home}/lib64", f"{home}/opp", f"{home}/toolkit", f"{home}/python",
                  f"{home}/python/site-packages", f"{home}/python/site-packages/cann_standin",
                  "usr/local/Ascend/nnal", "usr/local/Ascend/nnal/atb"):
            _tar_dir(tar, d)
        _tar_add(tar, f"{home}/python/site-packages/cann_standin/__init__.py",
                 f'VERSION = "{version}"\nARCH = "{uname}"\nLAYOUT = "ascend-toolkit"\n'.encode())
        _tar_add(tar, f"{home}/bin/cann-standin-version", f"#!/bin/sh\necho {version}\n".encode(),
                 0o755)
        _tar_link(tar, "usr/local/Ascend/ascend-toolkit/latest", version)
        _tar_add(tar, "usr/local/Ascend/ascend-toolkit/set_env.sh", OLD_SET_ENV.encode())
        _tar_add(tar, "usr/local/Ascend/nnal/atb/set_env.sh", OLD_NNAL_SET_ENV.encode())
    out.parent.mkdir(parents=True, exist_ok=True)
    body = base64.encodebytes(payload.getvalue())
    header = _HEADER.format(version=version, uname=uname).replace(
        f"/usr/local/Ascend/cann-{version}/version.info", f"/{home}/version.info")
    out.write_bytes(header.encode() + body)
    out.chmod(0o755)
    return out


def make_toolkit_run(out: Path, version: str, arch: str, filler_bytes: int = 0) -> Path:
    """Write the stand-in installer for ``arch`` (amd64|arm64) to ``out``; return ``out``."""
    uname = UNAME[arch]
    home = f"/usr/local/Ascend/cann-{version}"
    payload = io.BytesIO()
    with tarfile.open(fileobj=payload, mode="w:gz", format=tarfile.GNU_FORMAT) as tar:
        for d in (
            "usr/local/Ascend",
            "usr/local/Ascend/ascend-toolkit",
            f"{home[1:]}",
            f"{home[1:]}/bin",
            f"{home[1:]}/lib64",
            f"{home[1:]}/opp",
            f"{home[1:]}/toolkit",
            f"{home[1:]}/python",
            f"{home[1:]}/python/site-packages",
            f"{home[1:]}/python/site-packages/cann_standin",
            f"{home[1:]}/{uname}-linux/devlib/linux/{uname}",
        ):
            _tar_dir(tar, d)
        _tar_add(
            tar,
            f"{home[1:]}/python/site-packages/cann_standin/__init__.py",
            f'VERSION = "{version}"\nARCH = "{uname}"\n'.encode(),
        )
        _tar_add(
            tar, f"{home[1:]}/bin/cann-standin-version", f"#!/bin/sh\necho {version}\n".encode(),
            0o755,
        )
        _tar_add(tar, f"{home[1:]}/{uname}-linux/devlib/linux/{uname}/libascend_hal.so", b"stub")
        if filler_bytes:
            _tar_add(tar, f"{home[1:]}/lib64/libfiller.so", os.urandom(filler_bytes))
        _tar_link(tar, "usr/local/Ascend/ascend-toolkit/latest", f"../cann-{version}")
        set_env = SET_ENV.format(home=home).encode()
        _tar_add(tar, f"{home[1:]}/set_env.sh", set_env)
        _tar_add(tar, "usr/local/Ascend/ascend-toolkit/set_env.sh", set_env)
        # the env scripts of the packages Ascend ships beside the toolkit (one .run here)
        for d in ("usr/local/Ascend/nnal", "usr/local/Ascend/nnal/atb", f"{home[1:]}/share",
                  f"{home[1:]}/share/info", f"{home[1:]}/share/info/ascendnpu-ir",
                  f"{home[1:]}/share/info/ascendnpu-ir/bin"):
            _tar_dir(tar, d)
        _tar_add(tar, f"{home[1:]}/share/info/ascendnpu-ir/bin/set_env.sh",
                 BISHENG_SET_ENV.format(home=home).encode(), 0o755)
        _tar_add(tar, "usr/local/Ascend/nnal/atb/set_env.sh", NNAL_SET_ENV.encode())
    out.parent.mkdir(parents=True, exist_ok=True)
    body = base64.encodebytes(payload.getvalue())
    out.write_bytes(_HEADER.format(version=version, uname=uname).encode() + body)
    out.chmod(0o755)
    return out


_SETUP_PY = '''\
"""fastops: a few C files compiled into one shared library, as many at once as MAX_JOBS allows."""
import concurrent.futures
import os
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildLib(build_py):
    def run(self):
        super().run()
        jobs = int(os.environ.get("MAX_JOBS") or os.cpu_count() or 1)
        out = Path(self.build_lib) / "fastops"
        objs = HERE / "build" / "obj"
        objs.mkdir(parents=True, exist_ok=True)
        sources = sorted((HERE / "csrc").glob("*.c"))

        def cc(src):
            obj = objs / (src.stem + ".o")
            subprocess.run(["gcc", "-O2", "-fPIC", "-c", str(src), "-o", str(obj)], check=True)
            return obj

        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            built = list(pool.map(cc, sources))
        subprocess.run(["gcc", "-shared", "-o", str(out / "libfastops.so"), *map(str, built)],
                       check=True)
        (out / "_build.py").write_text(f"JOBS = {jobs}\\n")


setup(packages=["fastops"], cmdclass={"build_py": BuildLib})
'''

# Static metadata, so a resolver reads the dependencies (none) and build requirements without
# running setup.py.
_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "fastops"
version = "1.0"
dependencies = []
"""

_INIT_PY = '''\
"""Loads the compiled library; ``add(a, b)`` calls into C."""
import ctypes
from pathlib import Path

from fastops._build import JOBS

_lib = ctypes.CDLL(str(Path(__file__).with_name("libfastops.so")))


def add(a: int, b: int) -> int:
    return int(_lib.fastops_add0(a, b))
'''


def _git(*args: str, cwd: Path) -> str:
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.com",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.com",
        GIT_AUTHOR_DATE="2026-01-01T00:00:00Z",
        GIT_COMMITTER_DATE="2026-01-01T00:00:00Z",
    )
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def make_fastops_repo(bare: Path, units: int = 4) -> str:
    """A bare repository holding the fastops sources, tagged v1.0; return the commit."""
    work = bare.parent / (bare.name + ".work")
    (work / "csrc").mkdir(parents=True)
    (work / "fastops").mkdir()
    for i in range(units):
        (work / "csrc" / f"unit{i}.c").write_text(
            f"int fastops_add{i}(int a, int b) {{ return a + b + {i}; }}\n"
        )
    (work / "setup.py").write_text(_SETUP_PY)
    (work / "pyproject.toml").write_text(_PYPROJECT)
    (work / "fastops" / "__init__.py").write_text(_INIT_PY)
    (work / "fastops" / "_build.py").write_text("JOBS = 0\n")
    _git("init", "-q", "-b", "main", cwd=work)
    _git("add", ".", cwd=work)
    _git("commit", "-q", "-m", "fastops 1.0", cwd=work)
    _git("tag", "v1.0", cwd=work)
    commit = _git("rev-parse", "HEAD", cwd=work)
    _git("clone", "-q", "--bare", str(work), str(bare), cwd=work.parent)
    # Let clients fetch a bare commit id (what `git fetch --depth 1 URL <commit>` asks for).
    _git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=bare)
    _git("config", "http.receivepack", "false", cwd=bare)
    return commit


def _bundled_setuptools() -> Path:
    """setuptools' own wheel as CPython's ensurepip ships it: the build requirement of the
    compiled component, served from the local index (no download)."""
    import ensurepip

    found = sorted(Path(ensurepip.__file__).parent.glob("_bundled/setuptools-*.whl"))
    if not found:
        raise RuntimeError("this Python's ensurepip bundles no setuptools wheel")
    return found[-1]


# uv as an image's installer (installer = "uv"): a wheel the tests build from the uv installed
# beside them (cannery's own dependency, the binary `cannery lock` runs), so nothing is
# fetched: its version is that uv's, and it is for linux/amd64 (the venv's binary).


def _add_record(data: dict[str, bytes], dist: str) -> None:
    """A wheel's RECORD for ``data`` (path → bytes), added to it: each file's sha256 and size."""
    record = []
    for path, blob in data.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(blob).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(blob)}")
    record.append(f"{dist}.dist-info/RECORD,,")
    data[f"{dist}.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()


def uv_version() -> str:
    """The version of the uv the tests' wheel carries (the installed one)."""
    import importlib.metadata

    return importlib.metadata.version("uv")


def make_uv_wheel(files: Path) -> Path:
    """``uv-VERSION-py3-none-manylinux_2_17_x86_64.whl`` in ``files``: the installed uv's
    binary as the wheel's script (pip puts it on PATH, executable), with metadata and RECORD,
    stored uncompressed (the binary is most of it)."""
    import stat

    from uv import find_uv_bin

    version = uv_version()
    binary = Path(find_uv_bin()).read_bytes()
    dist = f"uv-{version}"
    data: dict[str, bytes] = {
        f"{dist}.data/scripts/uv": binary,
        f"{dist}.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: uv\nVersion: {version}\n"
        ).encode(),
        f"{dist}.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: cannery-tests\nRoot-Is-Purelib: false\n"
            b"Tag: py3-none-manylinux_2_17_x86_64\n"
        ),
    }
    _add_record(data, dist)
    files.mkdir(parents=True, exist_ok=True)
    wheel = files / f"{dist}-py3-none-manylinux_2_17_x86_64.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as zf:
        for path, blob in data.items():
            info = zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0))
            mode = 0o755 if path.endswith("/scripts/uv") else 0o644
            info.external_attr = (stat.S_IFREG | mode) << 16
            zf.writestr(info, blob)
    return wheel


def add_uv_wheels(root: Path) -> None:
    """Serve the tests' uv wheel (``make_uv_wheel``) from the index at ``root/simple`` (made
    by ``make_wheelhouse``), as PyPI lists it: one page, a link with its sha256."""
    wheel = make_uv_wheel(root / "files")
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (root / "simple" / "uv").mkdir(parents=True, exist_ok=True)
    (root / "simple" / "uv" / "index.html").write_text(
        f'<html><body><a href="../../files/{wheel.name}#sha256={sha}">{wheel.name}</a>'
        "</body></html>\n"
    )


def make_wheelhouse(
    root: Path, name: str = "hello_cannery", version: str = "1.0", filler_bytes: int = 0
) -> Path:
    """A pure-Python wheel, and setuptools' wheel, under ``root/files``; a PEP 503 index of
    both under ``root/simple``. ``filler_bytes`` of random data in the package (stored, not
    deflated) give the wheel weight."""
    files = root / "files"
    files.mkdir(parents=True, exist_ok=True)
    setuptools = _bundled_setuptools()
    shutil.copyfile(setuptools, files / setuptools.name)
    st_sha = hashlib.sha256(setuptools.read_bytes()).hexdigest()
    (root / "simple" / "setuptools").mkdir(parents=True, exist_ok=True)
    (root / "simple" / "setuptools" / "index.html").write_text(
        f'<html><body><a href="../../files/{setuptools.name}#sha256={st_sha}">'
        f"{setuptools.name}</a></body></html>\n"
    )
    dist = f"{name}-{version}"
    wheel = files / f"{dist}-py3-none-any.whl"
    entries = {
        f"{name}/__init__.py": f'GREETING = "hello from {name} {version}"\n',
        f"{dist}.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n"
        ),
        f"{dist}.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: cannery-tests\nRoot-Is-Purelib: true\n"
            "Tag: py3-none-any\n"
        ),
    }
    data: dict[str, bytes] = {path: text.encode() for path, text in entries.items()}
    if filler_bytes:
        data[f"{name}/_filler.bin"] = os.urandom(filler_bytes)
    _add_record(data, dist)
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, blob in data.items():
            info = zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0))
            zf.writestr(info, blob)
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    project = root / "simple" / name.replace("_", "-")
    project.mkdir(parents=True, exist_ok=True)
    (project / "index.html").write_text(
        f'<html><body><a href="../../files/{wheel.name}#sha256={sha}">{wheel.name}</a>'
        "</body></html>\n"
    )
    (root / "simple" / "index.html").write_text(
        f'<html><body><a href="{name.replace("_", "-")}/">{name}</a>'
        '<a href="setuptools/">setuptools</a></body></html>\n'
    )
    return wheel


# cannery itself as CI installs it (`[ci] install`): a wheel of this checkout, and wheels of its
# installed dependencies, served from a test index, so `cannery lock` resolves the real
# requirement and pip installs the real package, with no build backend and no download.


def _write_wheel(path: Path, data: dict[str, bytes], dist: str) -> Path:
    import stat

    _add_record(data, dist)
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for member, blob in data.items():
            info = zipfile.ZipInfo(member, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            zf.writestr(info, blob)
    return path


def make_cannery_wheel(files: Path, root: Path) -> Path:
    """``cannery-VERSION-py3-none-any.whl`` of the checkout at ``root``: the package under
    ``src/cannery`` (sources and data files, no bytecode), its metadata and console script from
    pyproject.toml, written as setuptools would lay it out."""
    from cannery.util import toml

    project = toml.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    name, version = project["name"], project["version"]
    dist = f"{name}-{version}"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    meta += f"Requires-Python: {project['requires-python']}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in project["dependencies"])
    data: dict[str, bytes] = {}
    for path in sorted((root / "src" / "cannery").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            data[path.relative_to(root / "src").as_posix()] = path.read_bytes()
    data[f"{dist}.dist-info/METADATA"] = meta.encode()
    data[f"{dist}.dist-info/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: cannery-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    scripts = "".join(f"{k} = {v}\n" for k, v in project["scripts"].items())
    data[f"{dist}.dist-info/entry_points.txt"] = f"[console_scripts]\n{scripts}".encode()
    return _write_wheel(files / f"{dist}-py3-none-any.whl", data, dist)


def repack_installed(files: Path, name: str) -> Path:
    """A wheel of the distribution ``name`` as installed beside the tests: its files inside
    site-packages (scripts outside it are left out; pip writes console scripts from the entry
    points) and its own WHEEL file, named after its tags. A platform tag for a glibc newer
    than 2.28 is named manylinux_2_28 instead: the platform `cannery lock` resolves CI's
    install for (PyPI has such wheels of the same release; this one runs here, where it is
    installed)."""
    import importlib.metadata
    import re

    dist = importlib.metadata.distribution(name)
    wheel_meta = (dist.read_text("WHEEL") or "").splitlines()
    tags = [line.split(":", 1)[1].strip().split("-") for line in wheel_meta
            if line.startswith("Tag:")]
    parts: list[dict[str, None]] = [{}, {}, {}]
    for triple in tags:
        glibc = re.match(r"manylinux_2_(\d+)_(.+)$", triple[2])
        if glibc and int(glibc.group(1)) > 28:
            triple[2] = f"manylinux_2_28_{glibc.group(2)}"
        for i, part in enumerate(triple):
            parts[i][part] = None
    tag = "-".join(".".join(p) for p in parts)  # a compressed tag set (PEP 425)
    stem = f"{dist.metadata['Name'].replace('-', '_')}-{dist.version}"
    info = f"{stem}.dist-info"
    data: dict[str, bytes] = {}
    skip = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}
    for f in dist.files or []:
        parts = Path(str(f)).parts
        if parts[0] == ".." or "__pycache__" in parts or f.name in skip:
            continue
        member = str(f)
        if parts[0].endswith(".dist-info"):  # the installed name may differ in case or dashes
            member = f"{info}/{'/'.join(parts[1:])}"
        data[member] = Path(str(f.locate())).read_bytes()
    return _write_wheel(files / f"{stem}-{tag}.whl", data, stem)


def requirement_closure(requirements: list[str]) -> list[str]:
    """The distributions ``requirements`` need here, with everything they need in turn, by
    the installed metadata (markers evaluated for this interpreter, extras left out),
    sorted."""
    import importlib.metadata

    from packaging.requirements import Requirement

    seen: dict[str, None] = {}
    todo = list(requirements)
    while todo:
        req = Requirement(todo.pop())
        key = req.name.lower().replace("_", "-")
        if key in seen or not (req.marker is None or req.marker.evaluate({"extra": ""})):
            continue
        seen[key] = None
        todo += importlib.metadata.requires(req.name) or []
    return sorted(seen)
