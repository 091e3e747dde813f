"""Peak memory of a cannery child process, measured by the child itself.

The child is ``python -c LAUNCHER OUT LIMIT ARGS...``: under an address-space limit of
``LIMIT`` bytes (0: none), so that a regression ends in MemoryError rather than in the machine's
memory, it runs ``ARGS`` in-process (``cannery ARGS``, or with ``--script FILE``, that Python
file) and, as it exits, writes its own ``VmHWM`` (peak
resident set, KiB) from ``/proc/self/status`` to ``OUT``. Not ``ru_maxrss``: on Linux a forked
child's ``RUSAGE_SELF`` (and a parent's ``RUSAGE_CHILDREN``) carries the peak of the process it
was forked from across ``exec``, so a child of a large pytest process would report pytest's
peak. ``VmHWM`` belongs to the memory of the exec'd program alone.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

_LAUNCHER = (
    "import atexit, resource, runpy, sys\n"
    "out = sys.argv.pop(1)\n"
    "limit = int(sys.argv.pop(1))\n"
    "if limit:\n"
    "    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n"
    "def peak():\n"
    "    with open('/proc/self/status') as status:\n"
    "        kib = next(ln.split()[1] for ln in status if ln.startswith('VmHWM:'))\n"
    "    with open(out, 'w') as f:\n"
    "        f.write(kib)\n"
    "atexit.register(peak)\n"
    "if sys.argv[1:2] == ['--script']:\n"
    "    path = sys.argv.pop(2)\n"
    "    sys.argv[0:2] = [path]\n"
    "    runpy.run_path(path, run_name='__main__')\n"
    "else:\n"
    "    sys.argv[0] = 'cannery'\n"
    "    runpy.run_module('cannery', run_name='__main__', alter_sys=True)\n"
)


@dataclass(frozen=True)
class Measured:
    code: int
    out: str
    err: str
    peak_kib: int  # VmHWM of the child

    @property
    def peak_mib(self) -> float:
        return self.peak_kib / 1024


def run_measured(args: list[str], cwd: Path, env: dict[str, str],
                 timeout: float = 300, address_space: int = 0) -> Measured:
    """Run ``cannery ARGS`` (or ``--script FILE ARGS``) in a child that reports its own peak
    resident memory, under ``address_space`` bytes when given; output captured, stdin
    closed."""
    out = cwd / f".vmhwm-{len(list(cwd.glob('.vmhwm-*')))}"
    proc = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, str(out), str(address_space), *args], cwd=cwd, env=env,
        stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False, timeout=timeout,
    )
    assert out.exists(), f"the child wrote no peak (exit {proc.returncode}): {proc.stderr}"
    return Measured(proc.returncode, proc.stdout, proc.stderr, int(out.read_text()))
