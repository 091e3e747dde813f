"""--fix and --diff: each safe fix against a snapshot of the fixed file; fixed files re-parse,
re-lint clean for the fixed rule, and keep every other finding."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import dockerfile
import pytest

from cannery.lint.config import LintConfig
from cannery.lint.engine import Engine, discover
from cannery.lint.ruleset import RULES

HERE = Path(__file__).parent
CASES = sorted((HERE / "fixes").glob("*.Dockerfile"))
FIXABLE = {r.name for r in RULES if r.fix == "safe"}
ENGINE = Engine(LintConfig())


def test_every_safe_fix_has_a_snapshot() -> None:
    assert {p.name.removesuffix(".Dockerfile") for p in CASES} == FIXABLE


@pytest.mark.parametrize("case", CASES, ids=[p.stem for p in CASES])
def test_fix_snapshot(case: Path) -> None:
    rule = case.name.removesuffix(".Dockerfile")
    before = case.read_text()
    after, fixed = ENGINE.fix_text(str(case), before, "dockerfile")
    assert after == Path(f"{case}.fixed").read_text()
    assert fixed and {f.rule for f in fixed} == {rule}
    dockerfile.parse_string(after)  # still parses
    again = ENGINE.lint_text(str(case), after, "dockerfile")
    assert not [f for f in again if f.rule == rule], again
    # settles: fixing the fixed file changes nothing
    assert ENGINE.fix_text(str(case), after, "dockerfile")[0] == after


def test_fixes_on_every_fixture_keep_other_findings() -> None:
    fixtures = HERE / "fixtures"
    for path, kind in discover([fixtures]):
        text = path.read_text()
        before = ENGINE.lint_text(str(path), text, kind)
        if any(f.rule == "parse-error" for f in before):
            continue
        after_text, fixed = ENGINE.fix_text(str(path), text, kind)
        if kind == "dockerfile":
            dockerfile.parse_string(after_text)
        after = ENGINE.lint_text(str(path), after_text, kind)
        fixed_rules = {f.rule for f in fixed}
        keep = Counter(f.rule for f in before if f.rule not in fixed_rules)
        assert Counter(f.rule for f in after if f.rule not in fixed_rules) == keep, path
        assert not [f for f in after if f.fix and f.fix.safe], path


def test_fix_writes_and_diff_does_not(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    src = HERE / "fixes" / "global-build-throttle.Dockerfile"
    target = tmp_path / "Dockerfile"
    shutil.copy(src, target)
    res = cli("lint", "--diff", str(target))
    assert res.code == 1
    assert "-ENV MAX_JOBS=1 \\" in res.out and "+RUN export MAX_JOBS=1" in res.out
    assert target.read_text() == src.read_text()
    res = cli("lint", "--fix", str(target))
    assert target.read_text() == Path(f"{src}.fixed").read_text()
    assert res.code == 0, res.out
    assert cli("lint", "--diff", str(target)).code == 0
