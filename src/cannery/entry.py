"""The console entry point. `cannery lint` skips typer and rich entirely, so linting one file
starts about as fast as hadolint; every other command goes through the typer app."""

from __future__ import annotations

import sys


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["lint"]:
        from cannery.errors import FatalError

        try:
            from cannery.commands.lint import run

            sys.exit(run(args[1:]))
        except FatalError as exc:
            import os

            in_actions = os.environ.get("GITHUB_ACTIONS") == "true"
            for line in exc.message.splitlines():  # the same lines cli.main prints
                prefix = "error: " if not line.startswith(("warning", " ")) else ""
                print(f"cannery: {prefix}{line}", file=sys.stderr)
                if in_actions:
                    from cannery.cli import _annotation

                    print(_annotation(line), file=sys.stderr)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            sys.exit(130)
    from cannery.cli import main as cli_main

    cli_main()
