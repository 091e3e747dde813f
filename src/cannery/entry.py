"""The console entry point. `cannery lint` skips typer and rich entirely, so linting one file
starts about as fast as hadolint; every other command goes through the typer app. Every
command ends in ``_exit``, which skips the interpreter's teardown."""

from __future__ import annotations

import atexit
import os
import sys


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["lint"]:
        _exit(_lint(args[1:]))
    from cannery.cli import main as cli_main

    try:
        cli_main()
    except SystemExit as exc:  # every command ends here, its work done and its files closed
        if exc.code is not None and not isinstance(exc.code, int):
            raise
        _exit(exc.code or 0)


def _lint(args: list[str]) -> int:
    from cannery.errors import FatalError

    try:
        from cannery.commands.lint import run

        return run(args)
    except FatalError as exc:
        in_actions = os.environ.get("GITHUB_ACTIONS") == "true"
        for line in exc.message.splitlines():  # the same lines cli.main prints
            prefix = "error: " if not line.startswith(("warning", " ")) else ""
            print(f"cannery: {prefix}{line}", file=sys.stderr)
            if in_actions:
                from cannery.cli import _annotation

                print(_annotation(line), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


def _exit(code: int) -> None:
    """End the process with ``code`` once everything written is flushed and the exit functions
    have run (``atexit``: logging's, and those of whatever runs cannery, such as coverage or a
    test's), without tearing the interpreter down: freeing every object and module one by one
    costs a one-file lint about 7 ms of CPU and a build ~0.1 s, for memory the system reclaims
    at once. No command leaves a thread running (files are written and closed, pools shut
    down, by then). If a flush fails (a closed pipe), the interpreter exits the usual way and
    reports it as it always has."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        sys.exit(code)
    os._exit(code)
