"""Property test: generated and mutated Dockerfiles and workflows never make lint raise.

Every input ends in findings (a `parse-error` at worst) or, through the CLI, exit 0/1;
never an exception and never an `internal-error` finding. CI runs a few hundred examples per
test; the documented long run is

    CANNERY_FUZZ_EXAMPLES=10000 .venv/bin/python -m pytest tests/lint/test_fuzz.py

(10,000 per test: 20,000 files).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cannery.lint.config import LintConfig
from cannery.lint.engine import Engine

EXAMPLES = int(os.environ.get("CANNERY_FUZZ_EXAMPLES", "400"))
ENGINE = Engine(LintConfig())
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))

WORDS = [
    "wget --no-check-certificate https://x/a.run", "curl -fsSLk https://x/b", "bash a.run",
    "bash b", "source /usr/local/Ascend/ascend-toolkit/set_env.sh", ". /opt/env.sh",
    "export LD_LIBRARY_PATH=/a:$LD_LIBRARY_PATH", "git clone https://x/r.git",
    "git clone -b main https://x/r.git r", "git -C r checkout deadbeef", "cd r",
    "pip install -e .", "pip install torch==2.9.0", "pip config set global.index-url https://m",
    "sha256sum -c SUMS", 'echo "abc  a.run" | sha256sum -c -', "tar xzf a.tgz",
    "rm -rf /var/lib/apt/lists/*", "apt-get update", "apt-get install -y git", "pip list",
    "sed -i '3s/a/b/' f", 'echo "source x" >> ~/.bashrc', "curl https://x/i.sh | sh",
    'if [ "$(uname -m)" = x86_64 ]; then echo a; fi', 'case "$TARGETARCH" in amd64) ;; esac',
    "skopeo delete docker://r:t", "docker login -p ${{ secrets.P }} r", "$(", "`", "'", '"',
    "<<EOF", "EOF", "${X:+:$X}", "&&", "||", ";", "|", "\\", "{", "}", "(", ")",
]
INSTRUCTIONS = ["FROM", "RUN", "ENV", "ARG", "COPY", "ADD", "SHELL", "LABEL", "WORKDIR",
                "USER", "CMD", "ENTRYPOINT", "ONBUILD", "HEALTHCHECK", "EXPOSE", "VOLUME",
                "STOPSIGNAL", "MAINTAINER", "FOO", "run", "#", ""]
VALUES = [
    "ubuntu:22.04", "swr.example.com/ascendhub/cann:8.5.1-910b-ubuntu22.04-py3.11 AS base",
    "MAX_JOBS=1", 'MAKEFLAGS="-j1"', "SOC_VERSION=ascend910_9391", "LD_LIBRARY_PATH=/x/devlib:$X",
    "HF_TOKEN", "GIT_SSL_NO_VERIFY=1", '["/bin/bash", "-c"]', '["bash", "-c", "x"]', "a b",
    "--mount=type=cache,target=/c pip install x", "<<EOF\necho hi\nEOF", "=", "$", "${",
]

shell = st.lists(st.sampled_from(WORDS), min_size=0, max_size=8).map(
    lambda ws: " ".join(ws))
line = st.one_of(
    st.tuples(st.sampled_from(INSTRUCTIONS), st.one_of(st.sampled_from(VALUES), shell)).map(
        lambda t: f"{t[0]} {t[1]}"),
    st.lists(shell, min_size=1, max_size=4).map(lambda parts: "RUN " + " && \\\n    ".join(parts)),
    st.just(""), st.just("\\"), st.just("    \\"), st.text(max_size=30),
)
dockerfiles = st.lists(line, min_size=0, max_size=14).map("\n".join)


@st.composite
def mutated(draw: st.DrawFn, base: st.SearchStrategy[str]) -> str:
    text = draw(base)
    for op in draw(st.lists(st.sampled_from(
            ["truncate", "backslash", "binary", "huge", "unicode", "dup", "crlf"]), max_size=3)):
        pos = draw(st.integers(0, max(0, len(text))))
        if op == "truncate":
            text = text[:pos]
        elif op == "backslash":
            text = text[:pos] + "\\" + text[pos:]
        elif op == "binary":
            raw = draw(st.binary(min_size=1, max_size=8))
            text = text[:pos] + raw.decode("utf-8", errors="replace") + text[pos:]
        elif op == "huge":
            text = text[:pos] + "RUN echo " + "x" * draw(st.integers(1000, 60000)) + text[pos:]
        elif op == "unicode":
            text = text[:pos] + draw(st.text(min_size=1, max_size=5)) + text[pos:]
        elif op == "dup":
            text = text + "\n" + text
        elif op == "crlf":
            text = text.replace("\n", "\r\n")
    return text


def workflow_doc(steps: list[tuple[str, str]]) -> str:
    body = []
    for kind, value in steps:
        if kind == "run":
            body.append("      - run: |\n" + "\n".join("          " + ln
                                                        for ln in value.split("\n")))
        elif kind == "build":
            body.append("      - uses: docker/build-push-action@v6\n        with:\n"
                        f"          file: {value or 'Dockerfile'}\n"
                        "          platforms: linux/amd64,linux/arm64\n"
                        "          tags: r:verl-8.5.2-a3-x\n"
                        "          outputs: type=image,push-by-digest=true\n"
                        "          cache-to: type=gha,mode=max")
        else:
            body.append(value)
    return ("on: push\njobs:\n  b:\n    runs-on: x\n    strategy:\n      matrix:\n"
            "        platform: [a, b]\n    steps:\n" + "\n".join(body) + "\n")


workflows = st.lists(st.tuples(st.sampled_from(["run", "build", "raw"]),
                               st.one_of(shell, st.text(max_size=20))),
                     max_size=6).map(workflow_doc)


def _check(findings: list) -> None:  # type: ignore[type-arg]
    assert not [f for f in findings if f.rule == "internal-error"], findings
    for f in findings:
        assert f.span.line >= 1 and f.span.column >= 1


@SETTINGS
@given(mutated(dockerfiles))
def test_dockerfiles_never_crash(text: str) -> None:
    _check(ENGINE.lint_text("Dockerfile", text, "dockerfile"))
    fixed, _ = ENGINE.fix_text("Dockerfile", text, "dockerfile")
    _check(ENGINE.lint_text("Dockerfile", fixed, "dockerfile"))


@SETTINGS
@given(mutated(workflows))
def test_workflows_never_crash(text: str) -> None:
    _check(ENGINE.lint_text(".github/workflows/x.yml", text, "workflow"))


@settings(max_examples=max(20, EXAMPLES // 20), deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(mutated(dockerfiles))
def test_cli_exit_is_0_1_or_2(tmp_path_factory, text: str) -> None:  # type: ignore[no-untyped-def]
    from cannery.commands.lint import run

    path = tmp_path_factory.mktemp("fuzz") / "Dockerfile"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    assert run(["--format", "json", "--output", str(path.parent / "out.json"), str(path)]) in (0, 1)
