"""A family's first `cannery lock` and `cannery render` (no lock yet), its inputs resolved one
at a time against side by side, in one run.

    .venv/bin/python bench/first_lock.py [--size tiny|moderate] [--runs 2] [--rate 30] [--rtt 80]

The family is the build benchmark's (bench/buildbench/family.py): 8 images, 2 toolkit versions
x 2 chips x 2 framework pins, one base, each image's components from git (their requirements
resolved by uv against the world's wheel index). Its inputs are served by the e2e world on
127.0.0.1 (registry, HTTPS files, wheel index, git smart HTTP). Two settings:

- loopback: as served;
- remote: the files, the index and git behind a proxy that waits ``--rtt`` ms before each
  connection's first byte and sends at most ``--rate`` MB/s on each connection (what a
  download mirror or an object store does to one client connection; a link that one
  connection fills gains less from side by side).

Each run is a fresh process (`cannery lock`, then `cannery render`) with an empty cache (no
uv cache, no git cache) and no lock; "one at a time" sets cannery.lock.update's worker counts to 1
in that process. The two orders alternate. Checks that both ways write the same lock (times
aside). Prints a Markdown table of medians and writes it to OUT/first_lock.md (default: a
fresh directory under /tmp). Not a test: nothing here fails on timing.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from buildbench.family import add_toolkits, catalog, members  # noqa: E402
from buildbench.stack import (  # noqa: E402
    SIZES,
    TORCH,
    WHEELS,
    make_extension_repo,
    make_framework_repo,
    make_history_repo,
)
from lint_vs_hadolint import machine  # noqa: E402

from tests.e2e.buildenv import make_world  # noqa: E402
from tests.services.standin import add_uv_wheels, make_toolkit_run, make_wheelhouse  # noqa: E402
from tests.services.tlsca import make_ca  # noqa: E402

RUN = """\
import sys
import cannery.lock.update
if sys.argv[1] == "alone":
    cannery.lock.update.RESOLVE_WORKERS = cannery.lock.update.PYTHON_WORKERS = 1
from cannery.cli import main
for command in ("lock", "render"):
    try:
        main([command, "--catalog", sys.argv[2]])
    except SystemExit as exc:
        if exc.code:
            raise
