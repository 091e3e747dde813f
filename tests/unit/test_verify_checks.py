"""Each of verify's registry checks, on an image config made to pass and then broken in one
place: the named check (and only it) fails. Pure: no registry (the e2e tests run the same
checks on images cannery built)."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path

import pytest

from cannery.builder.jobs import INPUTS_LABEL
from cannery.catalog.load import load_catalog
from cannery.lock import read_lock
from cannery.oci import Descriptor
from cannery.plan import ImageSpec, plan
from cannery.verify.expect import expected_env
from cannery.verify.model import Check
from cannery.verify.registry import (
    _config_checks,
    credential_findings,
    platforms_check,
    secret_name,
)

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
PLATFORM = "linux/arm64"
PLANNED = "sha256:" + "5" * 64


@pytest.fixture(scope="module")
def spec() -> ImageSpec:
    cat = load_catalog(None).catalog
    (s,) = plan(cat, read_lock(GOLDEN / "cannery.lock"), ["qwen3-5-a2"])
    return s


def _good(spec: ImageSpec) -> dict[str, object]:
    """The config a correct build of ``spec`` for arm64 has."""
    env = {name: value for name, (value, _) in expected_env(spec, "arm64").items()}
    env["HOME"] = "/root"
    labels = {
        "org.opencontainers.image.source": spec.source,
        "io.cannery.soc": spec.soc,
        "io.cannery.toolkit": f"cann-{spec.toolkit.version}",
        **{k: v for k, v in (spec.host.labels() if spec.host else ()) if v is not None},
        **{f"io.cannery.component.{c.name}": c.label_version for c in spec.components},
        INPUTS_LABEL: PLANNED,
    }
    return {
        "architecture": "arm64",
        "os": "linux",
        "config": {"Env": [f"{k}={v}" for k, v in env.items()], "Labels": labels},
        "history": [{"created_by": "RUN pip install --require-hashes -r /tmp/r.txt",
                     "comment": "buildah"}],
    }


def _child(inputs: str | None = PLANNED) -> Descriptor:
    return Descriptor("application/vnd.oci.image.manifest.v1+json", "sha256:" + "a" * 64, 1,
                      {"os": "linux", "architecture": "arm64"},
                      {INPUTS_LABEL: inputs} if inputs else None)


def _failed(spec: ImageSpec, config: dict[str, object], child: Descriptor | None = None,
            planned: str | None = PLANNED) -> list[str]:
    checks = _config_checks(spec, PLATFORM, child or _child(), config, planned)
    return [c.name for c in checks if not c.ok]


def _env(config: dict[str, object]) -> list[str]:
    return config["config"]["Env"]  # type: ignore[index, no-any-return]


def _set_env(config: dict[str, object], name: str, value: str) -> None:
    env = [e for e in _env(config) if not e.startswith(name + "=")]
    config["config"]["Env"] = [*env, f"{name}={value}"]  # type: ignore[index]


def test_a_correct_config_passes_every_check(spec: ImageSpec) -> None:
    checks = _config_checks(spec, PLATFORM, _child(), _good(spec), PLANNED)
    assert [c for c in checks if not c.ok] == []
    names = {c.name for c in checks}
    assert {"config architecture", "no devlib in env", "inputs label", "no credentials",
            "inputs match catalog and lock", "label io.cannery.soc"} <= names
    assert any(n.startswith("env ASCEND_") for n in names)


def test_platforms_exactly_the_catalogs(spec: ImageSpec) -> None:
    assert platforms_check(list(spec.platforms), spec).ok
    assert not platforms_check(list(spec.platforms)[:1], spec).ok  # one missing
    assert not platforms_check([*spec.platforms, "linux/s390x"], spec).ok  # one extra
    assert not platforms_check([*spec.platforms, spec.platforms[0]], spec).ok  # twice


def test_architecture(spec: ImageSpec) -> None:
    config = _good(spec)
    config["architecture"] = "amd64"
    assert _failed(spec, config) == ["config architecture"]


def test_env_value_the_catalog_renders(spec: ImageSpec) -> None:
    config = _good(spec)
    name = next(iter(expected_env(spec, "arm64")))
    _set_env(config, name, "/somewhere/else")
    assert _failed(spec, config) == [f"env {name}"]
    config["config"]["Env"] = [e for e in _env(config) if not e.startswith(name + "=")]  # type: ignore[index]
    assert _failed(spec, config) == [f"env {name}"]  # missing altogether


def test_no_empty_search_path_element(spec: ImageSpec) -> None:
    config = _good(spec)
    path = next(e for e in _env(config) if e.startswith("LD_LIBRARY_PATH=")).partition("=")[2]
    _set_env(config, "LD_LIBRARY_PATH", path + ":")  # a trailing ':' means "." too
    assert "env LD_LIBRARY_PATH" in _failed(spec, config)
    detail = [c.detail for c in _config_checks(spec, PLATFORM, _child(), config, PLANNED)
              if not c.ok]
    assert any("empty search-path element" in d for d in detail)
    assert spec.toolkit is not None
    env = tuple(p for p in spec.toolkit.env if p[0] != "CMAKE_PREFIX_PATH")
    tk = replace(spec.toolkit, env=env)
    other = replace(spec, toolkit=tk)
    config = _good(other)
    _set_env(config, "CMAKE_PREFIX_PATH", "/a::/b")  # not a catalog variable: still checked
    assert _failed(other, config) == ["env CMAKE_PREFIX_PATH"]


def test_no_devlib(spec: ImageSpec) -> None:
    config = _good(spec)
    _set_env(config, "EXTRA_LIBS", "/usr/local/Ascend/cann/x/devlib")
    assert _failed(spec, config) == ["no devlib in env"]


def test_labels_the_catalog_sets(spec: ImageSpec) -> None:
    config = _good(spec)
    config["config"]["Labels"]["io.cannery.soc"] = "ascend310p"  # type: ignore[index]
    assert _failed(spec, config) == ["label io.cannery.soc"]
    config = _good(spec)
    comp = spec.components[0].name
    del config["config"]["Labels"][f"io.cannery.component.{comp}"]  # type: ignore[index]
    assert _failed(spec, config) == [f"label io.cannery.component.{comp}"]


def test_host_needs_labels_present_and_as_the_catalog_says(spec: ImageSpec) -> None:
    assert spec.host is not None and spec.host.driver and spec.host.chips == ("910b",)
    config = _good(spec)
    del config["config"]["Labels"]["io.cannery.driver.min"]  # type: ignore[index]
    assert _failed(spec, config) == ["label io.cannery.driver.min"]
    config = _good(spec)
    config["config"]["Labels"]["io.cannery.chips"] = "910b,a3"  # type: ignore[index]
    assert _failed(spec, config) == ["label io.cannery.chips"]
    # a need no source gives is never claimed: the label must be absent
    assert spec.host.firmware is None
    config = _good(spec)
    config["config"]["Labels"]["io.cannery.firmware.min"] = "7.7.0.1.231"  # type: ignore[index]
    assert _failed(spec, config) == ["label io.cannery.firmware.min"]


def test_input_digest_label_annotation_and_plan(spec: ImageSpec) -> None:
    config = _good(spec)
    # The index annotation disagrees with the image's own label.
    assert _failed(spec, config, _child("sha256:" + "6" * 64)) == ["inputs label"]
    # Built from other inputs than this catalog and lock give (an older lock, say).
    assert _failed(spec, config, planned="sha256:" + "7" * 64) == ["inputs match catalog and lock"]
    del config["config"]["Labels"][INPUTS_LABEL]  # type: ignore[index]
    assert set(_failed(spec, config, _child(None))) == {
        "inputs label", "inputs match catalog and lock"}


@pytest.mark.parametrize(
    "where, value, found",
    [
        ("env", "HF_TOKEN=hf_abcdefgh", "env HF_TOKEN"),
        ("env", "NPM_AUTH=abcd", "env NPM_AUTH"),
        ("env", "AWS_SECRET_ACCESS_KEY=abcd", "env AWS_SECRET_ACCESS_KEY"),
        ("env", "SIGNING_KEY=abcd", "env SIGNING_KEY"),
        ("env", "CANNERY_REGISTRY_PASSWORD=abcd", "env CANNERY_REGISTRY_PASSWORD"),
        ("env", "PIP_INDEX_URL=https://ci:hunter22@pypi.example/simple", "env PIP_INDEX_URL"),
        ("label", ("com.example.api-key", "abcd1234"), "label com.example.api-key"),
        ("label", ("io.example.auth", "abcd1234"), "label io.example.auth"),
        ("label", ("note", "password=abcd1234"), "label note"),
        ("history", ("created_by", "RUN curl -u ci:hunter22 https://x; TOKEN=abcd1234 make"),
         "history[1].created_by"),
        ("history", ("comment", "pulled from https://ci:hunter22@registry.example"),
         "history[1].comment"),
    ],
)
def test_credentials_in_env_labels_and_history(
    spec: ImageSpec, where: str, value: object, found: str
) -> None:
    config = _good(spec)
    cfg = config["config"]
    if where == "env":
        name, _, v = str(value).partition("=")
        _set_env(config, name, v)
    elif where == "label":
        k, v = value  # type: ignore[misc]
        cfg["Labels"][k] = v  # type: ignore[index]
    else:
        k, v = value  # type: ignore[misc]
        config["history"] = [*config["history"], {k: v}]  # type: ignore[misc]
    assert credential_findings(config) == [found]
    assert _failed(spec, config) == ["no credentials"]


@pytest.mark.parametrize(
    "name", ["GPG_KEY", "GIT_AUTHOR_NAME", "TOKENIZERS_PARALLELISM", "io.cannery.component.vllm",
             "ASCEND_HOME_PATH", "PYTHONPATH", "KEYRING_BACKEND"]
)
def test_ordinary_names_are_not_secrets(spec: ImageSpec, name: str) -> None:
    assert not secret_name(name)
    config = _good(spec)
    _set_env(config, name.replace(".", "_"), "value")
    assert credential_findings(config) == []


def test_a_malformed_config_is_reported_not_a_crash(spec: ImageSpec) -> None:
    config = copy.deepcopy(_good(spec))
    config["history"] = "not a list"
    config["config"]["Labels"] = ["not", "a", "dict"]  # type: ignore[index]
    assert credential_findings(config) == []
    assert isinstance(credential_findings({"config": "x"}), list)


def test_check_json_shape() -> None:
    assert Check("x", False, "d", PLATFORM).to_json() == {
        "name": "x", "ok": False, "detail": "d", "platform": PLATFORM}
