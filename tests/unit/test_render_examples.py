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
    assert len(files) == 8  # 4 release images, 4 nightly variants
    for path in files:
        text = path.read_text()
        assert "apt-get" not in text and "dpkg" not in text, path
        assert "dnf install" in text, path
    assert len(list(docker.glob("*.Dockerfile"))) == 16


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


def test_vllm_ascend_nightly_variants_are_the_release_images_with_a_few_inputs_changed() -> None:
    """A variant `extends` its release image: its own image, tag and repository, the daily
    base and wheels, everything else the release's."""
    from cannery.catalog.load import load_catalog
    from cannery.lock import Lock
    from cannery.plan import plan

    cat = load_catalog(ROOT / "examples" / "vllm-ascend" / "cannery.toml").catalog
    for release_name, nightly_name in (("a2-ubuntu", "daily-a2-ubuntu"),
                                       ("a3-openeuler", "daily-a3-openeuler")):
        release, nightly = plan(cat, Lock(), [release_name, nightly_name])
        assert (release.repository, nightly.repository) == (
            "quay.io/ascend/vllm-ascend", "quay.io/atlas_inference/vllm-ascend")
        # {date}: the day of the newest lock entry; this example is not locked
        assert nightly.tag.startswith("nightly-main")
        assert nightly.tag.endswith("-cann2026.08.03-unlocked")
        assert "cann:2026.08.03-" in nightly.base_image and nightly.toolkit.version == "2026.08.03"
        for same in ("packages", "soc", "platforms", "runtime_env", "workdir", "package_manager"):
            assert getattr(release, same) == getattr(nightly, same), same
        names = [c.name for c in nightly.components]
        assert names == [c.name for c in release.components] + [
            "memfabric-daily", "memcache-daily", "triton-ascend-daily", "torch-npu-daily"]
        # the daily triton-ascend wheel replaces the release's triton-ascend==3.2.2 step
        assert not any("triton-ascend==" in str(s.args) for s in nightly.steps)
        assert any("triton-ascend==3.2.2" in str(s.args) for s in release.steps)
    # 310P's daily build adds torch_npu only (DAILY_DEPS_MODE=torch_npu_only)
    release, nightly = plan(cat, Lock(), ["310p-openeuler", "daily-310p-openeuler"])
    assert [c.name for c in nightly.components] == [
        *(c.name for c in release.components), "torch-npu-daily"]
    assert nightly.steps == release.steps and nightly.entrypoint == release.entrypoint
    assert len([n for n in cat.images if n.startswith("daily-")]) == 8


def test_cann_bases_is_the_whole_cann_9_1_0_set_in_at_most_300_lines() -> None:
    """Ascend's 120 CANN 9.1.0 images (2 releases x 5 chips x 2 OSes x 3 Pythons x runtime and
    devel), written as one matrix in at most 300 catalog lines."""
    from cannery.render.checks import load_checked

    path = ROOT / "examples" / "cann-bases" / "cannery.toml"
    assert len(path.read_text().splitlines()) <= 300
    cat = load_checked(path).catalog
    versions = {cat.toolkits[img.toolkit].version for img in cat.images.values()
                if img.toolkit is not None}
    assert len(cat.images) >= 120 and versions <= {"9.1.0-beta.1", "9.1.0-beta.3"}
    assert {img.base for img in cat.images.values()} == {
        f"{os_}-{chip}" for os_ in ("ubuntu22.04", "openeuler24.03")
        for chip in ("310p", "910", "910b", "950", "a3")}
