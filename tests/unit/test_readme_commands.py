"""Every cannery command in the code blocks of the README and the docs pages (and the
"Adopting it" steps) is run here.

A command is run for real when it needs nothing beyond this machine, and its shown output (the
lines after `$ command` in the block) is compared where the README shows it. A command that
needs the internet (the embedded catalog's registries, GitHub, the CANN server) is parsed by
cannery's own CLI, so a renamed option or a positional that became an option fails here; the
e2e tests run the same command shapes against local services (named per command).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.catalogs import minimal
from tests.conftest import ROOT

# The README and the docs site's written pages (the reference is generated from the code)
README = "\n".join(
    path.read_text(encoding="utf-8")
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    if "reference" not in path.parts
)


def readme_commands() -> dict[str, list[str]]:
    """Command → the output lines shown after it ({} of lines when none is shown)."""
    found: dict[str, list[str]] = {}
    # a fence may be indented (a code block inside a list item): its lines lose that indent
    for indent, block in re.findall(r"^([ \t]*)```[a-z]*\n(.*?)^\1```", README,
                                    flags=re.S | re.M):
        block = textwrap.dedent(block) if indent else block
        current: list[str] | None = None
        # a command continued with a trailing backslash is one command
        block = re.sub(r"\s*\\\n\s+", " ", block)
        for line in block.splitlines():
            if line.startswith("$ "):
                command = line[2:].split("   #")[0].strip()
                if command.startswith("cannery "):
                    current = found.setdefault(command, [])
                    continue
            bare = line.split("   #")[0].strip()
            for part in bare.split("&&"):
                part = part.strip().removeprefix(".venv/bin/")
                if part.startswith("cannery ") or part == "cannery":
                    found.setdefault(part, [])
            if current is not None:
                current.append(line)
    adopting = README.split("## Adopting it", 1)[1].split("\n## ", 1)[0]
    for span in re.findall(r"`(cannery [^`]*)`", adopting):
        found.setdefault(span, [])
    return found


def _parse_only(command: str) -> None:
    """The CLI accepts the command's shape (options, arguments), without running it."""
    import click

    from cannery.cli import command as cli_command

    args = command.split()[1:]
    cmd = cli_command()
    while isinstance(cmd, click.Group):
        sub = cmd.get_command(click.Context(cmd), args[0])
        assert sub is not None, f"{command}: no such command {args[0]}"
        cmd, args = sub, args[1:]
    cmd.make_context(command, list(args))  # raises click.UsageError on a wrong shape


def _shown(lines: list[str]) -> list[str]:
    return [line for line in lines if line != "…"]


Runner = Callable[[Path, object, list[str]], None]


def _in(tmp: Path) -> Path:
    os.chdir(tmp)
    return tmp


def _validate_broken(tmp: Path, cli, shown: list[str]) -> None:  # type: ignore[no-untyped-def]
    _in(tmp)
    (tmp / "broken.toml").write_text(minimal().replace('base = "b910"', 'base = "b91O"'))
    res = cli("catalog", "validate", "--catalog", "broken.toml")
    assert res.code == 2
    assert res.err.splitlines() == shown


def _plan_a3(tmp: Path, cli, shown: list[str]) -> None:  # type: ignore[no-untyped-def]
    _in(tmp)
    res = cli("plan", "qwen3-5-a3")
    assert res.code == 0, res.err
    assert res.out.splitlines()[0] == shown[0]


def _render_dockerfile(tmp: Path, cli, shown: list[str]) -> None:  # type: ignore[no-untyped-def]
    _in(tmp)
    res = cli("render", "dockerfile")
    assert res.code == 0, res.err
    assert res.out.splitlines() == shown


def _fresh_machine(tmp: Path, cli, shown: list[str]) -> None:  # type: ignore[no-untyped-def]
    # The install half is what `pip install -e .` did for this venv; the two commands run here.
    _in(tmp)
    assert cli("plan").code == 0
    assert cli("render", "dockerfile").code == 0
    assert len(list((tmp / "dockerfiles").glob("*.Dockerfile"))) == 3


def _schema_for_taplo(tmp: Path, cli, shown: list[str]) -> None:  # type: ignore[no-untyped-def]
    """`cannery schema > cannery.schema.json`, then a catalog naming it with `#:schema`
    passes check-jsonschema (the editor directive is a comment to every TOML reader)."""
    _in(tmp)
    (tmp / "cannery.schema.json").write_text(cli("schema").out)
    catalog = tmp / "cannery.toml"
    catalog.write_text("#:schema ./cannery.schema.json\n" + minimal())
    assert cli("catalog", "validate", "--catalog", str(catalog)).code == 0
    proc = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--schemafile", "cannery.schema.json",
         "cannery.toml"], capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout


