"""The parsed views rules rely on: physical positions, per-stage SHELL, WORKDIR and ARGs."""

from __future__ import annotations

from cannery.lint.config import DEFAULT_SHELLS
from cannery.lint.facts.dockerfile import parse_dockerfile
from cannery.lint.facts.workflow import parse_workflow

TEXT = """\
ARG BASE=ubuntu:22.04
FROM swr.example.com/ascendhub/cann:8.5.1-910b-ubuntu22.04-py3.11 AS cann
WORKDIR /opt
WORKDIR src
RUN a && \\
    # a comment Docker drops
    b --flag "x y" && \\
    c
FROM cann AS child
RUN d
FROM ${BASE}
SHELL ["/bin/bash", "-c"]
RUN <<EOF
echo one
echo two
EOF
"""


def test_positions_shell_workdir() -> None:
    f = parse_dockerfile("Dockerfile", TEXT, DEFAULT_SHELLS)
    runs = [i for i in f.instructions if i.keyword == "RUN"]
    first = runs[0]
    assert (first.line, first.end_line) == (5, 8)
    assert first.workdir == "/opt/src" and first.shell_is_bash
    assert first.script is not None
    b = next(c for c in first.script.commands if c.name == "b")
    assert (b.pos.line, b.pos.column) == (7, 5)
    assert [w.value for w in b.args] == ["--flag", "x y"]
    assert f.text[b.args[1].start : b.args[1].end] == '"x y"'
    # a stage built FROM another inherits its shell and workdir
    assert runs[1].stage is not None and runs[1].stage.parent is not None
    assert runs[1].shell_is_bash and runs[1].workdir == "/opt/src"
    # ubuntu's shell is sh until SHELL says otherwise; the heredoc body keeps its lines
    heredoc = runs[2]
    assert heredoc.heredoc and heredoc.shell_is_bash
    assert heredoc.script is not None
    assert [(c.name, c.pos.line) for c in heredoc.script.commands] == [("echo", 14), ("echo", 15)]
    assert [p.key for p in f.global_args[0].pairs] == ["BASE"]


def test_workflow_run_block_positions() -> None:
    text = ("on: push\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n"
            "      - name: x\n        run: |\n          echo one\n"
            "          curl -fsSLo t https://example.com/t\n")
    wf = parse_workflow(".github/workflows/x.yml", text)
    (step,) = wf.jobs[0].steps
    assert step.run is not None
    curl = next(c for c in step.run.commands if c.name == "curl")
    assert (curl.pos.line, curl.pos.column) == (9, 11)
    assert text[curl.start : curl.start + 4] == "curl"


def _cmds(text: str) -> list[tuple[str, list[str], list[str]]]:
    from cannery.lint.facts.shell import parse_script

    return [(c.name, c.argv, [w.value for _, w in c.redirects])
            for c in parse_script(text).commands]


def test_redirect_belongs_to_the_last_command_before_it() -> None:
    assert _cmds("a && b >> f") == [("a", [], []), ("b", [], ["f"])]
    assert _cmds("V=$(cmd) && echo x >> f") == [("cmd", [], []), ("echo", ["x"], ["f"])]
    assert _cmds('echo "$(cmd)" >> f') == [("echo", ["$(cmd)"], ["f"]), ("cmd", [], [])]


def test_wrappers_are_seen_through_without_taking_an_option_value() -> None:
    assert _cmds("sudo -u bob pip install x")[0][:2] == ("pip", ["install", "x"])
    assert _cmds("timeout -s KILL 10 git clone u")[0][:2] == ("git", ["clone", "u"])
    assert _cmds("sudo -E env A=1 nice -n 5 make -j1")[0][:2] == ("make", ["-j1"])
    assert _cmds("sudo -v")[0][0] == "sudo"


def test_short_option_clusters_know_which_letter_takes_a_value() -> None:
    from cannery.lint.facts.shell import parse_script

    (c,) = parse_script("curl -okubectl https://example.com/k").commands
    assert not c.has_flag("-k") and (w := c.flag_value("-o")) and w.value == "kubectl"
    (c,) = parse_script("curl -fsSLo out https://example.com/k").commands
    assert (w := c.flag_value("-o")) and w.value == "out"
    (c,) = parse_script("curl -fsSLk https://example.com/k").commands
    assert c.has_flag("-k")


def test_workflow_expressions_stay_inside_their_word() -> None:
    text = ("on: push\njobs:\n  b:\n    runs-on: x\n    steps:\n"
            "      - run: echo ${{ matrix.arch }}/y \"${{ secrets.P }}\" z\n")
    wf = parse_workflow(".github/workflows/x.yml", text)
    run = wf.jobs[0].steps[0].run
    assert run is not None and not run.has_error
    (echo,) = run.commands
    assert [w.text for w in echo.args] == ["${{ matrix.arch }}/y", '"${{ secrets.P }}"', "z"]
    assert text[echo.args[1].start : echo.args[1].end] == '"${{ secrets.P }}"'


def test_from_is_expanded_from_global_arg_defaults() -> None:
    text = ("ARG REPO=quay.io/ascend/cann\nARG VER=8.5.1\n"
            "FROM ${REPO}:${VER}-${CHIP:-a3}-ubuntu22.04 AS a\nFROM $NOPE AS b\n")
    f = parse_dockerfile("Dockerfile", text, DEFAULT_SHELLS)
    assert [s.image for s in f.stages] == ["quay.io/ascend/cann:8.5.1-a3-ubuntu22.04", "$NOPE"]
    assert f.stages[0].instructions[0].shell_is_bash


