"""Every example family's rendered files are what its catalog renders (`render --check`)."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT

EXAMPLES = sorted((ROOT / "examples").glob("*/cannery.toml"))


@pytest.mark.parametrize("catalog", EXAMPLES, ids=[p.parent.name for p in EXAMPLES])
def test_example_render_check_is_clean(catalog, cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("render", "--check", "--catalog", str(catalog))
    assert res.code == 0, res.err[-3000:]


def test_openeuler_images_have_no_apt() -> None:
    docker = ROOT / "examples" / "vllm-ascend" / "docker"
    files = sorted(docker.glob("*openeuler*.Dockerfile"))
    assert len(files) == 4
    for path in files:
        text = path.read_text()
        assert "apt-get" not in text and "dpkg" not in text, path
        assert "dnf install" in text, path
    assert len(list(docker.glob("*.Dockerfile"))) == 8


def test_rendered_openeuler_steps_lint_clean_of_package_rules(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """cannery's own dnf step passes the rules that know dnf/yum (cleanup in a later layer,
    persisted repository config, disabled signature checks)."""
    from cannery.lint.config import LintConfig
    from cannery.lint.engine import Engine

    engine = Engine(LintConfig())
    rules = {"cleanup-in-later-layer", "persisted-package-index", "tls-verification-disabled"}
    for path in sorted((ROOT / "examples").glob("*/*/*openeuler*.Dockerfile")):
        found = [f for f in engine.lint_text(str(path), path.read_text(), "dockerfile")
                 if f.rule in rules]
        assert found == [], (path, found)
