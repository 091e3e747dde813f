"""The docs site's reference is generated from the code (scripts/gen_reference.py): it is
current, and nothing it is made from lacks words: every catalog field has a description, every
command and option its help, every lint rule its explanation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import typer.main

from cannery.catalog import models
from cannery.cli import app
from cannery.lint.ruleset import RULES
from tests.unit.test_no_effect_property import schema_fields

ROOT = Path(__file__).resolve().parents[2]


def test_the_generated_pages_are_current() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_reference.py"),
                           "--check"], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr  # refresh: python scripts/gen_reference.py


def test_every_catalog_field_has_a_description() -> None:
    missing = [key for key in schema_fields()
               if not getattr(models, key.split(".")[0]).model_fields[key.split(".")[1]]
               .description]
    assert missing == []


def test_every_command_and_option_has_help() -> None:
    missing: list[str] = []

    def walk(cmd: object, path: str) -> None:
        commands = getattr(cmd, "commands", None)
        if commands is not None:
            for name, sub in commands.items():
                walk(sub, f"{path} {name}")
            return
        if not getattr(cmd, "help", None):
            missing.append(path)
        for p in getattr(cmd, "params", []):
            if p.name != "help" and not getattr(p, "help", None):
                missing.append(f"{path} {p.opts[0] if p.opts else p.name}")

    walk(typer.main.get_command(app), "cannery")
    assert missing == []


def test_every_lint_rule_explains_itself() -> None:
    bare = [r.name for r in RULES
            if not r.__doc__ or "What it does" not in r.__doc__ or "Why" not in r.__doc__]
    assert bare == []