def _adopting(command: str) -> Runner:
    """The "Adopting it" steps on a copy of the verl example as the repository root."""

    def run(tmp: Path, cli, shown: list[str]) -> None:  # type: ignore[no-untyped-def]
        repo = tmp / "repo"
        shutil.copytree(ROOT / "examples" / "verl-ascend", repo)
        _in(repo)
        res = cli(*command.split()[1:])
        assert res.code == 0, res.err

    return run


def _lint_dot(tmp: Path, cli, shown: list[str]) -> None:  # type: ignore[no-untyped-def]
    """On the rendered example: it runs and finds no error (the unlocked example's pip steps are
    warnings until `cannery lock` pins them)."""
    repo = tmp / "repo"
    shutil.copytree(ROOT / "examples" / "verl-ascend", repo)
    _in(repo)
    res = cli("lint", ".")
    assert res.code in (0, 1), res.err
    assert "file(s) checked" in res.err and "error[" not in res.out


def _lint_seed(tmp: Path, cli, shown: list[str]) -> None:  # type: ignore[no-untyped-def]
    os.chdir(ROOT)
    res = cli("lint", "tests/lint/seed/")
    assert res.code == 1
    out = (res.out + res.err).splitlines()
    assert out[0] == shown[0] and out[-1] == shown[-1]
    for line in _shown(shown):
        if re.match(r"^\s+\d+:\d+: ", line):  # a finding; "…" in the README elides text
            pattern = ".*".join(re.escape(part) for part in line.split("…"))
            assert any(re.fullmatch(pattern, got) for got in out), line


def _lint_usage(name: str) -> Runner:
    def run(tmp: Path, cli, shown: list[str]) -> None:  # type: ignore[no-untyped-def]
        _in(tmp)
        (tmp / "empty").mkdir()
        (tmp / ".git").mkdir()
        (tmp / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
        res = cli("lint", name)
        assert res.code == 2
        # The block shows two commands; this one's line is the one naming it.
        assert [line for line in shown if line.startswith(f"cannery: error: {name}:")] == [
            res.err.strip()
        ]

    return run


DOCKERFILE = """\
FROM ubuntu:22.04
RUN apt-get update
RUN curl -fsSLk https://example.com/a.tar.gz -o /a.tar.gz && tar xzf /a.tar.gz
RUN pip install transformers
"""


def _add_suppressions(tmp: Path, cli, shown: list[str]) -> None:  # type: ignore[no-untyped-def]
    _in(tmp)
    (tmp / "docker").mkdir()
    (tmp / "docker" / "Dockerfile").write_text(DOCKERFILE)
    res = cli("lint", "--add-suppressions", "docker/")
    assert res.code == 0, res.out + res.err
    cat = shown.index("$ cat docker/Dockerfile")
    assert (res.out + res.err).splitlines() == shown[:cat]
    assert (tmp / "docker" / "Dockerfile").read_text().splitlines() == shown[cat + 1 :]


def _baseline(tmp: Path, cli, shown: list[str]) -> None:  # type: ignore[no-untyped-def]
    """A committed Dockerfile with an unpinned install at line 3, then a line added above it
    and a second unpinned install: only the new finding is reported."""
    _in(tmp)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp / "docker").mkdir()
    df = tmp / "docker" / "Dockerfile"
    df.write_text("FROM ubuntu:22.04\nENV A=1\nRUN pip install accelerate\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    df.write_text(
        "FROM ubuntu:22.04\nENV A=1\nENV B=2\nRUN pip install transformers\n"
        "RUN pip install accelerate\n"
    )
    res = cli("lint", "--baseline-commit", "HEAD", "docker/")
    assert res.code == 1
    assert (res.out + res.err).splitlines() == shown


def _compare_pair(tmp: Path, cli, shown: list[str]) -> None:  # type: ignore[no-untyped-def]
    os.chdir(ROOT)
    res = cli("compare", "tests/compare/original/Dockerfile", "tests/compare/new/Dockerfile",
              "--accepted", "tests/compare/compare-accepted.toml")
    assert res.code == 1, res.err
    assert res.out.splitlines() == shown


