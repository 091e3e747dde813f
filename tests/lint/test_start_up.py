"""What keeps a one-file `cannery lint` starting about as fast as hadolint (measured by
bench/lint_vs_hadolint.py, never here): the modules it does not import, the SoC table read
without tomllib, regular expressions compiled on first use, and the plain classes that stand
in for dataclasses behaving as the frozen dataclasses did."""

from __future__ import annotations

import json
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cannery.knowledge import ascend_data, simple_tables, soc_chips
from cannery.lint.config import LintConfig
from cannery.lint.model import Edit, Finding, Fix, Severity, Span
from cannery.lint.rule import lazy_re

SEED = Path(__file__).parent / "seed" / "Dockerfile.ascend_8.5.2_a2_qwen3-5"
# Each would cost a one-file lint milliseconds of start-up it has no use for.
NOT_IMPORTED = ("typer", "rich", "pydantic", "httpx", "yaml", "dataclasses", "inspect",
                "typing", "tomllib", "importlib.resources", "difflib", "tree_sitter",
                "tree_sitter_bash")

def test_a_one_file_lint_imports_only_what_it_uses(tmp_path: Path) -> None:
    # a directory with no pyproject.toml or .cannery.toml above it (a config is read with
    # tomllib, as it must be)
    target = tmp_path / "Dockerfile"
    shutil.copy(SEED, target)
    if any((d / name).exists() for d in tmp_path.parents
           for name in ("pyproject.toml", ".cannery.toml")):
        pytest.skip("a lint config above the temporary directory")
    # as the console script runs it; -X importtime names every module imported, on stderr
    code = ("import sys; sys.argv = ['cannery', 'lint', '--format', 'json', sys.argv[1]]; "
            "from cannery.entry import main; main()")
    res = subprocess.run([sys.executable, "-X", "importtime", "-c", code, str(target)],
                         capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 1, res.stderr[-2000:]
    assert len(json.loads(res.stdout)["findings"]) >= 10  # it linted: the seed's defects
    loaded = {m.group(1) for m in re.finditer(r"^import time:.*\|\s*(\S+)$", res.stderr,
                                               re.M)}
    assert "cannery.lint.engine" in loaded
    assert [m for m in NOT_IMPORTED if m in loaded] == []


def test_the_soc_table_is_read_without_tomllib_and_matches_it() -> None:
    from cannery.knowledge import _data_text

    families = simple_tables(_data_text(), "families")
    assert families is not None, "ascend.toml's families tables are written plainly"
    assert families == ascend_data()["families"]  # what tomllib reads
    assert soc_chips()["ascend910b1"] == "910b" and soc_chips()["ascend910_9391"] == "a3"


@pytest.mark.parametrize("text", [
    '[families.A2]\nsocs = [\n  "a",\n]\n',  # a multi-line array
    '[families.A2]\nchip = "910b"  # a comment after the value\n',
    '[families.A2]\nchip = "9\\u0031"\n',  # an escape
    '[families.A2]\nchip = \'910b\'\n',  # a literal string
    '[families.A2]\nchip="910b"\n',  # spacing it does not read
    '[families.A2]\nchip = "910b"\nchip = "a3"\n',  # a duplicate key (tomllib rejects it)
    '[families.A2]\n[families.A2]\n',  # a duplicate table
    '[families.A2.extra]\nchip = "910b"\n',  # a sub-table
    'families.A2.chip = "910b"\n',  # a dotted key outside the tables
    '[other]\nx = """\n[families.A2]\n"""\n',  # a multi-line string holding a header
    '[families.A2]\nsize = 3\n',  # not a string
])
def test_anything_else_about_the_families_goes_to_tomllib(text: str) -> None:
    assert simple_tables(text, "families") is None


def test_simple_tables_skip_other_tables() -> None:
    text = ('# comment\n[families.A2]\nchip = "910b"\nsocs = ["x", "y"]\n\n'
            '[envs.cann-8]\nPATH = [\n  "a",\n]\n[families.A3]\nchip = "a3"\n')
    assert simple_tables(text, "families") == {"A2": {"chip": "910b", "socs": ["x", "y"]},
                                               "A3": {"chip": "a3"}}


def test_a_lazy_pattern_is_the_compiled_pattern() -> None:
    source, flags = r"(?<![\d.])v?(\d+)\.(\d+)", re.I
    lazy, real = lazy_re(source, flags), re.compile(source, flags)
    text = "torch V2.5 and 1.10"
    assert lazy.pattern == real.pattern and lazy.flags == real.flags
    assert lazy.search(text).groups() == real.search(text).groups()  # type: ignore[union-attr]
    assert lazy.findall(text) == real.findall(text)
    assert lazy.sub("#", text) == real.sub("#", text)
    assert lazy.fullmatch("v1.2") is not None and lazy.match("x") is None
    with pytest.raises(re.error):
        lazy_re("(unclosed").search("x")  # a bad pattern fails where it is first used


def test_findings_are_values_as_the_frozen_dataclasses_were() -> None:
    fix = Fix("drop it", (Edit(1, 2, ""),), safe=True)
    a = Finding("r", "C1", Severity.ERROR, "m", Span("f", 3, 2), fix=fix)
    b = Finding("r", "C1", Severity.ERROR, "m", Span("f", 3, 2), fix=Fix(
        "drop it", (Edit(1, 2, ""),), safe=True))
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != a.replace(severity=Severity.WARNING)
    assert a.replace(severity=Severity.WARNING).severity is Severity.WARNING
    assert Span("f", 3, 5, 1, 0) == Span("f", 3, 5, 3, 5)  # the end never precedes the start
    with pytest.raises(AttributeError):
        a.message = "other"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(a)) == a
    assert repr(a).startswith("Finding(") and "rule='r'" in repr(a)


def test_a_config_copy_keeps_the_original() -> None:
    cfg = LintConfig()
    other = cfg.replace(ignore=("unused-arg",), source="x")
    assert (cfg.ignore, cfg.source) == ((), "defaults")
    assert (other.ignore, other.source) == (("unused-arg",), "x")
    assert other.base_image_shells == cfg.base_image_shells
    assert LintConfig().base_image_env is not cfg.base_image_env  # a fresh dict per config
    with pytest.raises(AttributeError):
        cfg.target = "x"  # type: ignore[misc]


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="AB_1é²$= \t\n.\u00a0x", max_size=16),
       st.text(alphabet="AB_1é.$", max_size=3), st.integers(min_value=0, max_value=16))
def test_an_env_key_is_found_where_the_regular_expression_finds_it(text: str, key: str,
                                                                   pos: int) -> None:
    from cannery.lint.facts.dockerfile import _find_key

    m = re.compile(rf"(?<![\w$]){re.escape(key)}(?=[=\s]|$)").search(text, min(pos, len(text)))
    assert _find_key(text, key, min(pos, len(text))) == (m.start() if m else -1)
