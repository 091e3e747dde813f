"""What lint reads, and for how long: only regular files inside the repository, at most
1 MiB each (lint/files.py), never a hang, and a per-file time budget (engine._Budget).

The runs that would exhaust memory or hang without these guards run `cannery lint` in a child
process, bounded: an address-space limit (so a regression ends in MemoryError, not in the
machine's memory) and a timeout (so it fails, never hangs). Peak memory is read by the child
itself from /proc/self/status (VmHWM) as it exits (tests/services/peak.py).
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cannery.lint.config import LintConfig
from cannery.lint.engine import Engine
from cannery.lint.files import MAX_BYTES
from cannery.lint.model import Finding, Severity
from cannery.lint.rule import LintContext, Rule
from cannery.lint.rules import unused_arg
from tests.services.peak import run_measured

ROOT = Path(__file__).resolve().parents[2]
ADDRESS_SPACE = 4 << 30  # a regression fails with MemoryError here, not in the machine


def lint_child(*args: str, cwd: Path, timeout: float = 120) -> tuple[int, dict, str, int]:  # type: ignore[type-arg]
    """(exit status, JSON report, stderr, peak MiB) of `cannery lint --format json ARGS` run
    in a child process (tests/services/peak.py) under an address-space limit and a timeout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.pop("GITHUB_ACTIONS", None)
    run = run_measured(["lint", "--format", "json", "--ignore", "multi-platform-single-runner",
                        *args], cwd, env, timeout=timeout, address_space=ADDRESS_SPACE)
    assert "Traceback" not in run.err, run.err[-3000:]
    report = json.loads(run.out) if run.out.strip() else {}
    return run.code, report, run.err, int(run.peak_mib)


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / "docker").mkdir()
    return repo


def _workflow(file: str, context: str = ".") -> str:
    return ("on: workflow_dispatch\njobs:\n  b:\n    runs-on: ubuntu-24.04\n    steps:\n"
            "      - uses: docker/build-push-action@v6\n        with:\n"
            f"          context: {context}\n"
            f"          file: {file}\n"
            "          platforms: linux/amd64,linux/arm64\n"
            "          tags: quay.io/ascend/x:cann8.5.2-910b\n")


def _rules(report: dict) -> list[tuple[str, str]]:  # type: ignore[type-arg]
    return [(f["rule"], f["message"]) for f in report["findings"]]


def test_a_workflow_file_of_dev_zero_is_reported_not_read(tmp_path: Path) -> None:
    """`file: /dev/zero` was read whole (tag-version-mismatch, single-arch-download): the
    child ran out of memory. Now it is one finding and the child's peak stays small."""
    repo = _repo(tmp_path)
    (repo / ".github" / "workflows" / "b.yml").write_text(_workflow("/dev/zero"))
    code, report, err, peak = lint_child(str(repo), cwd=repo)
    found = _rules(report)
    assert code == 1, err
    assert [r for r, _ in found] == ["path-outside-repository"], found
    assert "file: /dev/zero is outside the repository (an absolute path)" in found[0][1]
    assert peak < 200, f"peak memory {peak} MiB"


def test_a_workflow_file_outside_the_repository_is_reported_not_read(tmp_path: Path) -> None:
    """`file: ../../x` named a Dockerfile outside the repository, and tag-version-mismatch
    read it (here: it would report CANN 8.5.1 against the tag's 8.5.2)."""
    repo = _repo(tmp_path)
    outside = tmp_path / "elsewhere" / "Dockerfile"
    outside.parent.mkdir()
    outside.write_text("FROM quay.io/ascend/cann:8.5.1-910b-ubuntu22.04-py3.11\n")
    wf = repo / ".github" / "workflows" / "b.yml"
    wf.write_text(_workflow("../elsewhere/Dockerfile", context="../elsewhere"))
    # and a link inside the repository that leads to the same file
    (repo / "docker" / "Dockerfile").symlink_to(outside)
    linked = repo / ".github" / "workflows" / "linked.yml"
    linked.write_text(_workflow("docker/Dockerfile"))
    engine = Engine(LintConfig(ignore=("multi-platform-single-runner",)))
    found = engine.lint_text(str(wf), wf.read_text(), "workflow")
    assert sorted((f.rule, f.span.line) for f in found) == [
        ("path-outside-repository", 8), ("path-outside-repository", 9)], found
    assert "climbs out with .." in found[1].message
    found = engine.lint_text(str(linked), linked.read_text(), "workflow")
    assert [f.rule for f in found] == ["path-outside-repository"], found
    assert f"a symbolic link to {outside}" in found[0].message
    # inside the repository the same file is read, and its mismatch reported
    (repo / "docker" / "Dockerfile").unlink()
    (repo / "docker" / "Dockerfile").write_text(outside.read_text())
    found = engine.lint_text(str(linked), linked.read_text(), "workflow")
    assert [f.rule for f in found] == ["tag-version-mismatch"], found


