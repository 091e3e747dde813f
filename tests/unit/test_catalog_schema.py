"""`cannery schema` accepts what `catalog validate` accepts.

Every catalog the project ships or tests with passes both (check-jsonschema, the tool editors
and pre-commit use, reads the TOML itself); and a property test changes single fields of a
valid catalog in every table to values of every TOML type and checks that the two agree.

What spans tables (a name that must exist in another table, `extends` chains, the
compatibility table, the CI runner of each platform, two images rendering one tag) only
`catalog validate` checks; the property test leaves those fields alone and says so below.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from check_jsonschema.regex_variants import RegexImplementation, RegexVariantName
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cannery.catalog.load import default_catalog_text, load_catalog
from cannery.commands.schema import catalog_schema
from cannery.errors import CatalogError
from cannery.util import toml
from tests.catalogs import minimal
from tests.conftest import ROOT

EXAMPLES = sorted((ROOT / "examples").glob("*/cannery.toml"))


def _catalogs(tmp: Path) -> list[Path]:
    embedded = tmp / "embedded.toml"
    embedded.write_text(default_catalog_text())
    test_catalog = tmp / "minimal.toml"
    test_catalog.write_text(minimal())
    return [*EXAMPLES, embedded, test_catalog]


def test_every_shipped_and_test_catalog_passes_both(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    assert EXAMPLES, "no example catalogs found"
    schema = tmp_path / "schema.json"
    res = cli("schema")
    assert res.code == 0
    schema.write_text(res.out)
    for path in _catalogs(tmp_path):
        res = cli("catalog", "validate", "--catalog", str(path))
        assert res.code == 0, res.err
        proc = subprocess.run(
            [sys.executable, "-m", "check_jsonschema", "--schemafile", str(schema), str(path)],
            capture_output=True, text=True, timeout=120,
        )
        assert proc.returncode == 0, f"{path}: {proc.stdout}{proc.stderr}"


def test_check_jsonschema_rejects_what_validate_rejects(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """The issue's cases, through the external tool: coerced types, a misspelled key."""
    schema = tmp_path / "schema.json"
    schema.write_text(cli("schema").out)
    for edit in (
        lambda t: t.replace("toolkit_build = true", 'toolkit_build = "no"'),
        lambda t: t.replace("limit = 1", 'limit = "2"'),
        lambda t: t.replace('os = "ubuntu"', 'os = "openeulr"'),
        lambda t: t.replace('recipe = "r"', 'recipe = "r"\nplatfroms = []'),
        lambda t: t.replace("pin = true\n", 'pin = true\nrequirements = ["r.txt"]\n'),
    ):
        path = tmp_path / "bad.toml"
        path.write_text(edit(minimal()))
        assert cli("catalog", "validate", "--catalog", str(path)).code == 2
        proc = subprocess.run(
            [sys.executable, "-m", "check_jsonschema", "--schemafile", str(schema), str(path)],
            capture_output=True, text=True, timeout=120,
        )
        assert proc.returncode == 1, proc.stdout


# --------------------------------------------------------------------------- property test

def _validator() -> Any:
    """A JSON Schema validator with ECMA-262 patterns, as check-jsonschema runs it."""
    regex = RegexImplementation(RegexVariantName.default)
    cls = jsonschema.validators.extend(
        jsonschema.Draft202012Validator,
        {"pattern": regex.pattern_keyword, "patternProperties": regex.patternProperties_keyword},
    )
    return cls(catalog_schema())


VALIDATOR = _validator()
GOOD = toml.loads(minimal())
# a release tag pattern, so that catalog.version (the FIELDS below vary it) has an effect
GOOD["ci"] = {"release_tags": ["v*"]}

