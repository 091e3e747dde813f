"""What a build shows while it runs: step parsing, plain lines, the live table's summary."""

from __future__ import annotations

import io
import re

from rich.console import Console

from cannery.builder.jobs import PlatformJob
from cannery.builder.progress import PlainReporter, RichReporter, parse_step

JOB = PlatformJob("img", "linux/arm64", "sha256:" + "0" * 64, "localhost/x:y")


def test_steps_are_read_from_buildah_and_buildkit_lines() -> None:
    assert parse_step("[2/4] STEP 3/7: RUN make") == (3, 7, "RUN make")
    assert parse_step("STEP 1/2: FROM base AS arch-arm64") == (1, 2, "FROM base AS arch-arm64")
    assert parse_step("#7 [image 3/9] RUN pip install x") == (3, 9, "RUN pip install x")
    assert parse_step("Copying blob sha256:abc") is None


def test_plain_reporter_prints_one_line_per_step_and_the_failing_tail(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    buf = io.StringIO()
    rep = PlainReporter(Console(file=buf, width=200))
    rep.start("img", JOB)
    rep.line("img", JOB, "[1/1] STEP 2/5: RUN make -j1")
    rep.line("img", JOB, "gcc -c x.c")  # not a step: not shown
    rep.failed("img", JOB, "buildah build exited 1", ["a", "sha256sum: WARNING: 1 computed"])
    text = buf.getvalue()
    assert "::group::img linux/arm64" in text and "::endgroup::" in text
    assert "[img linux/arm64] step 2/5: RUN make -j1" in text
    assert "gcc -c" not in text
    assert "FAILED: buildah build exited 1" in text and "  | sha256sum: WARNING" in text


def test_live_table_ends_with_failures_and_published_indexes() -> None:
    buf = io.StringIO()
    rep = RichReporter(Console(file=buf, width=160, force_terminal=True))
    rep.start("img", JOB)
    rep.line("img", JOB, "STEP 4/9: RUN pip install")
    rep.failed("img", JOB, "buildah build exited 1", ["last line of the log"])
    rep.published("other", "sha256:" + "1" * 64, [])
    rep.close()
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buf.getvalue())
    assert "FAILED img linux/arm64: buildah build exited 1" in text
    assert "last line of the log" in text
    assert "tags moved: none (already there)" in text
