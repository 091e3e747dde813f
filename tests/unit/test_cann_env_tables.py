"""The built-in CANN env tables hold, per CANN series and package, exactly what Ascend's
published CANN base images persist, and the install step checks them against the env scripts.

The upstream facts are test data (tests/unit/data/cann_upstream_env.toml), written down from
Ascend/cann-container-image's Dockerfiles at the commits it names; the tables are
src/cannery/catalog/data/ascend.toml. The install step's check is plain bash: it runs here in
bash against env scripts the tests write (the e2e build runs it in the image, on both arches).
"""

from __future__ import annotations

import subprocess
from dataclasses import replace
from importlib.resources import files
from pathlib import Path

import pytest

from cannery.catalog.load import CANN_ENV_PACKAGES, load_catalog
from cannery.lock import read_lock
from cannery.plan import ImageSpec, plan
from cannery.render.dockerfile import _env_check, _finish, render_dockerfile, toolkit_env
from cannery.render.instructions import Run
from cannery.util import toml
from tests.conftest import GOLDEN

DATA = Path(__file__).resolve().parent / "data" / "cann_upstream_env.toml"
UPSTREAM = toml.loads(DATA.read_text())
BUILTIN = toml.loads(
    files("cannery.catalog").joinpath("data/ascend.toml").read_text(encoding="utf-8")
)["cann_envs"]
CASES = [(s, p) for s in UPSTREAM for p in CANN_ENV_PACKAGES]


def _element(e: str) -> str:
    return e.rstrip("/")  # the images write two driver paths with a trailing '/' in 8.5


def test_every_series_the_images_have_is_built_in_and_names_its_source() -> None:
    assert set(BUILTIN) == set(UPSTREAM)
    for series, facts in UPSTREAM.items():
        assert len(facts["commit"]) == 40
        assert facts["file"] in BUILTIN[series]["source"]
        assert facts["commit"] in BUILTIN[series]["source"]


@pytest.mark.parametrize(("series", "package"), CASES)
def test_each_package_sets_exactly_what_the_images_persist(series: str, package: str) -> None:
    want = UPSTREAM[series][package]
    have = BUILTIN[series][package]
    build_only = set(UPSTREAM[series]["build_only"])
    assert sorted(have) == sorted(want)  # a variable removed (or added) fails here
    for name, value in want.items():
        if isinstance(value, list):
            assert isinstance(have[name], list), name
            assert len(set(have[name])) == len(have[name]), f"{name}: an element twice"
            expected = {_element(e) for e in value if e not in build_only}
            assert {_element(e) for e in have[name]} == expected, name
        else:
            assert have[name] == value, name


def test_no_build_only_element_is_persisted() -> None:
    for series, facts in UPSTREAM.items():
        for package in CANN_ENV_PACKAGES:
            for value in BUILTIN[series][package].values():
                if isinstance(value, list):
                    assert not set(value) & set(facts["build_only"]), (series, package)


@pytest.fixture(scope="module")
def spec() -> ImageSpec:
    cat = load_catalog(None).catalog
    (s,) = plan(cat, read_lock(GOLDEN / "cannery.lock"), ["qwen3-5-a2"])  # installs CANN 8.5.2
    return s


def test_the_env_table_is_the_packages_in_the_order_the_images_source_them(
    spec: ImageSpec,
) -> None:
    env = dict(toolkit_env(spec))
    home, atb = "/usr/local/Ascend/cann-8.5.2", "/usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_1"
    # NNAL's script runs last, so its entries come first, then bisheng's, then the toolkit's
    assert env["PATH"].startswith(f"{atb}/bin:{home}/tools/bishengir/bin:")
    assert env["LD_LIBRARY_PATH"].startswith(f"{atb}/lib:{atb}/examples:{atb}/tests/atbopstest:")
    assert env["LCCL_PARALLEL"] == "0" and env["ATB_SHARE_MEMORY_NAME_SUFFIX"] == ""
    for name, value in env.items():  # every reference expanded; only the inherited value left
        assert "${" not in value.replace(f"${{{name}:+:${{{name}}}}}", ""), name
    names = {n for p in CANN_ENV_PACKAGES for n in UPSTREAM["cann-8"][p]}
    assert set(env) == names


