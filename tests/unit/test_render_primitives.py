"""The YAML writer, the action pins and their refresh, and the catalog's ci table."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cannery.errors import InputError
from cannery.render.actions import data_path, dump_pins, load_pins, newest_release
from cannery.render.yamltext import Commented, Gap, Literal, Note, dump, scalar
from tests.catalogs import minimal

# ------------------------------------------------------------------ YAML writer


@settings(max_examples=400, deadline=None)
@given(st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=40))
def test_any_string_reads_back_unchanged(text: str) -> None:
    assert yaml.safe_load(f"k: {scalar(text)}\n") == {"k": text}


@pytest.mark.parametrize("text", ["on", "yes", "No", "null", "~", "1.5", "0x1F", "12:30",
                                  "a: b", "x #y", "-", "- a", "? q", "*ref", "&a", "!tag",
                                  "", " lead", "trail ", "${{ matrix.arch }}", "[a]", "{a}"])
def test_tricky_strings_stay_strings(text: str) -> None:
    assert yaml.safe_load(f"k: {scalar(text)}\n") == {"k": text}


def test_document_structure_round_trips() -> None:
    doc = {
        "name": "x",
        Gap(): None,
        "on": {"push": {"branches": ["main"]}, "workflow_dispatch": {}},
        Note("a comment\nover two lines"): None,
        "jobs": {
            "a": {
                "steps": [
                    {"uses": Commented("o/r@" + "0" * 40, "v1.2.3"), "with": {"k": True}},
                    {"run": Literal("one \\\n  two\n"), "env": {"N": 1}},
                ],
                "empty": [],
            }
        },
    }
    text = dump(doc, header="head")
    assert text.startswith("# head\n")
    assert "  # a comment\n" not in text and "# a comment\n# over two lines\n" in text
    assert f"uses: o/r@{'0' * 40} # v1.2.3" in text
    assert yaml.safe_load(text) == {
        "name": "x",
        "on": {"push": {"branches": ["main"]}, "workflow_dispatch": {}},
        "jobs": {"a": {"steps": [{"uses": "o/r@" + "0" * 40, "with": {"k": True}},
                                 {"run": "one \\\n  two\n", "env": {"N": 1}}],
                       "empty": []}},
    }


# ------------------------------------------------------------------ action pins


def test_shipped_pins_are_full_shas() -> None:
    pins = load_pins()
    assert {"actions/checkout", "actions/setup-python", "actions/upload-artifact",
            "actions/download-artifact", "docker/setup-buildx-action"} <= set(pins)
    assert dump_pins(pins) == data_path().read_text()  # the refresh writes this exact format


def test_short_sha_pin_is_rejected(tmp_path: Path) -> None:
    bad = tmp_path / "actions.toml"
    bad.write_text('["actions/checkout"]\nversion = "v4"\nsha = "11bd719"\n')
    with pytest.raises(InputError, match="full 40-hex sha"):
        load_pins(bad)


def test_newest_release_peels_annotated_tags() -> None:
    a, b, c, d = ("a" * 40, "b" * 40, "c" * 40, "d" * 40)
    listing = (f"{a}\trefs/tags/v4.2.2\n{b}\trefs/tags/v4.10.0\n{c}\trefs/tags/v4.10.0^{{}}\n"
               f"{d}\trefs/tags/v5.0.0\n{d}\trefs/tags/v4\n{d}\trefs/heads/main\n")
    assert newest_release(listing, 4) == ("v4.10.0", c)
    assert newest_release(listing, None) == ("v5.0.0", d)
    assert newest_release(listing, 6) is None


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def test_refresh_actions_reads_real_git_tags(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """Each action is a real local git repository with release tags (GitHub cannot be reached
    here; `git ls-remote` is the same command against https://github.com)."""
    pins = load_pins()
    base = tmp_path / "hub"
    expected = {}
    for action, pin in pins.items():
        repo = base / action
        repo.mkdir(parents=True)
        _git("init", "-q", cwd=repo)
        major = int(pin.version.lstrip("v").split(".")[0])
        for i, tag in enumerate([f"v{major}.0.0", f"v{major}.9.1", f"v{major + 1}.0.0"]):
            (repo / "f").write_text(str(i))
            _git("add", "f", cwd=repo)
            _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", tag, cwd=repo)
            _git("-c", "user.name=t", "-c", "user.email=t@t", "tag", "-a", "-m", tag, tag,
                 cwd=repo)
        expected[action] = _git("rev-list", "-n1", f"v{major}.9.1", cwd=repo)
    data = tmp_path / "actions.toml"
    data.write_text(data_path().read_text())
    res = cli("render", "refresh-actions", "--data", str(data), "--base", f"file://{base}")
    assert res.code == 0, res.err
    got = load_pins(data)
    for action in pins:
        assert got[action].sha == expected[action]  # the commit, not the annotated tag object
        assert got[action].version.endswith(".9.1")
    res = cli("render", "refresh-actions", "--data", str(data), "--base", f"file://{base}",
              "--major")
    assert res.code == 0
    assert all(p.version.endswith(".0.0") for p in load_pins(data).values())


def test_refresh_actions_unreachable_is_a_clear_error(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "actions.toml"
    data.write_text(data_path().read_text())
    res = cli("render", "refresh-actions", "--data", str(data), "--base", f"file://{tmp_path}/x")
    assert res.code == 2
    assert "cannot list tags" in res.err and "Traceback" not in res.err
    assert data.read_text() == data_path().read_text()  # nothing half-written


# ------------------------------------------------------------------ the ci table


def _catalog(tmp_path: Path, extra: str, images: str = "") -> Path:
    text = minimal()
    path = tmp_path / "cannery.toml"
    path.write_text(text + extra + images)
    return path


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ('[ci]\nworkflow = "../outside.yml"\n', "ci.workflow"),
        ('[ci]\ndocs = "{tmp}/abs/TAGS.md"\n', "ci.docs"),
        ('[ci]\nschedule = "daily"\n', "ci.schedule"),
        ('[ci]\nrunners = { "linux/arm64" = "a b" }\n', "ci.runners"),
        ('[registries.other]\nrepository = "r/x"\n'
         'password_secret = "X }} ${{ github.token"\n', "registries.other.password_secret"),
    ],
)
def test_bad_ci_settings_are_input_errors(tmp_path: Path, cli, extra: str, needle: str) -> None:  # type: ignore[no-untyped-def]
    """Trust boundary: rendered paths stay inside the repository and a secret name cannot
    break out of its `${{ secrets.NAME }}` expression."""
    root = tmp_path / "repo"
    root.mkdir()
    path = _catalog(root, extra.replace("{tmp}", str(tmp_path)))
    res = cli("render", "--catalog", str(path))
    assert res.code == 2, res.err
    line = res.err.strip().splitlines()[0]
    assert re.match(rf"cannery: error: {re.escape(str(path))}:\d+: {re.escape(needle)}", line), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repo"]  # nothing outside
    assert sorted(p.name for p in root.iterdir()) == ["cannery.toml"]  # nothing written