def test_a_dockerfile_linked_to_dev_zero_is_skipped_and_the_rest_linted(tmp_path: Path) -> None:
    """It ended in a traceback (MemoryError) with exit 1, lint's "findings" status."""
    repo = _repo(tmp_path)
    (repo / "Dockerfile").symlink_to("/dev/zero")
    (repo / "docker" / "Dockerfile").write_text("FROM ubuntu:22.04\nRUN pip list\n")
    code, report, _, peak = lint_child("--fail-on", "info", str(repo), cwd=repo)
    assert code == 1  # findings, reported as findings: no traceback (checked in lint_child)
    found = {(Path(f["path"]).relative_to(repo).as_posix(), f["rule"], f["message"])
             for f in report["findings"]}
    assert found == {
        ("Dockerfile", "skipped-file", "skipped, a symbolic link to /dev/zero, outside "
         f"{repo}: not linted"),
        ("docker/Dockerfile", "noop-layer", "this RUN changes nothing in the image: it only "
         "adds a layer"),
    }, found
    assert peak < 200, f"peak memory {peak} MiB"
    # named on the command line, it is the same finding
    code, report, _, _ = lint_child(str(repo / "Dockerfile"), cwd=repo)
    assert code == 1 and [f["rule"] for f in report["findings"]] == ["skipped-file"]


def test_a_fifo_is_skipped_not_waited_on(tmp_path: Path) -> None:
    """A FIFO named Dockerfile hung lint (an open for reading waits for a writer); so did a
    FIFO a workflow's `file:` names, and one among the workflows (cache-scope-collision
    reads its siblings). The child has a timeout: without the guard this fails, not hangs."""
    repo = _repo(tmp_path)
    os.mkfifo(repo / "Dockerfile")
    os.mkfifo(repo / "docker" / "Dockerfile.fifo")
    os.mkfifo(repo / ".github" / "workflows" / "fifo.yml")
    (repo / ".github" / "workflows" / "b.yml").write_text(
        _workflow("docker/Dockerfile.fifo").replace(
            "          tags:", "          cache-to: type=gha,scope=x\n          tags:"))
    code, report, err, _ = lint_child(str(repo), cwd=repo, timeout=60)
    found = sorted((Path(f["path"]).relative_to(repo).as_posix(), f["rule"], f["message"])
                   for f in report["findings"])
    assert code == 1, err
    fifo = "skipped, not a regular file (a FIFO): not linted"
    assert found == [
        (".github/workflows/b.yml", "missing-dockerfile", "docker/Dockerfile.fifo is not a "
         f"regular file (relative to {repo})"),
        (".github/workflows/fifo.yml", "skipped-file", fifo),
        ("Dockerfile", "skipped-file", fifo),
        ("docker/Dockerfile.fifo", "skipped-file", fifo),
    ], found


