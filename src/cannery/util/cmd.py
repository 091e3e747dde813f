"""The one subprocess helper: checks the binary exists, logs the command with secrets masked,
and gives the child the environment :func:`cannery.util.env.child_env` makes (no credentials).

Callers add variables with ``extra_env``; they never hand over a whole environment."""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from cannery.errors import CommandError
from cannery.util.env import child_env

__all__ = ["CommandError", "mask", "run"]

log = logging.getLogger("cannery.cmd")

# user:password@ in URLs, and --password=... style flags, never reach a log line or an error.
_SECRET_URL = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)[^/@\s]+@")
_SECRET_FLAG = re.compile(r"(?P<flag>--?(?:password|token|secret|creds)[=\s])\S+", re.I)


def mask(text: str) -> str:
    text = _SECRET_URL.sub(r"\g<scheme>***@", text)
    return _SECRET_FLAG.sub(r"\g<flag>***", text)


def run(
    argv: Sequence[str],
    *,
    extra_env: Mapping[str, str] | None = None,
    timeout: float = 300,
) -> str:
    """Run ``argv`` and return stdout; raise CommandError with a one-line, masked reason.
    The child's environment is ``child_env(extra_env)``."""
    if shutil.which(argv[0]) is None:
        raise CommandError(f"{argv[0]}: not found on PATH; install it first")
    shown = mask(" ".join(argv))
    log.debug("run: %s", shown)
    try:
        proc = subprocess.run(
            list(argv),
            env=child_env(extra_env),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise CommandError(f"{shown}: timed out after {timeout:.0f}s") from exc
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise CommandError(f"{shown}: exit {proc.returncode}: {mask(last)}")
    return proc.stdout


def stream(
    argv: Sequence[str],
    log_path: Path,
    on_line: Callable[[str], None] | None = None,
    *,
    extra_env: Mapping[str, str] | None = None,
    keep: int = 30,
    stop: threading.Event | None = None,
) -> tuple[int, list[str]]:
    """Run ``argv`` with stdout and stderr appended to ``log_path`` (masked, line by line) and
    each line handed to ``on_line``; return the exit status and the last ``keep`` lines.
    The child's environment is ``child_env(extra_env)``. When ``stop`` is set while the child
    runs, it is terminated (SIGTERM) and its exit status returned."""
    if shutil.which(argv[0]) is None:
        raise CommandError(f"{argv[0]}: not found on PATH; install it first")
    shown = mask(" ".join(argv))
    log.debug("run: %s", shown)
    tail: deque[str] = deque(maxlen=keep)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("a", encoding="utf-8") as fh:
        fh.write(f"$ {shown}\n")
        proc = subprocess.Popen(
            list(argv),
            env=child_env(extra_env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        assert proc.stdout is not None
        if stop is not None:
            threading.Thread(target=_stop_on, args=(proc, stop), daemon=True).start()
        for raw in proc.stdout:
            line = mask(raw.rstrip("\n"))
            fh.write(line + "\n")
            tail.append(line)
            if on_line:
                on_line(line)
        rc = proc.wait()
        fh.write(f"# exit {rc}\n")
    return rc, list(tail)


def _stop_on(proc: subprocess.Popen[str], stop: threading.Event) -> None:
    while proc.poll() is None:
        if stop.wait(0.1):
            proc.terminate()
            return
