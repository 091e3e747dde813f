"""The structure stays as #32 left it: no module of src/cannery over 600 lines, no function over
80, no import cycle among modules or packages, no arrow back up .importlinter's layers
(scripts/structure.py computes them; lint-imports checks the contracts themselves)."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from tests.conftest import ROOT


def _structure() -> ModuleType:
    spec = importlib.util.spec_from_file_location("structure", ROOT / "scripts" / "structure.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_module_over_600_lines_and_no_function_over_80() -> None:
    s = _structure()
    known = s.modules()
    big = {n: len(p.read_text().splitlines()) for n, p in known.items()
           if len(p.read_text().splitlines()) > s.MAX_MODULE}
    assert big == {}
    assert s.long_functions(known) == []


def test_no_import_cycle_and_no_arrow_back_up_the_layers() -> None:
    s = _structure()
    known = s.modules()
    edges = {name: s.imports(name, path, known) for name, path in known.items()}
    assert s.cycles(edges) == []
    assert s.cycles(s.package_edges(edges)) == []
    assert s.back_edges(edges) == []
