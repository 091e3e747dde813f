"""Python: the builder stage that compiles it from its locked tarball and what the final image
copies of it, and the one step that installs the lock's Python dependencies."""

from __future__ import annotations

from cannery.plan import ImageSpec, PythonSpec
from cannery.render.dockerfile.fragments import (
    CONSTRAINTS,
    PIP,
    REQUIREMENTS,
    _arch_case,
    _downloads_run,
    _mirrored,
    _q,
)
from cannery.render.dockerfile.packages import _install_lines
from cannery.render.dockerfile.stages import _refuse_base, _stage_head
from cannery.render.instructions import Blank, Comment, Copy, Env, Instruction, Run

# The builder stage that compiles Python, and the list of packages its shared libraries need.
PY_STAGE = "cannery-python"
PY_RUNTIME = "/opt/cannery/python-runtime-packages"
# Which package owns a library file, per package manager: dpkg -S and rpm -qf, by the path
# ldd prints, its real path, or with /usr added or removed (merged /usr: a package may name
# either).
_OWNER = {
    "apt": "dpkg-query -S {path} 2>/dev/null | head -n 1 | cut -d: -f1",
    "dnf": "rpm -qf --qf '%{{NAME}}\\n' {path} 2>/dev/null",
    # "… is owned by musl-1.2.4-r2": the name, without its version and release
    "apk": "apk info --who-owns {path} 2>/dev/null | sed -n 's/.* is owned by //p'"
           " | sed -E 's/-[0-9][^-]*-r[0-9]+$//'",
}
_OWNER["yum"] = _OWNER["microdnf"] = _OWNER["dnf"]


def _python_stage(spec: ImageSpec, py: PythonSpec) -> list[Instruction]:
    """The builder stage that compiles Python from its locked tarball, as Ascend's CANN images
    do (shared library, an rpath to its own lib, altinstall under its own prefix), and writes
    the packages of the system libraries it links for the final image to install."""
    prefix = py.prefix
    minor = ".".join(py.version.split(".")[:2])
    owner = _OWNER[spec.package_manager]
    names = " ".join(["ca-certificates", "curl", *(p for p in py.packages
                                                   if p not in ("ca-certificates", "curl"))])
    lines = [
        "set -eu;",
        *_downloads_run(spec, py.downloads, f"Python {py.version} source"),
        "mkdir -p /tmp/python-src;",
        "tar -xf /tmp/python.run -C /tmp/python-src --strip-components=1;",
        "cd /tmp/python-src;",
        f'./configure --prefix={prefix} --enable-shared LDFLAGS="-Wl,-rpath,{prefix}/lib";',
        'make -j"$(nproc)";',
        "make altinstall;",
        f"ln -sf python{minor} {prefix}/bin/python3;",
        f"ln -sf python3 {prefix}/bin/python;",
        f"if [ -e {prefix}/bin/pip{minor} ]; then",
        f"  ln -sf pip{minor} {prefix}/bin/pip3; ln -sf pip3 {prefix}/bin/pip;",
        "fi;",
        "cd /;",
        "rm -rf /tmp/python-src /tmp/python.run;",
        "mkdir -p /opt/cannery;",
        f"find {prefix} -type f \\( -name '*.so*' -o -perm -u+x \\) -print0"
        " | xargs -0 -r -n 1 sh -c 'ldd \"$0\" 2>/dev/null || true'"
        f" | awk -v own={prefix}/ '$2 == \"=>\" && index($3, \"/\") == 1"
        " && index($3, own) != 1 { print $3 }' | sort -u > /tmp/python-libs;",
        f": > {PY_RUNTIME};",
        "while read -r lib; do",
        "  pkg=;",
        '  for path in "${lib}" "$(readlink -f "${lib}")" "/usr${lib}" "${lib#/usr}"; do',
        # a failed query says why on stdout (rpm's "is not owned"): never take that as a name
        f'    [ -n "${{pkg}}" ] || pkg=$({owner.format(path=chr(34) + "${path}" + chr(34))})'
        " || pkg=;",
        "  done;",
        '  if [ -z "${pkg}" ]; then echo "cannery: no package owns ${lib}" >&2; exit 1; fi;',
        f'  echo "${{pkg}}" >> {PY_RUNTIME};',
        "done < /tmp/python-libs;",
        f"sort -u -o {PY_RUNTIME} {PY_RUNTIME};",
        "rm -f /tmp/python-libs",
    ]
    return [
        Comment(
            f"Python {py.version}, built from its source tarball (sha256 from cannery.lock) in a\n"
            "builder stage: the compiler and headers stay here. The final image gets the\n"
            f"prefix {prefix} and installs the packages of the shared libraries it links."
        ),
        *_stage_head(PY_STAGE, spec.base_reference, _refuse_base(spec), spec.package_manager,
                     spec.package_mirrors),
        Run(_install_lines(spec.package_manager, names, spec.package_mirrors)),
        Run(lines),
        Blank(),
    ]


def _python_final(spec: ImageSpec) -> list[Instruction]:
    """The built Python in the final image: its prefix and the list of its runtime packages
    (installed by the package step next), first on PATH."""
    py = spec.python_install
    if py is None or py.install != "source":
        return []
    return [
        Comment(f"Python {py.version} from the builder stage {PY_STAGE}, first on PATH."),
        Copy(py.prefix, py.prefix, PY_STAGE),
        Copy(PY_RUNTIME, PY_RUNTIME, PY_STAGE),
        Env((("PATH", f"{py.prefix}/bin:${{PATH}}"),)),
        Blank(),
    ]


def _python_locked(spec: ImageSpec) -> list[Instruction]:
    """One step installs every Python dependency from the lock, hash-checked, nothing else."""
    locked = dict(spec.python_locked)
    extra = dict(spec.python_extra_index)
    n = {a: len(locked[a]) for a in spec.arches}
    counts = ", ".join(f"{a} {n[a]}" for a in spec.arches)
    comment = Comment(
        f"Python dependencies from cannery.lock, resolved per platform ({counts} packages):\n"
        "pip installs exactly these files (--require-hashes --no-deps) and nothing else;\n"
        f"{CONSTRAINTS} keeps every later step on these versions."
    )
    branches: dict[str, list[str]] = {}
    for arch in spec.arches:
        reqs = " ".join(_q(line) for line in locked[arch])
        index = " ".join(_q(f"--extra-index-url={_mirrored(spec, u)}")
                         for u in extra.get(arch, ()))
        # the extra indexes become "$@" (POSIX, no bash arrays)
        branches[arch] = [
            f"printf '%s\\n' {reqs} > {REQUIREMENTS};",
            f"set -- {index};" if index else "set --;",
        ]
    lines = [
        "set -eu;",
        "mkdir -p /opt/cannery;",
        *_arch_case(spec, "locked Python dependencies", branches),
        f"{PIP} --require-hashes --no-deps --index-url {_q(_mirrored(spec, spec.python_index))}"
        f' "$@" -r {REQUIREMENTS};',
        f"sed 's/ .*//' {REQUIREMENTS} > {CONSTRAINTS}",
    ]
    return [comment, Run(lines)]