def test_matrix_is_expanded_like_github() -> None:
    text = """on: push
jobs:
  only-include:
    strategy:
      matrix:
        include: [{platform: linux/amd64, runner: a}, {platform: linux/arm64, runner: b}]
    runs-on: x
    steps: []
  product:
    strategy:
      matrix:
        py: ["3.10", "3.11"]
        arch: [amd64, arm64]
        exclude: [{py: "3.10", arch: arm64}]
        include: [{arch: arm64, extra: y}, {py: "3.12", arch: amd64}]
    runs-on: x
    steps: []
"""
    a, b = parse_workflow(".github/workflows/x.yml", text).jobs
    assert a.legs == [{"platform": "linux/amd64", "runner": "a"},
                      {"platform": "linux/arm64", "runner": "b"}]
    assert b.legs == [{"py": "3.10", "arch": "amd64"}, {"py": "3.11", "arch": "amd64"},
                      {"py": "3.11", "arch": "arm64", "extra": "y"},
                      {"py": "3.12", "arch": "amd64"}]


def test_steps_that_are_not_a_list_are_no_steps() -> None:
    """Found by the long fuzz run: `steps:` holding a mapping crashed the parser."""
    text = "on: push\njobs:\n  b:\n    runs-on: x\n    steps:\n     \\ - run: |\n          \n"
    (job,) = parse_workflow(".github/workflows/x.yml", text).jobs
    assert job.steps == []


def test_a_plain_scalar_over_several_lines_keeps_each_word_in_place() -> None:
    """YAML folds the line breaks of a plain `run:` into spaces: one command, whose words
    are still found on the lines and columns where they are written."""
    from cannery.lint.facts.workflow import parse_workflow

    text = ("on: push\njobs:\n  b:\n    runs-on: x\n    steps:\n"
            "      - run: echo start &&\n          docker login -u me -p ${{ secrets.P }} "
            "quay.io\n")
    step = parse_workflow("w.yml", text).jobs[0].steps[0]
    assert step.run is not None
    names = [c.name for c in step.run.commands]
    assert names == ["echo", "docker"]
    secret = next(w for w in step.run.commands[1].args if "secrets" in w.text)
    assert (secret.pos.line, secret.pos.column) == (7, 33)
    assert text.split("\n")[6][secret.pos.column - 1:].startswith("${{ secrets.P }}")


def test_the_bash_grammar_loads_without_the_packages_start_up_imports() -> None:
    """A one-file lint should not pay for importlib.resources (tempfile, shutil, lzma)."""
    import subprocess
    import sys

    code = ("import sys; from cannery.lint.facts.shell import parse_script; "
            "s = parse_script('a && b | c'); print([c.name for c in s.commands], "
            "'importlib.resources' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "['a', 'b', 'c'] False"


BAKE_HCL = """\
variable "REPO" {
  default = "quay.io/team"
}
variable "TAG" {
  default = "${REPO}/app:1.2"
}
group "default" {
  targets = ["app"]
}
target "app" {
  dockerfile = "Dockerfile.app"
  platforms  = ["linux/amd64", "linux/arm64"]
  tags       = ["${TAG}", "${upper(REPO)}", "$${LITERAL}"]
  cache-to   = ["type=gha,mode=max,scope=app"]
  args = {
    BASE = "${REPO}/base:2"
  }
}
target "app" {
  context = "src"
}
"""


def test_bake_hcl_reads_into_the_json_shape_with_variables_filled_in() -> None:
    from cannery.lint.facts.bake import interpolate, parse_bake

    doc = parse_bake("docker-bake.hcl", BAKE_HCL)
    assert doc["group"] == {"default": {"targets": ["app"]}}
    filled = interpolate(doc, {})
    app = filled["target"]["app"]
    # a block given twice is merged, as bake merges it
    assert (app["dockerfile"], app["context"]) == ("Dockerfile.app", "src")
    assert app["platforms"] == ["linux/amd64", "linux/arm64"]
    # a default naming another variable; a function call and an escaped `$${` stay as written
    assert app["tags"][0] == "quay.io/team/app:1.2"
    assert app["tags"][1:] == ["${upper(REPO)}", "$${LITERAL}"]
    assert app["args"] == {"BASE": "quay.io/team/base:2"}
    assert app["cache-to"] == ["type=gha,mode=max,scope=app"]
    # the environment bake runs in wins over a default
    assert interpolate(doc, {"REPO": "ghcr.io/x"})["target"]["app"]["tags"][0] == (
        "ghcr.io/x/app:1.2")


def test_bad_bake_files_are_a_parse_failure_with_a_line_never_a_traceback() -> None:
    import pytest

    from cannery.lint.facts import ParseFailure
    from cannery.lint.facts.bake import parse_bake

    cases = {
        'target "a" {\n  tags = ["x",\n}\n': 3,
        'target "a" {\n  dockerfile = "x"\n': 3,
        'target "a" {\n  x = $\n}\n': 2,
        "\x00": 1,
        "{" * 5000: 1,
    }
    for text, line in cases.items():
        with pytest.raises(ParseFailure) as exc:
            parse_bake("docker-bake.hcl", text)
        assert exc.value.line == line, (text[:40], exc.value.line, exc.value.message)
        assert exc.value.message.startswith("HCL: ") and "\n" not in exc.value.message
    with pytest.raises(ParseFailure) as exc:
        parse_bake("docker-bake.json", '{"target": {\n  "a": [}\n}')
    assert exc.value.line == 2 and exc.value.message.startswith("JSON: ")
