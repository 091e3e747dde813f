"""plan, schema and the embedded catalog, through the CLI."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from cannery.catalog.load import default_catalog_text
from tests.catalogs import minimal


def test_plan_json_of_embedded_catalog(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("plan", "--json", "--lock", "/nonexistent.lock")
    assert res.code == 0, res.err
    data = json.loads(res.out)
    images = {i["name"]: i for i in data["images"]}
    assert set(images) == {"qwen3-5-a2", "qwen3-5-a3", "vllm-0-23-a2"}
    a2, a3 = images["qwen3-5-a2"], images["qwen3-5-a3"]
    assert a2["reference"] == "quay.io/ascend/verl:verl-8.5.2-910b-ubuntu22.04-py3.11-qwen3-5"
    assert a3["tag"] == "verl-8.5.2-a3-ubuntu22.04-py3.11-qwen3-5"
    assert a2["platforms"] == a3["platforms"] == ["linux/amd64", "linux/arm64"]
    assert (a2["soc"], a3["soc"]) == ("ascend910b1", "ascend910_9391")
    assert a2["base"]["image"].endswith("cann:8.5.1-910b-ubuntu22.04-py3.11")
    assert a3["base"]["image"].endswith("cann:8.5.1-a3-ubuntu22.04-py3.11")
    ops = [d["url"] for d in a3["toolkit"]["downloads"] if d["name"] == "ops"]
    assert ops and all("Ascend-cann-A3-ops_8.5.2" in u for u in ops)
    comps = {c["name"]: c for c in a2["components"]}
    assert comps["vllm-ascend"]["pin"] == "v0.18.0@54879467c41784a446aa5b486a391d9bfbf488fa"
    assert comps["vllm-ascend"]["job_limit"] == 1
    assert comps["torch-2-9"]["pin"].startswith("torch==2.9.0 torch_npu==2.9.0")
    assert comps["verl"]["pin"] == "4045d67063052dcb800c918c107b8d5a87046006"
    # the third image shares nothing shaped around the seed: its base ships its toolkit
    third = images["vllm-0-23-a2"]
    assert third["toolkit"] == {
        "version": "9.1.0", "provided": "image", "install": False, "downloads": []
    }
    assert a2["unlocked"] and "inputs" not in a2  # the build computes it per platform


def test_extends_inherits_and_overrides(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "c.toml"
    path.write_text(minimal())
    data = json.loads(cli("plan", "--catalog", str(path), "--json").out)
    one, two = data["images"]
    assert two["tag"] == "t-8.5.2-910b-py3.11-s" and one["tag"] == "t-8.5.2-910b-py3.11-r"
    assert [c["name"] for c in one["components"]] == [c["name"] for c in two["components"]]


def test_plan_table(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("plan", "qwen3-5-a2")
    assert res.code == 0
    assert "verl-8.5.2-910b-ubuntu22.04-py3.11-qwen3-5" in res.out
    assert "jobs≤1" in res.out
    # no Python dependencies in the golden-free default lock: shown as such, never as locked
    deps = next(ln for ln in res.out.splitlines() if "python deps" in ln)
    assert "UNPINNED" in deps
    train = next(ln for ln in res.out.splitlines() if "train-extras" in ln)
    assert "UNPINNED" in train


def test_schema_validates_the_catalogs(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """The generated JSON Schema, checked by check-jsonschema against real catalog files."""
    res = cli("schema")
    schema = tmp_path / "schema.json"
    schema.write_text(res.out)
    embedded = tmp_path / "default.toml"
    embedded.write_text(default_catalog_text())
    small = tmp_path / "small.toml"
    small.write_text(minimal())
    bad = tmp_path / "bad.toml"
    bad.write_text(minimal().replace('recipe = "r"', 'recipe = "r"\nplatfroms = []'))
    tool = shutil.which(
        "check-jsonschema", path=f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    )
    assert tool, "check-jsonschema is a test dependency"
    ok = subprocess.run(
        [tool, "--schemafile", str(schema), str(embedded), str(small)],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    no = subprocess.run(
        [tool, "--schemafile", str(schema), str(bad)], capture_output=True, text=True
    )
    assert no.returncode == 1 and "platfroms" in no.stdout + no.stderr


def test_version(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("--version")
    assert res.code == 0 and res.out.startswith("cannery ")


def test_usage_error_exits_2(cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("plan", "--no-such-flag").code == 2


def test_errors_become_github_annotations_in_actions(tmp_path: Path, cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    path = tmp_path / "c.toml"
    path.write_text(minimal().replace('base = "b910"', 'base = "nope"', 1))
    res = cli("catalog", "validate", str(path))
    assert res.code == 2
    assert f"::error file={path},line=" in res.err and "unknown base 'nope'" in res.err


def _all_commands() -> list[tuple[str, object]]:
    from cannery.cli import command

    out: list[tuple[str, object]] = []

    def walk(prefix: str, cmd: object) -> None:
        out.append((prefix, cmd))
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(f"{prefix} {name}".strip(), sub)

    walk("", command())
    return out


def test_help_lists_commands_in_workflow_order(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("--help")
    listed = [ln.split()[0] for ln in res.out.split("Commands:")[1].splitlines() if ln.strip()]
    expected = [
        c
        for c in ("catalog", "plan", "lock", "render", "ci", "build", "verify", "status",
                  "copy", "size", "host-check", "lint", "compare", "schema")
        if c in listed
    ]
    assert listed == expected and len(listed) >= 6


def test_help_has_no_type_noise_and_every_option_has_help(cli) -> None:  # type: ignore[no-untyped-def]
    for name, cmd in _all_commands():
        if name == "lint":
            continue  # argparse help of its own (see `cannery lint --help`)
        res = cli(*name.split(), "--help")
        assert res.code == 0, name
        assert not re.search(r"<[a-z][a-z\[\], ]*>", res.out), (name, res.out)
        for param in getattr(cmd, "params", []):
            assert param.help, f"cannery {name}: {param.name} has no help text"


def test_commands_on_images_share_one_shape() -> None:
    shapes = {}
    for name, cmd in _all_commands():
        params = {p.name: p for p in getattr(cmd, "params", [])}
        if "images" not in params:
            continue
        assert params["images"].param_type_name == "argument", name
        for opt in ("catalog", "lock"):
            if opt in params:
                assert params[opt].param_type_name == "option", (name, opt)
        shapes[name] = sorted(params)
    assert {"plan", "lock", "render dockerfile"} <= set(shapes)