# (table path, key, candidate values that are plausible for the key). Left out on purpose,
# because only `catalog validate` can check them (they span tables): every reference by name
# (image base/toolkit/components/registry/revision_from/soc, toolkit env, package family,
# catalog registry, extends), base chip (against the SoC family), toolkit version and layout
# (against the env table and the compatibility table), component pip/version/package (the
# compatibility table), image platforms beyond amd64/arm64 and ci.runners (a runner per
# platform), image tag and recipe, and aliases of an image others extend (two images
# rendering one tag); an image's soc and toolkit (a toolkit_build component needs both), a
# stage's base and two stages of one name; and deleting a base's python (the image's
# components need one: only validate sees both tables).
FIELDS: list[tuple[tuple[str, ...], str, list[Any]]] = [
    (("catalog",), "name", ["x", "", "${{ github.token }}", "a\rb"]),
    (("catalog",), "version", ["0.9.2", "a b", "", 1]),
    (("components", "vllm"), "install", ["none", "pip"]),
    (("components", "vllm"), "dest", ["/workspace/vllm"]),
    (("components", "vllm"), "requirements", [["requirements.txt"]]),
    (("catalog",), "source", ["https://example.com/x"]),
    (("catalog",), "python_index", ["https://pypi.example.com/simple", "http://p.example.com",
                                    "https://u:p@x.example.com/simple", "https://"]),
    (("registries", "local"), "repository", ["quay.io/a/b", "Quay.io/A", "a/b:tag", "x"]),
    (("registries", "local"), "user_secret", ["USER", "1USER", "a-b"]),
    (("bases", "b910"), "image", ["r.example.com/c:1", "c@sha256:00", "c", "h:5000/c"]),
    (("bases", "b910"), "python", ["3.11", "3.x", "2.7", "3.11\n"]),
    (("bases", "b910"), "os", ["ubuntu", "openeuler", "debian", "centos"]),
    (("bases", "b910"), "os_version", ["22.04", "24.03-lts", "a b"]),
    (("bases", "b910"), "toolkit_version", ["8.5.1", "9.0.0"]),
    (("toolkits", "cann852"), "devlib", ["/d", "/d/{version}/{uname_arch}", "/d/$(id)"]),
    (("toolkits", "cann852"), "provided", ["image", "host", "hosted"]),
    (("toolkits", "cann852"), "install_args", [["--quiet"], []]),
    (("toolkits", "cann852"), "env_scripts", [["/s.sh"]]),
    (("toolkits", "cann852", "packages", 0), "url", [
        "https://f.example.com/{version}/{uname_arch}.run", "https://f.example.com/{vers}",
        "http://f.example.com/x", "https://f.example.com/{arch",
    ]),
    (("toolkits", "cann852", "packages", 0), "name", ["toolkit"]),
    (("components", "torch"), "pin", [True, False]),
    (("components", "torch"), "bundle_wheels", [["torch_npu-*_{uname_arch}.whl"], [], ["$(x)"]]),
    (("components", "torch"), "extra_index", [
        {"amd64": "https://i.example.com/simple"},
        {"arm64": ["https://a.example.com/simple", "https://b.example.com/simple"]},
        {"amd46": "https://i.example.com"}, {"amd64": "http://i.example.com"}, {"amd64": []},
    ]),
    (("components", "torch"), "pip_args", [["--no-deps"]]),
    (("components", "torch"), "requirements", [["r.txt"], []]),
    (("components", "torch"), "install", ["pip", "editable", "none", "wheel"]),
    (("components", "torch"), "toolkit_build", [True, False]),
    (("components", "torch"), "wheel", ["https://w.example.com/x-{arch}.whl"]),
    (("components", "torch"), "git", ["https://g.example.com/x.git"]),
    (("components", "vllm-ascend"), "ref", ["main", "0123abc", "0" * 40, "a/../b", "-x",
                                            "v1$(id)", "x.lock", "releases/v1"]),
    (("components", "vllm-ascend"), "git", ["https://g.example.com/x.git", "http://g.example.com",
                                            "file:///srv/x.git", "git@h.example.com:x.git", "git://h.example.com/x",
                                            "https://u:p@h.example.com/x"]),
    (("components", "vllm-ascend"), "install", ["pip", "editable", "none", "wheel"]),
    (("components", "vllm-ascend"), "subdir", ["python", "../x", "a/", "a b", "a/../b"]),
    (("components", "vllm-ascend"), "extras", [["all_npu"], ["-x"]]),
    (("components", "vllm-ascend"), "pyproject", ["pyproject.npu.toml", "/abs"]),
    (("components", "vllm-ascend"), "build_env", [{"A": "1"}, {"1A": "x"}, {"A": 1}]),
    (("components", "vllm-ascend"), "jobs", [{"limit": 2, "reason": "ram"},
                                             {"limit": 0, "reason": "ram"},
                                             {"limit": 2, "reason": "r"}, {"limit": 2}]),
    (("components", "vllm-ascend"), "pin", [True, False]),
    (("components", "vllm-ascend"), "pip", [["x"]]),
    (("components", "torch"), "path", [".", "../x", "src/"]),
    (("components", "vllm-ascend"), "path", ["."]),
    (("components", "vllm-ascend"), "dest", ["/vllm-workspace/x", "rel", "/a b"]),
    (("images", "one"), "env", [{"A": "1"}, {"LD_PRELOAD": {"prepend": ["/x"]}},
                                {"P": {"append": ["/a"], "replace": ["/b"]}}, {"P": {}},
                                {"P": {"prepend": ["/a"], "append": ["/b"]}},
                                {"P": {"prepend": ["/a"], "replace": ["/b"]}},
                                {"1A": "x"}, {"A": 1}]),
    (("images", "one"), "workdir", ["/workspace", "workspace"]),
    (("images", "one"), "python", [
        {"version": "3.11.10", "install": "source", "url": "https://f.example.com/P-{version}.tgz"},
        {"version": "3.11.10", "install": "packages", "packages": ["python3.11", "libpython3.11"]},
        {"version": "3.11.10", "install": "packages", "packages": []},
        {"version": "3.11", "install": "source", "url": "https://f.example.com/P.tgz"},
        {"version": "3.11.10", "install": "source"},
        {"version": "3.11.10", "install": "source", "url": "https://f.example.com/{arch}.tgz"},
        {"version": "3.11.10", "install": "packages", "packages": ["p"], "url": "https://f.x/a"},
        {"version": "3.11.10", "install": "pip", "packages": ["p"]},
        {"version": "3.11.10", "install": "source", "url": "https://f.example.com/P.tgz",
         "build_packages": ["gcc", "make"]},
        {"version": "3.11.10", "install": "source", "url": "https://f.example.com/P.tgz",
         "build_packages": ["a b"]},
        {"version": "3.11.10", "install": "packages", "packages": ["p"], "build_packages": []},
    ]),
    (("images", "one"), "stages", [
        [{"name": "b", "outputs": ["/x"]}],
        [{"name": "b", "packages": ["gcc"], "steps": [{"ldconfig": True}],
          "outputs": ["/a", "/b"]}],
        [{"name": "base", "outputs": ["/x"]}], [{"name": "cannery-py", "outputs": ["/x"]}],
        [{"name": "B", "outputs": ["/x"]}], [{"name": "b", "outputs": []}],
        [{"name": "b", "outputs": ["/"]}], [{"name": "b", "outputs": ["x"]}],
        [{"name": "b", "outputs": ["/x", "/x"]}], [{"name": "b"}],
        [{"name": "b", "outputs": ["/x"], "packages": ["a b"]}],
    ]),
    (("images", "one"), "user", ["vllm", "Root", "a b"]),
    (("images", "one"), "entrypoint", [["/bin/bash"], []]),
    (("images", "one"), "cmd", [["bash"], "bash"]),
    (("images", "two"), "aliases", [["latest", "main-{chip}"], ["a b"], ["x", "x"]]),
    (("images", "one"), "steps", [
        [{"uninstall": ["triton"]}], [{"ldconfig": True}], [{"ldconfig": False}],
        [{"symlink": {"target": "/a", "link": "/b"}}], [{"run": "echo ok"}],
        [{"uninstall": ["x"], "ldconfig": True}], [{}], [{"run": "a\nb"}],
        [{"alternatives": {"name": "clang", "link": "/usr/bin/clang",
                           "path": "/usr/bin/clang-15", "priority": 20}}],
    ]),
    (("images", "one"), "platforms", [["linux/amd64"], ["linux/arm64", "linux/arm64"],
                                      ["linux/aarch64"], []]),
    (("images", "one"), "packages", [["jq", "g++"], ["a b"], ["-x"]]),
    (("images", "one"), "pip_tools", [["pip"]]),
    (("images", "one"), "smoke_imports", [["torch"]]),
    (("images", "one"), "labels", [{"a.b": "c"}, {"a": 1}, {"a b": "c"}, {"a": "b\nc"}]),
    (("ci",), "schedule", ["0 3 * * 1", "0 3 * *", "0  3 * * 1 "]),
    (("ci",), "environment", ["prod", None, "-x"]),
    (("ci",), "python", ["3.12", "3.x"]),
    (("ci",), "workflow", [".github/workflows/x.yml", "../x.yml", "a/", "/abs"]),
    (("ci",), "branches", [["main"], [], ["releases/*"], ["${{ github.head_ref }}"]]),
    (("envs", "cann"), "EXTRA_PATH", [["/a", "/b"], "/a", 1, ["/a", 2]]),
    (("envs", "cann"), "1BAD", ["x"]),
]

