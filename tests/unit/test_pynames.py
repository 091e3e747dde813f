"""Python distribution names as PyPI compares them (cannery.util.pynames)."""

from __future__ import annotations

import pytest

from cannery.util.pynames import canonical_name, requirement_name


@pytest.mark.parametrize("name", ["zope.interface", "Zope_Interface", "zope--interface"])
def test_spellings_of_one_distribution_are_one_name(name: str) -> None:
    assert canonical_name(name) == "zope-interface"


@pytest.mark.parametrize(("line", "name"), [
    ("uv==0.13.9", "uv"),
    ("UV ; sys_platform == 'linux'", "uv"),
    ("torch_npu[extra]>=2.9", "torch-npu"),
    ("  setuptools", "setuptools"),
])
def test_a_requirement_line_names_its_distribution(line: str, name: str) -> None:
    assert requirement_name(line) == name
