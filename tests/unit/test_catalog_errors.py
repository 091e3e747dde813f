"""Every malformed catalog exits 2 with file:line: field: reason, and never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.catalogs import line_of, minimal
from tests.conftest import run_subprocess

GOOD = minimal()

# (id, edit applied to the good catalog, text on the offending line, expected words in message)
CASES = [
    (
        "toml-syntax",
        lambda t: t.replace('os = "ubuntu"', 'os = "ubuntu'),
        'os = "ubuntu',
        "TOML syntax error",
    ),
    (
        "unknown-key",
        lambda t: t.replace('recipe = "r"', 'recipe = "r"\nplatfroms = []'),
        "platfroms",
        "unknown key 'platfroms' (did you mean 'platforms'?)",
    ),
    (
        "undefined-base",
        lambda t: t.replace('base = "b910"', 'base = "b91O"'),
        'base = "b91O"',
        "unknown base 'b91O' (did you mean 'b910'?)",
    ),
    (
        "undefined-toolkit",
        lambda t: t.replace('toolkit = "cann852"', 'toolkit = "cann9"'),
        'toolkit = "cann9"',
        "unknown toolkit 'cann9'",
    ),
    (
        "undefined-component",
        lambda t: t.replace(
            'components = ["torch", "vllm", "vllm-ascend"]',
            'components = [\n  "torch",\n  "vlm",\n  "vllm-ascend",\n]',
        ),
        '"vlm"',
        "unknown component 'vlm' (did you mean 'vllm'?)",
    ),
    (
        "duplicate-image",
        lambda t: t + '\n[images.one]\nbase = "b910"\n',
        "[images.one]\nbase",
        "images.one is defined twice",
    ),
    (
        "bad-platform",
        lambda t: t.replace('"linux/arm64"]', '"linux/aarch64"]'),
        "linux/aarch64",
        "bad platform 'linux/aarch64'",
    ),
    (
        "http-url",
        lambda t: t.replace("https://files.example.com", "http://files.example.com"),
        "http://files",
        "must be https://",
    ),
    (
        "git-scheme",
        lambda t: t.replace(
            'git = "https://git.example.com/v.git"\nref = "main"',
            'git = "git://git.example.com/v.git"\nref = "main"',
        ),
        "git://git.example.com",
        "git URL must not be git:// (unauthenticated; use https://)",
    ),
    (
        "python-range",
        lambda t: t.replace('python = "3.11"', 'python = "3.12"'),
        'base = "b910"',
        "python 3.12 is outside vllm-ascend v0.18.0's range >=3.10,<3.12",
    ),
    (
        "soc-family",
        lambda t: t.replace('soc = "ascend910b1"', 'soc = "ascend910_9391"'),
        'soc = "ascend910_9391"',
        "A3 SoC",
    ),
    (
        "tag-field",
        lambda t: t.replace("-{recipe}", "-{model}"),
        "tag = ",
        "unknown tag template field {model}",
    ),
    (
        "cyclic-extends",
        lambda t: t.replace("[images.one]\n", '[images.one]\nextends = "two"\n'),
        'extends = "two"',
        "cyclic extends",
    ),
    (
        "layout-vs-env",
        lambda t: t.replace(
            'version = "8.5.2"\nenv = "cann"',
            'version = "8.5.2"\nlayout = "ascend-toolkit"\nenv = "cann"',
        ),
        "ASCEND_TOOLKIT_HOME = ",
        "layout 'ascend-toolkit' installs to /usr/local/Ascend/ascend-toolkit/latest",
    ),
    (
        "empty-platforms",
        lambda t: t.replace('platforms = ["linux/amd64", "linux/arm64"]', "platforms = []"),
        "platforms = []",
        "at least 1",
    ),
]


@pytest.mark.parametrize(
    ("edit", "needle", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_malformed_catalog(tmp_path: Path, cli, edit, needle: str, words: str) -> None:  # type: ignore[no-untyped-def]
    text = edit(GOOD)
    assert text != GOOD, "the edit did not apply"
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    res = cli("catalog", "validate", str(path))
    assert res.code == 2, res.err
    first_line = needle.split("\n")[0]
    expected_line = line_of(text, first_line)
    if "\n" in needle:  # the second occurrence (duplicate table) is the one reported
        idx = text.rindex(needle)
        expected_line = text[:idx].count("\n") + 1
    assert f"{path}:{expected_line}" in res.err, res.err
    assert words in res.err, res.err
    assert "Traceback" not in res.err


def test_good_catalog_validates(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "catalog.toml"
    path.write_text(GOOD)
    res = cli("catalog", "validate", str(path))
    assert res.code == 0, res.err
    assert "2 images" in res.out


def test_unlisted_combination_is_a_warning_that_can_be_acknowledged(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "catalog.toml"
    path.write_text(
        GOOD.replace(
            'acknowledge = ["compat-cann", "compat-torch-npu"]', 'acknowledge = ["compat-cann"]'
        )
    )
    res = cli("catalog", "validate", str(path))
    assert res.code == 0
    assert "warning[compat-torch-npu]" in res.err
    assert "torch_npu 2.9.0" in res.err and "2.9.0.post1" in res.err


def test_missing_file_and_no_traceback_from_a_real_process(tmp_path: Path) -> None:
    res = run_subprocess("catalog", "validate", str(tmp_path / "nope.toml"))
    assert res.code == 2
    assert res.err.strip() == f"cannery: error: {tmp_path / 'nope.toml'}: no such catalog file"
    broken = tmp_path / "broken.toml"
    broken.write_text("[catalog\n")
    res = run_subprocess("plan", "--catalog", str(broken))
    assert res.code == 2
    assert f"{broken}:1" in res.err and "Traceback" not in res.err


def test_all_problems_are_reported_at_once(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    text = GOOD.replace('base = "b910"', 'base = "nope"').replace(
        'toolkit = "cann852"', 'toolkit = "nope"'
    )
    path = tmp_path / "c.toml"
    path.write_text(text)
    res = cli("catalog", "validate", str(path))
    assert res.code == 2
    assert "unknown base" in res.err and "unknown toolkit" in res.err


GAPS = [
    (
        "overlapping-platforms",
        lambda t: t.replace('"linux/arm64"]', '"linux/arm64", "linux/arm64/v8"]'),
        "platforms = [",
        "platforms 'linux/arm64' and 'linux/arm64/v8' overlap (both are arm64)",
    ),
    (
        "duplicate-platform",
        lambda t: t.replace('"linux/arm64"]', '"linux/arm64", "linux/arm64"]'),
        "platforms = [",
        "platform 'linux/arm64' listed twice",
    ),
    (
        "unknown-acknowledge",
        lambda t: t.replace('acknowledge = ["compat-cann"', 'acknowledge = ["compat-can"'),
        "acknowledge = ",
        "unknown warning code 'compat-can'",
    ),
    (
        "upper-case-repository",
        lambda t: t.replace(
            'repository = "registry.example.com/test/images"',
            'repository = "registry.example.com/Test/images"',
        ),
        "repository = ",
        "a repository path must be lower case",
    ),
    (
        "repository-with-tag",
        lambda t: t.replace(
            'repository = "registry.example.com/test/images"',
            'repository = "registry.example.com/test/images:latest"',
        ),
        "repository = ",
        "without a tag or digest",
    ),
    (
        "invalid-tag",
        lambda t: t.replace('tag = "t-{cann}', 'tag = "t:{cann}'),
        "tag = ",
        "tag 't:{cann}-{chip}-py{python}-{recipe}': use letters, digits",
    ),
]


@pytest.mark.parametrize(
    ("edit", "needle", "words"), [c[1:] for c in GAPS], ids=[c[0] for c in GAPS]
)
def test_validation_gaps(tmp_path: Path, cli, edit, needle: str, words: str) -> None:  # type: ignore[no-untyped-def]
    text = edit(GOOD)
    assert text != GOOD, "the edit did not apply"
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    res = cli("catalog", "validate", str(path))
    assert res.code == 2, res.err
    assert f"{path}:{line_of(text, needle)}: " in res.err, res.err
    assert words in res.err, res.err


def test_acknowledge_codes_are_the_codes_compat_emits() -> None:
    import re

    import cannery.catalog.compat as compat
    from cannery.catalog.models import COMPAT_CODES

    source = Path(compat.__file__).read_text()
    assert set(re.findall(r'"(compat-[a-z-]+)"', source)) == set(COMPAT_CODES)


def test_unknown_extra_index_architecture(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    text = GOOD.replace(
        "pin = true\n", 'pin = true\nextra_index = { amd46 = "https://x.example.com" }\n'
    )
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    res = cli("catalog", "validate", str(path))
    assert res.code == 2
    assert f"{path}:{line_of(text, 'extra_index')}: components.torch.extra_index:" in res.err
    assert "unknown architecture 'amd46' (did you mean 'amd64'?)" in res.err


def test_lock_does_not_import_plan() -> None:
    """Data flows catalog → lock → plan: the lock reads the catalog, never the planner."""
    import ast

    import cannery.lock

    modules = {
        n.module
        for f in Path(cannery.lock.__file__).parent.glob("*.py")
        for n in ast.walk(ast.parse(f.read_text()))
        if isinstance(n, ast.ImportFrom)
    }
    assert "cannery.plan" not in modules and "cannery.catalog.inputs" in modules


def test_every_pattern_of_the_models_says_what_it_wants() -> None:
    """A value that misses a Field pattern is told what it must be, never the regex (#28)."""
    from cannery.catalog.models import PATTERN_WORDS, Catalog
    from tests.unit.test_no_effect_property import _model_in

    patterns: set[str] = set()
    todo: list[type] = [Catalog]
    seen: set[type] = set()
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for info in model.model_fields.values():  # type: ignore[attr-defined]
            patterns.update(p for m in info.metadata if (p := getattr(m, "pattern", None)))
            sub = _model_in(info.annotation)
            if sub is not None:
                todo.append(sub)
    assert patterns - set(PATTERN_WORDS) == set()


def test_a_bad_version_says_what_it_wants(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    text = minimal().replace('recipe = "r"', 'recipe = "r"\npython = { version = "3.11", '
                             'install = "packages", packages = ["python3"] }')
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    res = cli("catalog", "validate", "--catalog", str(path))
    assert res.code == 2
    assert res.err == (f"cannery: error: {path}:{line_of(text, 'python = {')}: "
                       "images.one.python.version: python.version must look like 3.11.10, got "
                       "'3.11'\n")
