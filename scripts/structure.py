"""The code's structure in numbers: modules over 600 lines, functions over 80, import cycles,
and arrows running back up the layering that .importlinter declares.

    .venv/bin/python scripts/structure.py

Imports are read with ast (function-level imports count too: they are arrows all the same).
Packages are cannery's top-level modules and packages (cannery.catalog, cannery.lock, ...);
a back-edge is an import from a lower layer of .importlinter's layers contract to a higher one.
"""

from __future__ import annotations

import ast
import configparser
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
MAX_MODULE, MAX_FUNCTION = 600, 80


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted((SRC / "cannery").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The cannery modules ``name`` imports, anywhere in its body."""
    out: set[str] = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for cand in [target, *(f"{target}.{a.name}" for a in node.names)]:
                if cand in known:
                    out.add(cand)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in known)
    out.discard(name)
    return out


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    nodes = set(edges) | {w for ws in edges.values() for w in ws}
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


def layers() -> list[str]:
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    text = config["importlinter:contract:layers"]["layers"]
    return [line.strip() for line in text.splitlines() if line.strip()]


def package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def package_edges(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The arrows between cannery's top-level packages and modules."""
    out: dict[str, set[str]] = defaultdict(set)
    for src, targets in edges.items():
        for dst in targets:
            if package(src) != package(dst):
                out[package(src)].add(package(dst))
    return out


def back_edges(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Imports from a lower layer of .importlinter's layers contract to a higher one."""
    order = layers()  # highest first

    def rank(module: str) -> int | None:
        hits = [i for i, layer in enumerate(order)
                if module == layer or module.startswith(layer + ".")]
        return hits[0] if hits else None

    back = []
    for s, targets in edges.items():
        for d in targets:
            rs, rd = rank(s), rank(d)
            if rs is not None and rd is not None and rd < rs:
                back.append((s, d))
    return sorted(back)


def long_functions(known: dict[str, Path]) -> list[tuple[str, int]]:
    found = []
    for name, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION:
                    found.append((f"{name}:{node.name}", length))
    return sorted(found, key=lambda x: -x[1])


def main() -> int:
    known = modules()
    edges = {name: imports(name, path, known) for name, path in known.items()}
    pkg_edges = package_edges(edges)
    back = back_edges(edges)
    lines = {n: len(p.read_text(encoding="utf-8").splitlines()) for n, p in known.items()}
    big = sorted(((n, c) for n, c in lines.items() if c > MAX_MODULE), key=lambda x: -x[1])
    long = long_functions(known)
    packages = sorted({package(n) for n in known})
    print(f"modules: {len(known)}, import edges between them: "
          f"{sum(len(t) for t in edges.values())}")
    print(f"packages (top-level): {len(packages)}, edges between them: "
          f"{sum(len(t) for t in pkg_edges.values())}")
    for title, graph in (("modules", edges), ("packages", pkg_edges)):
        found = cycles(graph)
        print(f"import cycles among {title}: {len(found)}")
        for comp in found:
            print("  " + " <-> ".join(comp))
    print(f"arrows back up the layering: {len(back)}")
    for s, d in back:
        print(f"  {s} -> {d}")
    print(f"modules over {MAX_MODULE} lines: {len(big)}")
    for n, c in big:
        print(f"  {c:5d} {n}")
    print(f"functions over {MAX_FUNCTION} lines: {len(long)}")
    for n, c in long:
        print(f"  {c:5d} {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
