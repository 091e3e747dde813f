"""Every rule against fixture files with inline expectations (see expectations.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from cannery.lint.config import LintConfig
from cannery.lint.engine import Engine, discover
from cannery.lint.model import Confidence
from cannery.lint.ruleset import RULES
from tests.lint.expectations import expected, with_severity

FIXTURES = Path(__file__).parent / "fixtures"
FILES = sorted(p for p, _ in discover([FIXTURES]))
# every finding, the low-confidence ones too: fixtures state them (`rule:low`)
ENGINE = Engine(LintConfig(min_confidence=Confidence.LOW))


def _kind(path: Path) -> str:
    return dict(discover([path]))[path]


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(FIXTURES)) for p in FILES])
def test_fixture(path: Path) -> None:
    findings = ENGINE.lint_text(str(path), path.read_text(), _kind(path))
    got = Counter((f.span.line, f.rule, str(f.severity), str(f.confidence)) for f in findings)
    want = with_severity(path)
    details = "\n".join(f"  {f.span.line}:{f.span.column} {f.rule}:{f.severity}:"
                        f"{f.confidence}: {f.message}" for f in findings)
    assert got == want, f"unexpected: {dict(got - want)}, missing: {dict(want - got)}\n{details}"


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(FIXTURES)) for p in FILES])
def test_fixture_by_default_hides_only_low_confidence(path: Path) -> None:
    """The default (medium) reports exactly the expected findings that are not low."""
    default = Engine(LintConfig()).lint_text(str(path), path.read_text(), _kind(path))
    got = Counter((f.span.line, f.rule, str(f.confidence)) for f in default)
    want = Counter({(line, rule, sure): n for (line, rule, _, sure), n
                    in with_severity(path).items() if sure != "low"})
    assert got == want


def test_every_rule_has_a_fixture_that_triggers_it() -> None:
    """Removing (or breaking) any rule makes an expectation fail. The file-level findings
    no fixture can hold (a rule's failure or time budget, a file lint does not read) are
    tested in test_lint_reads.py."""
    covered = {rule for p in FILES for (_, rule) in expected(p)}
    missing = [r.name for r in RULES if r.name not in covered
               and r.name not in ("internal-error", "skipped-file")]
    assert not missing, f"rules without a fixture expectation: {missing}"


def test_every_fixture_dockerfile_still_parses_without_markers() -> None:
    """Markers are comments: they never change what BuildKit parses."""
    import dockerfile

    for p in FILES:
        if p.suffix == ".Dockerfile" and "parse-error" not in p.name:
            dockerfile.parse_string(p.read_text())


def test_a_configured_target_decides_which_stages_ship() -> None:
    """Size rules follow `target`: the builder ships when it is the target."""
    text = "FROM ubuntu:22.04 AS builder\nRUN pip list\nFROM ubuntu:22.04\nRUN ls /\n"
    last = Engine(LintConfig()).lint_text("Dockerfile", text, "dockerfile")
    assert [(f.rule, f.span.line) for f in last] == [("noop-layer", 4)]
    builder = Engine(LintConfig(target="builder")).lint_text("Dockerfile", text, "dockerfile")
    assert [(f.rule, f.span.line) for f in builder] == [("noop-layer", 2)]


def test_no_compile_env_is_extensible() -> None:
    text = ("FROM ubuntu:22.04\nRUN MY_EXT=off pip install --no-build-isolation -e /src/x && "
            "pip install torch==2.9.0\n")
    armed = Engine(LintConfig()).lint_text("Dockerfile", text, "dockerfile")
    assert [f.rule for f in armed] == ["torch-repinned-after-build"]
    cfg = LintConfig(no_compile_env=("VLLM_TARGET_DEVICE=empty", "MY_EXT=off"))
    assert Engine(cfg).lint_text("Dockerfile", text, "dockerfile") == []


def test_full_clone_hint_never_suggests_a_shallow_clone_before_a_checkout() -> None:
    text = ("FROM ubuntu:22.04\nRUN git clone https://example.com/r.git /r && "
            "git -C /r checkout 4045d67063052dcb800c918c107b8d5a87046006\n"
            "RUN git clone https://example.com/s.git /s && make -C /s\n")
    found = {f.span.line: f.hint for f in ENGINE.lint_text("Dockerfile", text, "dockerfile")
             if f.rule == "full-clone-for-one-commit"}
    assert "clone --depth" not in found[2] and "fetch --depth 1" in found[2]
    assert found[3] == "git clone --depth 1"