_text = st.text(alphabet="ab1_.-/:{} @\n", max_size=8)
_junk: st.SearchStrategy[Any] = st.one_of(
    _text,
    st.integers(-3, 3),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.lists(_text, max_size=2),
    st.dictionaries(st.sampled_from(["a", "limit", "amd64"]), _text, max_size=2),
)


@st.composite
def _mutation(draw: st.DrawFn) -> tuple[tuple[Any, ...], str, Any]:
    where, key, candidates = draw(st.sampled_from(FIELDS))
    kind = draw(st.sampled_from(["candidate", "candidate", "junk", "delete", "unknown"]))
    if kind == "candidate":
        return where, key, draw(st.sampled_from(candidates))
    if kind == "junk":
        return where, key, draw(_junk)
    if (where, key) == (("bases", "b910"), "python"):  # see FIELDS: deleting it spans tables
        return where, key, draw(st.sampled_from(candidates))
    if kind == "unknown":
        return where, key + "x", draw(_junk)
    return where, key, _DELETE


_DELETE = object()


def _toml(value: Any) -> str:
    """Inline TOML for a JSON-like value (json.dumps strings are valid TOML basic strings)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return json.dumps(value)


def _apply(doc: dict[str, Any], where: tuple[Any, ...], key: str, value: Any) -> None:
    node: Any = doc
    for part in where:
        node = node.setdefault(part, {}) if isinstance(part, str) else node[part]
    if value is _DELETE:
        node.pop(key, None)
    elif value is None:
        node.pop(key, None)  # TOML has no null: "absent" is the nearest
    else:
        node[key] = value


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_mutation(), min_size=1, max_size=3))
def test_schema_and_validate_agree(tmp_path_factory: pytest.TempPathFactory, mutations) -> None:  # type: ignore[no-untyped-def]
    doc = copy.deepcopy(GOOD)
    for where, key, value in mutations:
        _apply(doc, where, key, value)
    text = "\n".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in doc.items()) + "\n"
    path = tmp_path_factory.mktemp("prop") / "catalog.toml"
    path.write_text(text)
    try:
        load_catalog(path)
        problems: list[str] = []
    except CatalogError as exc:
        problems = exc.problems
    data = toml.loads(text)
    schema_errors = [e.message for e in VALIDATOR.iter_errors(data)]
    event("valid" if not problems else "invalid")
    assert bool(problems) == bool(schema_errors), (
        f"mutations {mutations}\nvalidate: {problems}\nschema: {schema_errors}"
    )