# Needs the internet (the embedded catalog's registry, GitHub, the CANN server), or shows a
# run against an e2e test's own registry on a free port: parsed only. The e2e test that runs
# the same shape against local services is named beside each.
NETWORK = {
    "cannery render docs --catalog cannery.toml --from-registry":
        "tests/e2e/test_docs_from_registry.py",
    "cannery verify 127.0.0.1:46113/e2e/attested:e2e-8.5.2-910b-py3.11 --catalog catalog.toml "
    "--no-runtime --key key.pub": "tests/e2e/test_attest.py",
    "cannery verify 127.0.0.1:41377/e2e/attested:e2e-8.5.2-910b-py3.11 --catalog catalog.toml "
    "--no-runtime --rebuild --platform linux/amd64 --network host": "tests/e2e/test_attest.py",
    "cannery verify 127.0.0.1:46113/e2e/attested:e2e-8.5.2-910b-py3.11 --catalog catalog.toml "
    "--no-runtime --certificate-identity "
    "https://github.com/example/images/.github/workflows/other.yml@refs/heads/main "
    "--certificate-oidc-issuer https://token.actions.githubusercontent.com "
    "--trusted-root trusted_root.json": "tests/e2e/test_attest.py",
    "cannery lock": "tests/e2e/test_lock.py",
    "cannery build qwen3-5-a2 --locked --push": "tests/e2e/test_build.py",
    "cannery build qwen3-5-a2 --locked --output oci:images": "tests/e2e/test_build.py",
    "cannery verify quay.io/ascend/verl:verl-8.5.2-910b-ubuntu22.04-py3.11-qwen3-5":
        "tests/e2e/test_build.py",
    "cannery lock --catalog cannery.toml": "tests/e2e/test_lock.py",
    "cannery verify oci:/tmp/pytest-of-root/pytest-540/world0/pr-layout --catalog "
    "/tmp/pytest-of-root/pytest-540/world0/main/catalog.toml --image standin --platform "
    "linux/amd64": "tests/e2e/test_build.py",
    "cannery copy 127.0.0.1:40501/ascend/verl:8.5.2-py3.11 127.0.0.1:50319/mirror/verl "
    "127.0.0.1:40501/other/verl": "tests/e2e/test_mirror.py",
    "cannery copy 127.0.0.1:40501/ascend/verl:8.5.2-py3.11 127.0.0.1:50319/mirror/verl":
        "tests/e2e/test_mirror.py",
    "cannery copy 127.0.0.1:40501/ascend/verl:8.5.2-py3.11 127.0.0.1:50319/swr/verl "
    "--docker-media-types": "tests/e2e/test_mirror.py",
    "cannery host-check 127.0.0.1:5000/ascend/cann:8.2.rc1-910b-ubuntu22.04-py3.11 "
    "127.0.0.1:5000/ascend/cann:8.5.2-910b-ubuntu22.04-py3.11 --root node --chip 910b":
        "tests/e2e/test_host_check.py",
    "cannery host-check 127.0.0.1:5000/ascend/cann:8.5.2-910b-ubuntu22.04-py3.11 --root empty":
        "tests/e2e/test_host_check.py",
    "cannery status --catalog cannery.toml": "tests/e2e/test_status.py",
    # the how-to guides "Publish to quay.io and SWR" and "Sign and verify an image"
    "cannery build qwen3-5-a2 --push": "tests/e2e/test_publish_registries.py",
    "cannery verify quay.io/ascend/verl:8.5.2-py3.11 --image qwen3-5-a2 --all-registries":
        "tests/e2e/test_publish_registries.py",
    "cannery status": "tests/e2e/test_status.py",
    "cannery build qwen3-5-a2 --push --sign-key env:CANNERY_SIGN_KEY --sbom":
        "tests/e2e/test_attest.py",
    "cannery verify quay.io/ascend/verl:8.5.2-py3.11 --image qwen3-5-a2 --key signing.pub "
    "--require-attestations": "tests/e2e/test_attest.py",
}

RUN: dict[str, Runner] = {
    "cannery plan": _fresh_machine,
    "cannery render dockerfile": _render_dockerfile,
    "cannery plan qwen3-5-a3": _plan_a3,
    "cannery catalog validate --catalog broken.toml": _validate_broken,
    "cannery catalog validate --catalog cannery.toml":
        _adopting("cannery catalog validate --catalog cannery.toml"),
    "cannery render --catalog cannery.toml": _adopting("cannery render --catalog cannery.toml"),
    "cannery lint tests/lint/seed/": _lint_seed,
    "cannery lint empty": _lint_usage("empty"),
    "cannery lint .git/HEAD": _lint_usage(".git/HEAD"),
    "cannery lint --add-suppressions docker/": _add_suppressions,
    "cannery lint --baseline-commit HEAD docker/": _baseline,
    "cannery lint .": _lint_dot,
    "cannery schema > cannery.schema.json": _schema_for_taplo,
    "cannery compare tests/compare/original/Dockerfile tests/compare/new/Dockerfile "
    "--accepted tests/compare/compare-accepted.toml": _compare_pair,
}


def test_every_readme_command_has_a_runner() -> None:
    commands = set(readme_commands())
    known = set(RUN) | set(NETWORK)
    assert commands - known == set(), "README commands no test runs"
    assert known - commands == set(), "tests for commands the README no longer shows"


@pytest.mark.parametrize("command", sorted(NETWORK))
def test_network_command_parses(command: str) -> None:
    _parse_only(command)
    assert (ROOT / NETWORK[command]).exists()


@pytest.mark.parametrize("command", sorted(RUN))
def test_readme_command_runs(command: str, tmp_path: Path, cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    if not command.startswith("cannery lint"):  # lint parses its own options
        _parse_only(command)
    RUN[command](tmp_path, cli, readme_commands()[command])
