"""A stand-in for CPython's source tarball, of the same shape and tiny (it is compiled under
qemu for arm64): ``Python-VERSION/`` with a ``configure`` that takes the options cannery passes
(``--prefix``, ``--enable-shared``, ``LDFLAGS``), and a build whose ``all`` target compiles a
shared ``libpython3.X.so.1.0`` and a ``python3.X`` linked against it, and whose ``altinstall``
installs both under the prefix. ``python3.X --version`` prints ``Python VERSION`` from the
shared library, so it runs only if the rpath and the copied prefix are right.

The stand-in base images have a C compiler but no ``make`` (the cached root filesystems are
made without it and no Debian mirror is reachable from builds): ``MAKE_SHIM`` is a stand-in
``make`` that runs the tarball's ``Makefile.sh`` with make's targets.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

MAKE_SHIM = b"""#!/bin/sh
# Stand-in make (tests/services/pysource.py): runs ./Makefile.sh with the targets; -jN ignored.
set -eu
targets=
for a in "$@"; do case "$a" in -j*) ;; *) targets="$targets $a" ;; esac; done
exec sh ./Makefile.sh ${targets:-all}
"""

_CONFIGURE = """#!/bin/sh
# Stand-in for CPython's configure: the options cannery passes, nothing else.
set -eu
prefix=/usr/local; shared=no; ldflags=
for a in "$@"; do
  case "$a" in
    --prefix=*) prefix=${a#--prefix=} ;;
    --enable-shared) shared=yes ;;
    LDFLAGS=*) ldflags=${a#LDFLAGS=} ;;
    *) echo "configure: unknown option $a" >&2; exit 1 ;;
  esac
done
[ "$shared" = yes ] || { echo "configure: expected --enable-shared" >&2; exit 1; }
printf 'prefix=%s\\nldflags=%s\\n' "$prefix" "$ldflags" > config.sh
"""

_BUILD = """#!/bin/sh
set -eu
. ./config.sh
for target in "$@"; do
  case "$target" in
    all)
      cc -shared -fPIC -Wl,-soname,libpython{minor}.so.1.0 -o libpython{minor}.so.1.0 version.c
      cc -o python{minor} main.c ./libpython{minor}.so.1.0 $ldflags ;;
    altinstall)
      mkdir -p "$prefix/bin" "$prefix/lib"
      cp libpython{minor}.so.1.0 "$prefix/lib/"
      cp python{minor} "$prefix/bin/" ;;
    *) echo "make: no target $target" >&2; exit 2 ;;
  esac
done
"""

_MAIN = """#include <stdio.h>
#include <string.h>
const char *standin_version(void);
int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--version") == 0) {
        printf("Python %s\\n", standin_version());
        return 0;
    }
    fprintf(stderr, "stand-in Python: only --version\\n");
    return 2;
}
"""


def make_python_tarball(out: Path, version: str) -> Path:
    """Write ``Python-VERSION.tgz`` (the stand-in) to ``out``; return ``out``."""
    minor = ".".join(version.split(".")[:2])
    top = f"Python-{version}"
    files = {
        "configure": (_CONFIGURE, 0o755),
        "Makefile.sh": (_BUILD.replace("{minor}", minor), 0o644),
        "main.c": (_MAIN, 0o644),
        "version.c": (f'const char *standin_version(void) {{ return "{version}"; }}\n', 0o644),
    }
    payload = io.BytesIO()
    with tarfile.open(fileobj=payload, mode="w:gz", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo(top)
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(info)
        for name, (text, mode) in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    out.write_bytes(payload.getvalue())
    return out