def test_a_file_over_the_size_cap_is_one_finding(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    big = tmp_path / "Dockerfile"
    head = "FROM ubuntu:22.04\n"
    filler = ("#" * 99 + "\n") * ((MAX_BYTES - len(head)) // 100)
    big.write_text(head + filler + "#" * (MAX_BYTES - len(head) - len(filler) - 1) + "\n")
    assert big.stat().st_size == MAX_BYTES  # exactly the cap: linted
    res = cli("lint", "--format", "json", str(big))
    assert res.code == 0 and json.loads(res.out)["findings"] == [], res.out + res.err
    with big.open("a") as f:
        f.write("#")
    res = cli("lint", "--format", "json", str(big))
    (f,) = json.loads(res.out)["findings"]
    assert res.code == 1
    assert (f["rule"], f["line"], f["message"]) == (
        "skipped-file", 1, "skipped, over 1 MiB: not linted")
    # a workflow's `file:` over the cap is not read either
    repo = _repo(tmp_path)
    (repo / "docker" / "Dockerfile").write_text(big.read_text().replace(
        "FROM ubuntu:22.04", "FROM quay.io/ascend/cann:8.5.1-910b-ubuntu22.04-py3.11"))
    wf = repo / ".github" / "workflows" / "b.yml"
    wf.write_text(_workflow("docker/Dockerfile"))
    engine = Engine(LintConfig(ignore=("multi-platform-single-runner",)))
    assert engine.lint_text(str(wf), wf.read_text(), "workflow") == []
    (repo / "docker" / "Dockerfile").write_text(
        "FROM quay.io/ascend/cann:8.5.1-910b-ubuntu22.04-py3.11\n")
    engine = Engine(LintConfig(ignore=("multi-platform-single-runner",)))
    assert [f.rule for f in engine.lint_text(str(wf), wf.read_text(), "workflow")] == [
        "tag-version-mismatch"]


class _Spin(Rule):
    """## What it does
    Spins until the process has used ``seconds`` more CPU time (a stand-in for a rule that
    never ends on some file); at most a minute of wall time, so that without a budget the
    test fails instead of hanging.
    """

    name = "spin"
    code = "CT001"
    severity = Severity.INFO
    targets = ("dockerfile",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.finished = False

    def check(self, facts: object, ctx: LintContext) -> Iterator[Finding]:
        start, wall = time.process_time(), time.monotonic() + 60
        while time.process_time() - start < self.seconds and time.monotonic() < wall:
            pass
        self.finished = True
        yield self.finding("Dockerfile", 1, 1, "spun to the end")


def test_a_file_past_its_time_budget_is_one_internal_error() -> None:
    """A rule that would run for 20 s of CPU time is stopped after the file's 0.3 s (the
    default is 10 s), wherever its loop is; the file's only finding says so, whatever the
    file's own suppressions say."""
    engine = Engine(LintConfig(), budget=0.3)
    spin = _Spin(20)
    engine.rules.append(spin)
    before = signal.getsignal(signal.SIGPROF)
    text = "FROM ubuntu:22.04\n# cannery: ignore-file=internal-error\nARG UNUSED\n"
    found = engine.lint_text("Dockerfile", text, "dockerfile")
    assert [(f.rule, f.message) for f in found] == [
        ("internal-error", "gave up after 0.3 s of CPU time (rule spin): not linted")]
    assert not spin.finished  # stopped inside its loop, not after it
    assert signal.getsignal(signal.SIGPROF) == before  # the timer's handler is put back
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
    # a file within its budget is linted as usual, by the same engine
    engine.rules.pop()
    assert sorted(f.rule for f in engine.lint_text("Dockerfile", text, "dockerfile")) == [
        "unused-arg", "unused-suppression"]


def test_off_the_main_thread_the_budget_is_checked_between_rules() -> None:
    """Python delivers signals to the main thread only; in another thread the budget is
    checked before each rule, so the rule after the one that used it up does not run."""
    engine = Engine(LintConfig(), budget=0.3)
    first, second = _Spin(0.5), _Spin(20)
    engine.rules[:] = [first, second]
    out: list[list[Finding]] = []
    worker = threading.Thread(target=lambda: out.append(
        engine.lint_text("Dockerfile", "FROM ubuntu:22.04\n", "dockerfile")), daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "the second rule ran"
    assert [(f.rule, f.message) for f in out[0]] == [
        ("internal-error", "gave up after 0.3 s of CPU time (rule spin): not linted")]
    assert first.finished and not second.finished


def test_unused_arg_on_8000_args(tmp_path: Path) -> None:
    """It was quadratic (2,000 / 4,000 / 8,000 ARGs: 3.8 / 17.6 / 70 s). Nothing here asserts
    a time; the child's timeout (a minute, for what now takes about a second) only turns a
    regression into a failure instead of a very long run."""
    n = 8000
    lines = ["FROM ubuntu:22.04"]
    lines += [f"ARG A{i}=x" for i in range(n)]
    lines += [f"RUN echo ${{A{i}}}" for i in range(0, n, 2)]  # the even ones are used
    (tmp_path / "Dockerfile").write_text("\n".join(lines) + "\n")
    code, report, _, _ = lint_child("--select", "unused-arg", str(tmp_path / "Dockerfile"),
                                      cwd=tmp_path, timeout=60)
    # (the quadratic rule, if the child's timeout let it, would be stopped by the file's
    # time budget: one internal-error)
    assert {(f["rule"], f["message"][:4]) for f in report["findings"]} == {
        ("unused-arg", "ARG ")}, report["findings"][:3]
    unused = sorted(int(re.search(r"ARG A(\d+) ", f["message"]).group(1))  # type: ignore[union-attr]
                    for f in report["findings"])
    assert code == 1 and unused == list(range(1, n, 2))
    # a suppression on each of them (placing and applying them was quadratic too)
    code, report, _, _ = lint_child("--add-suppressions", str(tmp_path / "Dockerfile"),
                                    cwd=tmp_path, timeout=60)
    assert code == 0 and report["findings"] == []
    text = (tmp_path / "Dockerfile").read_text()
    assert text.count("# cannery: ignore=unused-arg\nARG A") == n // 2


# The rule before it was made linear, kept as the reference the new one must agree with.
def _reference(facts, ctx):  # type: ignore[no-untyped-def]
    rule = unused_arg.UnusedArg()
    for inst in facts.global_args:
        for pr in inst.pairs:
            if pr.key in ctx.implicit_args:
                continue
            used = any(unused_arg._refs(s_.base, pr.key) for s_ in facts.stages) or any(
                i.keyword == "ARG" and any(q.key == pr.key for q in i.pairs)
                for s_ in facts.stages for i in s_.instructions)
            if not used:
                yield pr.line, pr.key
    for stage in facts.stages:
        scripts = rule._scripts(stage.instructions, ctx)
        for inst in stage.instructions:
            if inst.keyword != "ARG":
                continue
            later = [i for i in stage.instructions if i.index > inst.index]
            for pr in inst.pairs:
                if pr.key in ctx.implicit_args or unused_arg.ENV_CONFIG.match(pr.key):
                    continue
                if any(unused_arg._refs(i.original + "\n" + "\n".join(
                        facts.lines[i.line - 1 : i.end_line]), pr.key) for i in later):
                    continue
                if any(i.script is not None and any(unused_arg._reads_env(c, pr.key)
                                                    for c in i.script.commands)
                       for i in later):
                    continue
                if any(index > inst.index and (text is None or re.search(
                        rf"\b{re.escape(pr.key)}\b", text)) for index, text in scripts):
                    continue
                yield pr.line, pr.key


NAMES = ["A", "B_1", "CFLAGS", "GOFLAGS", "USE_X", "é", "A-B", "X.Y", "PIP_X", "MAX_JOBS"]


@pytest.mark.parametrize("seed", range(40))
def test_unused_arg_agrees_with_the_quadratic_rule_it_replaced(seed: int, tmp_path: Path) -> None:
    import random

    from cannery.lint.facts.dockerfile import parse_dockerfile

    rnd = random.Random(seed)
    (tmp_path / ".git").mkdir()
    (tmp_path / "build.sh").write_text("echo $B_1 USE_X\n")
    lines = [f"ARG {rnd.choice(NAMES)}=1", "FROM ubuntu:22.04"]
    for _ in range(rnd.randint(1, 14)):
        name = rnd.choice(NAMES)
        lines.append(rnd.choice([
            f"ARG {name}", f"ARG {name}=v {rnd.choice(NAMES)}=w", f"RUN echo ${name}",
            f"RUN echo ${{{name}:-x}}", f"RUN echo ${name}x", f"ENV Z=${{{name}}}",
            "RUN go build ./...", "RUN make", "RUN pip install .", "COPY build.sh /b.sh",
            "RUN bash /b.sh", "RUN bash /missing.sh", "COPY missing.sh /missing.sh",
            f"FROM ubuntu:22.04 AS s{rnd.randint(0, 9)}", f"FROM ${name}",
            "RUN python3 setup.py build"]))
    text = "\n".join(lines) + "\n"
    facts = parse_dockerfile(str(tmp_path / "Dockerfile"), text, {})
    ctx = Engine(LintConfig()).context(tmp_path / "Dockerfile", "dockerfile")
    new = sorted((f.span.line, re.search(r"ARG (\S+) ", f.message).group(1))  # type: ignore[union-attr]
                 for f in unused_arg.UnusedArg().check(facts, ctx))
    assert new == sorted(_reference(facts, ctx)), text


@pytest.mark.parametrize("source", ["../build.sh", "ABSOLUTE"])
def test_a_copy_from_outside_the_build_context_is_never_read(source: str, tmp_path: Path) -> None:
    """A COPY source that is absolute or climbs out with `..` is taken from the build context
    by BuildKit (which lint does not know), not from the path it spells on this machine, so
    lint cannot know what the script reads: it reads no file for it, and does not report
    the ARGs declared before the RUN that runs it. Without that guard lint read the file the
    path spells (here one that does not mention the ARG) and reported the ARG as unused."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "docker").mkdir()
    script = repo / "build.sh"
    script.write_text("echo building\n")
    src = str(script) if source == "ABSOLUTE" else source
    df = repo / "docker" / "Dockerfile"
    df.write_text(f"FROM ubuntu:22.04\nARG SETTING=1\nCOPY {src} /opt/build.sh\n"
                  "RUN bash /opt/build.sh\n")
    found = Engine(LintConfig()).lint_text(str(df), df.read_text(), "dockerfile")
    assert [f.rule for f in found] == [], found
    # the same script copied from inside the context is read, and the ARG is reported
    df.write_text("FROM ubuntu:22.04\nARG SETTING=1\nCOPY build.sh /opt/build.sh\n"
                  "RUN bash /opt/build.sh\n")
    found = Engine(LintConfig()).lint_text(str(df), df.read_text(), "dockerfile")
    assert [(f.rule, f.span.line) for f in found] == [("unused-arg", 2)], found