"""


class SlowLink:
    """A TCP proxy on 127.0.0.1 to ``target``: ``rtt`` seconds before a connection's first
    byte, then at most ``rate`` bytes/s from the server on that connection."""

    def __init__(self, target: int, rtt: float, rate: float) -> None:
        self.target, self.rtt, self.rate = target, rtt, rate
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            client, _ = self.sock.accept()
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        time.sleep(self.rtt)
        server = socket.create_connection(("127.0.0.1", self.target))
        threading.Thread(target=self._pump, args=(client, server, None), daemon=True).start()
        self._pump(server, client, self.rate)

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, rate: float | None) -> None:
        start, sent = time.monotonic(), 0
        try:
            while chunk := src.recv(64 << 10):
                dst.sendall(chunk)
                sent += len(chunk)
                if rate:
                    ahead = sent / rate - (time.monotonic() - start)
                    if ahead > 0:
                        time.sleep(ahead)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)


def build_family(world, size_name: str) -> Path:  # type: ignore[no-untyped-def]
    size = SIZES[size_name]
    for arch in ("amd64", "arm64"):
        make_toolkit_run(world.installer(arch), "8.5.2", arch, filler_bytes=size.toolkit_mb << 20)
    add_toolkits(world, size)
    wheels = world.files_root / "wheels"
    for name, version in WHEELS:
        make_wheelhouse(wheels, name, version)
    make_wheelhouse(wheels, *TORCH, filler_bytes=size.torch_mb << 20)
    add_uv_wheels(wheels)
    gitroot = world.root / "git"
    make_extension_repo(gitroot / "ascendops.git", size.units, size.funcs)
    make_history_repo(gitroot / "tfm.git", size.commits, size.blob_kb)
    framework = make_framework_repo(gitroot / "verl.git", 2)
    where = world.root / "family"
    where.mkdir()
    text = catalog(world, "family", {"stable": framework[0], "next": framework[1]})
    (where / "catalog.toml").write_text(text)
    return where / "catalog.toml"


def first_render(cat: Path, mode: str, env: dict[str, str]) -> float:
    cache = Path(tempfile.mkdtemp(prefix="first-lock-cache-"))
    (cat.parent / "cannery.lock").unlink(missing_ok=True)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", RUN, mode, str(cat)],
                          env={**env, "CANNERY_CACHE_DIR": str(cache)},
                          capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    subprocess.run(["rm", "-rf", str(cache)], check=False)
    if proc.returncode != 0:
        raise SystemExit(f"render failed ({mode}):\n{proc.stderr[-3000:]}")
    return took


def lock_values(cat: Path) -> str:
    """The lock just written, without its resolution times (each run has its own)."""
    text = (cat.parent / "cannery.lock").read_text()
    return "\n".join(line for line in text.splitlines() if not line.startswith("resolved_at"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=["tiny", "moderate"], default="moderate")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--rate", type=float, default=30.0, help="MB/s per connection (remote)")
    ap.add_argument("--rtt", type=float, default=80.0, help="ms before a connection's first byte")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="cannery-bench-"))
    root = Path(tempfile.mkdtemp(prefix="first-lock-"))
    ca = make_ca(root / "ca")
    world = make_world(root / "world", ca)
    try:
        cat = build_family(world, args.size)
        loopback = cat.read_text()
        files_port = world.files.url.rsplit(":", 1)[1].split("/")[0]
        git_port = world.git.url.rsplit(":", 1)[1].split("/")[0]
        slow_files = SlowLink(int(files_port), args.rtt / 1000, args.rate * 1e6)
        slow_git = SlowLink(int(git_port), args.rtt / 1000, args.rate * 1e6)
        remote = (loopback.replace(f"127.0.0.1:{files_port}", f"127.0.0.1:{slow_files.port}")
                  .replace(f"127.0.0.1:{git_port}", f"127.0.0.1:{slow_git.port}"))
        env = {**world.env()}
        env.pop("CANNERY_REGISTRY_USER")
        env.pop("CANNERY_REGISTRY_PASSWORD")
        times: dict[tuple[str, str], list[float]] = {}
        locks: set[str] = set()
        for setting, text in (("loopback", loopback), ("remote", remote)):
            cat.write_text(text)
            for i in range(args.runs):
                order = ("alone", "together") if i % 2 == 0 else ("together", "alone")
                for mode in order:
                    took = first_render(cat, mode, env)
                    times.setdefault((setting, mode), []).append(took)
                    if setting == "loopback":  # the remote catalog names other ports
                        locks.add(lock_values(cat))
                    print(f"{setting:9} {mode:9} {took:6.1f} s", file=sys.stderr)
        lock = (cat.parent / "cannery.lock").read_text()
        entries = sum(1 for line in lock.splitlines() if line.startswith("["))
    finally:
        world.stop()
        subprocess.run(["rm", "-rf", str(root)], check=False)
    rows = [
        f"First `cannery lock` + `cannery render` of an {len(members())}-image family "
        f"(no lock: {entries} lock entries to resolve; size {args.size}; remote = "
        f"{args.rtt:.0f} ms before each connection's first byte, {args.rate:.0f} MB/s per "
        f"connection), medians of "
        f"{args.runs} runs, fresh process and empty cache each.",
        "",
        "| inputs served | one at a time | side by side | ratio |",
        "|---|---|---|---|",
    ]
    for setting in ("loopback", "remote"):
        alone = statistics.median(times[(setting, "alone")])
        together = statistics.median(times[(setting, "together")])
        rows.append(f"| {setting} | {alone:.1f} s | {together:.1f} s | "
                    f"{alone / together:.2f}x |")
    same = "yes" if len(locks) == 1 else "NO"
    rows += ["", f"The same lock both ways (times aside): {same}.",
             "", f"Machine: {machine()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}."]
    table = "\n".join(rows)
    out.mkdir(parents=True, exist_ok=True)
    (out / "first_lock.md").write_text(table + "\n")
    print(table)
    print(f"\n(written to {out / 'first_lock.md'})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
