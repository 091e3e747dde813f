"""Every rule against fixture files with inline expectations (see expectations.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from cannery.lint.config import LintConfig
from cannery.lint.engine import Engine, discover
from cannery.lint.registry import RULES
from tests.lint.expectations import expected

FIXTURES = Path(__file__).parent / "fixtures"
FILES = sorted(p for p, _ in discover([FIXTURES]))
ENGINE = Engine(LintConfig())


def _kind(path: Path) -> str:
    return dict(discover([path]))[path]


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(FIXTURES)) for p in FILES])
def test_fixture(path: Path) -> None:
    findings = ENGINE.lint_text(str(path), path.read_text(), _kind(path))
    got = Counter((f.span.line, f.rule) for f in findings)
    want = expected(path)
    details = "\n".join(f"  {f.span.line}:{f.span.column} {f.rule}: {f.message}" for f in findings)
    assert got == want, f"unexpected: {dict(got - want)}, missing: {dict(want - got)}\n{details}"


def test_every_rule_has_a_fixture_that_triggers_it() -> None:
    """Removing (or breaking) any rule makes an expectation fail."""
    covered = {rule for p in FILES for (_, rule) in expected(p)}
    missing = [r.name for r in RULES if r.name not in covered and r.name != "internal-error"]
    assert not missing, f"rules without a fixture expectation: {missing}"


def test_every_fixture_dockerfile_still_parses_without_markers() -> None:
    """Markers are comments: they never change what BuildKit parses."""
    import dockerfile

    for p in FILES:
        if p.suffix == ".Dockerfile" and "parse-error" not in p.name:
            dockerfile.parse_string(p.read_text())