def test_the_install_step_sources_every_env_script_after_the_installers(spec: ImageSpec) -> None:
    text = render_dockerfile(spec)
    assert spec.toolkit is not None
    scripts = " ".join(spec.toolkit.env_scripts)
    assert "/usr/local/Ascend/cann-8.5.2/share/info/ascendnpu-ir/bin/set_env.sh" in scripts
    install = next(b for b in text.split("\n\n") if "/tmp/toolkit.run" in b)
    assert install.index("bash /tmp/nnal.run") < install.index(f"for s in {scripts}; do")


def _check(spec: ImageSpec, tmp: Path, scripts: dict[str, str], env: dict[str, str]
           ) -> subprocess.CompletedProcess[str]:
    """The install step's env check, as rendered, run by bash in ``env`` (the image ENV) with
    ``scripts`` (name → text) as the toolkit's env scripts."""
    paths = []
    for name, text in scripts.items():
        (tmp / name).write_text(text)
        paths.append(str(tmp / name))
    if env.pop("missing", None):
        paths.append(str(tmp / "not-installed.sh"))
    assert spec.toolkit is not None
    one = replace(spec, toolkit=replace(spec.toolkit, env_scripts=tuple(paths)))
    body = Run(_finish(["set -eu;", *_env_check(one)])).render().removeprefix("RUN ")
    return subprocess.run(["bash", "-o", "pipefail", "-c", body + "\necho check-passed"],
                          env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True,
                          check=False)


SCRIPT = """\
if [ -n "$ZSH_VERSION" ]; then :; fi
export A_HOME=/opt/a
export LD_LIBRARY_PATH=/opt/a/lib:/opt/a/devlib:/opt/drv/:${LD_LIBRARY_PATH}
export EMPTY_FLAG=""
echo "a script's own output"
"""
GOOD = {"A_HOME": "/opt/a", "LD_LIBRARY_PATH": "/opt/a/lib:/opt/drv", "EMPTY_FLAG": ""}


def test_env_check_passes_when_the_env_holds_what_the_scripts_set(
    spec: ImageSpec, tmp_path: Path
) -> None:
    """devlib is build-only, a trailing '/' names the same directory, an unset variable the
    script reads is no error."""
    proc = _check(spec, tmp_path, {"s.sh": SCRIPT}, GOOD)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "check-passed" and proc.stderr == ""


def test_env_check_fails_naming_each_missing_or_different_variable(
    spec: ImageSpec, tmp_path: Path
) -> None:
    env = {"A_HOME": "/opt/b", "LD_LIBRARY_PATH": "/opt/drv"}  # no EMPTY_FLAG, no /opt/a/lib
    proc = _check(spec, tmp_path, {"s.sh": SCRIPT}, env)
    assert proc.returncode == 1 and "check-passed" not in proc.stdout
    said = proc.stderr.splitlines()
    assert said == [
        "cannery: ENV A_HOME is '/opt/b'; the CANN env scripts set '/opt/a'",
        "cannery: ENV lacks EMPTY_FLAG, which the CANN env scripts set to ''",
        "cannery: ENV LD_LIBRARY_PATH lacks /opt/a/lib, which the CANN env scripts add",
        "cannery: the image ENV is not what the CANN env scripts set (CANN 8.5.2): fix the "
        "toolkit's env table",
    ], proc.stderr


def test_env_check_fails_on_a_script_that_was_not_installed(
    spec: ImageSpec, tmp_path: Path
) -> None:
    proc = _check(spec, tmp_path, {"s.sh": SCRIPT}, {**GOOD, "missing": "1"})
    assert proc.returncode == 1
    assert f"cannery: env script {tmp_path}/not-installed.sh was not installed" in proc.stderr
