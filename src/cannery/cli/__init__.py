"""The cannery command line: the typer app and every command's registration are in
:mod:`cannery.cli.app`; ``build`` and ``verify`` (the commands with many options) have a module
each, the options several commands share are in :mod:`cannery.cli.options`."""

from cannery.cli.app import WORKFLOW as WORKFLOW
from cannery.cli.app import _annotation as _annotation
from cannery.cli.app import app as app
from cannery.cli.app import command as command
from cannery.cli.app import main as main
