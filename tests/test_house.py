"""The house rules, checked on the source (docs/architecture.md draws the house they keep).

- sizes: no module over 500 lines, no page (`attnviz/app/<screen>/page.py`) over 250, at most 12
  modules side by side in any folder of `attnviz/`;
- imports: no cycle, one dynamic import, every arrow down the layers (core and backends → models →
  interp, training, kernels, bench, plots → lessons, classroom, exec → app), `attnviz.interp`
  importing nothing from `attnviz.training`, Streamlit imported only under `attnviz/app/`;
- names: at most two modules named for a cache, no module in a subfolder named like a top-level
  module, no `pages/` folder beside app.py (Streamlit would route a first deep link without app.py).

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


def test_at_most_twelve_modules_side_by_side():
    crowded = {
        str(folder.relative_to(ROOT)): n
        for folder in [ROOT / "attnviz", *(ROOT / "attnviz").rglob("*/")]
        if folder.name != "__pycache__"
        and (n := len([p for p in folder.glob("*.py") if p.name != "__init__.py"])) > 12
    }
    assert not crowded, f"more than 12 modules in a folder: {crowded}"


# Lower layers first; a module may import its own layer and the layers below (the top-level modules
# and the backends are one layer: `attnviz.frameworks` is the door between them).
LAYERS = (
    {"core", "backends", "audio"},
    {"pretrained"},
    {"interp", "training", "kernels", "bench", "plots"},
    {"lessons", "classroom", "exec"},
    {"app"},
)
TOP = {p.stem for p in (ROOT / "attnviz").glob("*.py") if p.stem != "__init__"}


def layer(module: str) -> int:
    """The layer of `attnviz.<part>…`: a top-level module is "core", a package is itself."""
    part = module.split(".")[1] if "." in module else "core"
    part = "core" if part in TOP else part
    return next(i for i, names in enumerate(LAYERS) if part in names)


def test_every_package_has_a_layer_and_every_arrow_points_down():
    edges = graph()
    up = sorted(f"{a} → {b}" for a, targets in edges.items() for b in targets if layer(b) > layer(a))
    assert not up, "imports up the layers:\n" + "\n".join(up)


def test_the_layer_check_finds_an_upward_arrow():
    assert layer("attnviz.pretrained.model") > layer("attnviz.run")
    assert layer("attnviz.app.frame.results") > layer("attnviz.exec.local")
    assert layer("attnviz.training.loop") == layer("attnviz.interp.scores")


def test_interp_imports_nothing_from_training():
    edges = graph()
    found = sorted(
        f"{a} → {b}"
        for a, targets in edges.items()
        if a.startswith("attnviz.interp")
        for b in targets
        if b.startswith("attnviz.training")
    )
    assert not found, found


def streamlit_imports(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "streamlit" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "streamlit":
            return True
    return False


def test_only_the_app_imports_streamlit():
    app = ROOT / "attnviz" / "app"
    found = [str(p.relative_to(ROOT)) for p in LIBRARY if app not in p.parents and streamlit_imports(p)]
    assert not found, f"Streamlit imported below attnviz/app/: {found}"
    assert streamlit_imports(app / "frame" / "results.py"), "the check reads the imports it looks for"


def test_at_most_two_modules_named_for_a_cache():
    named = [str(p.relative_to(ROOT)) for p in LIBRARY if "cache" in p.stem]
    assert len(named) <= 2, named


# A package's own error types are the same job as `attnviz.errors` (errors as data), not another.
SAME_JOB = {"errors"}


def test_no_module_in_a_subfolder_reuses_a_top_level_name():
    reused = [
        str(p.relative_to(ROOT)) for p in LIBRARY if p.parent != ROOT / "attnviz" and p.stem in TOP - SAME_JOB
    ]
    assert not reused, f"named like a top-level module, for another job: {reused}"


def test_no_pages_folder_beside_app_py():
    """Streamlit treats an app with `pages/` beside its entrypoint as a legacy multipage app until a
    run calls st.navigation: a deep link opened first would run that page without app.py."""
    from attnviz.app.frame.pages import PAGES as ROUTED

    assert not (ROOT / "pages").exists()
    assert {p.parent.name for p in PAGES} == {p.name for p in ROUTED}, "every screen folder is routed"