def test_platform_without_runner_is_located(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    path = _catalog(tmp_path, '[ci]\nrunners = { "linux/amd64" = "ubuntu-latest" }\n')
    text = path.read_text()
    assert '"linux/arm64"' in text
    res = cli("render", "workflow", "--catalog", str(path))
    assert res.code == 2
    assert "no CI runner for linux/arm64" in res.err and "platforms[" in res.err


def test_env_table_extends(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    path = _catalog(tmp_path, '[envs.child]\nextends = "nope"\n')
    res = cli("catalog", "validate", str(path))
    assert res.code == 2 and "envs.child.extends: unknown env table 'nope'" in res.err



@pytest.mark.parametrize(("table", "what"), [("bases", "base"), ("components", "component"),
                                              ("images", "image")])
def test_extends_unknown_sibling_is_located(tmp_path: Path, cli, table: str, what: str) -> None:  # type: ignore[no-untyped-def]
    path = _catalog(tmp_path, f'\n[{table}.kid]\nextends = "nobody"\n')
    res = cli("catalog", "validate", str(path))
    assert res.code == 2
    assert re.search(rf"{re.escape(str(path))}:\d+: {table}\.kid\.extends: unknown {what} "
                     "'nobody'", res.err), res.err


def test_catalog_name_that_github_would_expand_is_refused(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "${{ github.token }}.toml"
    path.write_text(minimal())
    res = cli("render", "workflow", "--catalog", str(path), "--out", str(tmp_path / "w.yml"))
    assert res.code == 2 and "rename the catalog" in res.err
    assert not (tmp_path / "w.yml").exists()
