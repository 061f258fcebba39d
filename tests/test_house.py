"""The house rules, checked on the source: sizes, one dynamic import, no import cycle.

The import graph is read with `ast` (nothing is imported). The one dynamic import — the framework
table's `importlib.import_module` in `attnviz/frameworks.py` — counts as an edge from
`attnviz.frameworks` to every backend package the table names, so a cycle through it is found too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from attnviz.frameworks import FRAMEWORKS

ROOT = Path(__file__).parents[1]
LIBRARY = sorted((ROOT / "attnviz").rglob("*.py"))
PAGES = sorted((ROOT / "attnviz" / "app").glob("*/page.py"))  # the screens


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, modules: set[str]) -> set[str]:
    """Every `attnviz` module `path` imports at any depth (inside functions too): `from a import b`
    is an edge to `a.b` when that is a module, else to `a`."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("attnviz")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("attnviz"):
            subs = {f"{node.module}.{a.name}" for a in node.names}
            found |= subs & modules
            if subs - modules:
                found.add(node.module)
    return found


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in LIBRARY}
    edges = {name: {m for m in imports(path, set(modules)) if m != name} for name, path in modules.items()}
    edges["attnviz.frameworks"] |= {fw.module for fw in FRAMEWORKS.values()}  # the one dynamic import
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        stack.pop()
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_cycle_counting_the_framework_tables_dynamic_import():
    edges = graph()
    assert "attnviz.backends.torch_backend.train" in edges["attnviz.backends.torch_backend"]
    assert find_cycle(edges) is None, " → ".join(find_cycle(edges))


def test_the_cycle_finder_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_one_dynamic_import_in_the_library():
    found = [
        f"{p.relative_to(ROOT)}:{n.lineno}"
        for p in LIBRARY
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if (isinstance(n, ast.Attribute) and n.attr == "import_module")
        or (isinstance(n, ast.Name) and n.id == "__import__")
    ]
    assert len(found) == 1 and found[0].startswith("attnviz/frameworks.py:"), found


@pytest.mark.parametrize(("files", "limit"), [(LIBRARY, 500), (PAGES, 250)], ids=["attnviz", "pages"])
def test_no_module_over_its_size(files, limit):
    long = {
        str(p.relative_to(ROOT)): n
        for p in files
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > limit
    }
    assert not long, f"over {limit} lines: {long}"
