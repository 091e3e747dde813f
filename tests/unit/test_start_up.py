"""What keeps every command other than lint from paying for the attest stack at start-up (the
start-up of `cannery build` is measured by bench/startup.py, never here): protobuf, the in-toto
models, cryptography and sigstore are imported where a statement is built, a key is loaded or a
bundle is checked; neither `plan` nor `build --help` loads httpx. Each test runs the command as
the console script does (or imports a command's modules) in a fresh interpreter, and reads what
it imported from -X importtime."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

# Top-level packages of the attest stack; a module is "loaded" if its name is one of these or
# starts with one of them and a dot.
ATTEST_STACK = ("in_toto_attestation", "google.protobuf", "cryptography", "sigstore",
                "securesystemslib")


def _imported(code: str, *args: str, cwd: Path, expect_rc: int = 0) -> tuple[set[str], str]:
    res = subprocess.run([sys.executable, "-X", "importtime", "-c", code, *args],
                         capture_output=True, text=True, cwd=cwd)
    assert res.returncode == expect_rc, res.stderr[-2000:]
    loaded = {m.group(1) for m in re.finditer(r"^import time:.*\|\s*(\S+)$", res.stderr, re.M)}
    return loaded, res.stdout


# as the console script runs it, with the arguments after -c's code
CLI = "import sys; sys.argv = ['cannery'] + sys.argv[1:]; from cannery.entry import main; main()"


def _of(loaded: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded if any(m == p or m.startswith(p + ".") for p in packages))


def test_plan_imports_neither_the_attest_stack_nor_httpx(tmp_path: Path) -> None:
    loaded, out = _imported(CLI, "plan", "--json", cwd=tmp_path)
    assert json.loads(out)["images"], "it planned the embedded catalog"
    assert "cannery.commands.plan" in loaded
    assert _of(loaded, (*ATTEST_STACK, "httpx")) == []


def test_build_help_imports_neither_the_attest_stack_nor_httpx(tmp_path: Path) -> None:
    loaded, out = _imported(CLI, "build", "--help", cwd=tmp_path)
    assert "--sign-key" in out and "--attest" in out
    assert _of(loaded, (*ATTEST_STACK, "httpx")) == []


@pytest.mark.parametrize("modules", [
    # what `cannery build --push` imports before its first merge, --attest (the default) and
    # all: unsigned envelopes, provenance built only after a platform is pushed
    ("cannery.commands.build", "cannery.attest.attach"),
    # `cannery verify` without --key or keyless checks
    ("cannery.commands.verify",),
])
def test_build_and_verify_import_the_attest_stack_only_where_used(
    tmp_path: Path, modules: tuple[str, ...]
) -> None:
    loaded, _ = _imported("import " + ", ".join(modules), cwd=tmp_path)
    assert set(modules) <= loaded
    assert _of(loaded, ATTEST_STACK) == []


def test_the_key_types_still_import_for_callers_that_use_them() -> None:
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    from cannery.attest import sign

    assert sign.PrivateKey == ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey
    assert sign.PublicKey == ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey
    with pytest.raises(AttributeError):
        sign.NoSuchName  # type: ignore[attr-defined]  # noqa: B018


def test_build_imports_httpx_without_its_command_line_client(tmp_path: Path) -> None:
    """httpx's CLI (click, pygments, rich's syntax and progress) is not loaded with httpx, and
    httpx still works (every e2e test talks to registries through it)."""
    loaded, out = _imported("import cannery.commands.build, httpx; print(httpx.Client.__name__)",
                            cwd=tmp_path)
    assert "httpx" in loaded and out.strip() == "Client"
    assert _of(loaded, ("pygments", "click", "rich.syntax", "rich.progress")) == []


def test_a_catalog_without_run_steps_loads_without_the_linter(tmp_path: Path) -> None:
    """The lint stack checks a catalog's `run` steps; a catalog that has none (the embedded
    one) is loaded without importing it, and one that has some still imports it."""
    code = "import sys; from cannery.render.checks import load_checked; load_checked(None)"
    loaded, _ = _imported(code, cwd=tmp_path)
    assert "cannery.catalog.load" in loaded
    assert _of(loaded, ("cannery.lint",)) == []
    root = Path(__file__).resolve().parents[2]
    code = ("import sys; from pathlib import Path; from cannery.render.checks import load_checked;"
            f" load_checked(Path({str(root / 'examples/vllm-ascend/cannery.toml')!r}))")
    loaded, _ = _imported(code, cwd=tmp_path)
    assert "cannery.lint.engine" in loaded
