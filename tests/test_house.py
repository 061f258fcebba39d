"""The house rules, checked on the source (docs/architecture.md draws the house they keep).

- sizes: no module over 500 lines, no page (`pages/<screen>.py`) over 250, at most 12 modules side
  by side in any folder of `attnviz/`;
- imports: no cycle, one dynamic import, every arrow down the layers (core, backends and exec → models →
  interp, training, kernels, bench, plots → lessons, classroom → app), the engine (`attnviz.exec`)
  importing only the core, a screen's `tasks.py` importing neither Streamlit nor the app, `attnviz.interp`
  importing nothing from `attnviz.training`, Streamlit imported only under `attnviz/app/`;
- names: at most two modules named for a cache, no module in a subfolder named like a top-level
  module;
- one way to write a fact: a size in bytes, a token, a head's name only through `attnviz.formats`
  (no `f"L{…}.H{…}"`, no bytes divided into a "MiB" string, no second newline glyph);
- tests: `tests/` mirrors the package (one folder per package, at most 12 modules at the top);
- pages: `pages/` beside app.py holds one thin script per routed screen, each opening inside the
  shell (`routed("<name>")`: Streamlit's legacy `pages/` routing of a first deep link still gets it),
  importing no framework; every screen folder under `attnviz/app/` is a routed screen.

The import graph is read with `ast` (nothing is imported). The one dynamic import — the framework
table's `importlib.import_module` in `attnviz/frameworks.py` — counts as an edge from
`attnviz.frameworks` to every backend package the table names, so a cycle through it is found too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from attnviz.frameworks import FRAMEWORKS

ROOT = Path(__file__).parents[1]
LIBRARY = sorted((ROOT / "attnviz").rglob("*.py"))
PAGES = sorted((ROOT / "pages").glob("*.py"))  # the screens' scripts


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


def test_two_dynamic_imports_in_the_library():
    """The frameworks' (each imported only where it runs) and a worker's warm-up given by name
    (`attnviz.exec.worker.named`: the server names the lab's warm-up without importing the lab)."""
    found = [
        f"{p.relative_to(ROOT)}:{n.lineno}"
        for p in LIBRARY
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if (isinstance(n, ast.Attribute) and n.attr == "import_module")
        or (isinstance(n, ast.Name) and n.id == "__import__")
    ]
    assert sorted(f.split(":")[0] for f in found) == ["attnviz/exec/worker.py", "attnviz/frameworks.py"], (
        found
    )


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
    {"core", "backends", "audio", "formats", "exec"},
    {"pretrained"},
    {"interp", "training", "kernels", "bench", "plots"},
    {"lessons", "classroom"},
    {"app"},
)
TOP = {p.stem for p in (ROOT / "attnviz").glob("*.py") if p.stem != "__init__"}


def layer_part(module: str) -> str:
    """The part of the house `attnviz.<part>…` belongs to: a top-level module is "core", a package is itself."""
    part = module.split(".")[1] if "." in module else "core"
    return "core" if part in TOP else part


def layer(module: str) -> int:
    """The layer of `attnviz.<part>…`."""
    return next(i for i, names in enumerate(LAYERS) if layer_part(module) in names)


def test_every_package_has_a_layer_and_every_arrow_points_down():
    edges = graph()
    up = sorted(f"{a} → {b}" for a, targets in edges.items() for b in targets if layer(b) > layer(a))
    assert not up, "imports up the layers:\n" + "\n".join(up)


def test_the_layer_check_finds_an_upward_arrow():
    assert layer("attnviz.pretrained.model") > layer("attnviz.run")
    assert layer("attnviz.app.frame.results") > layer("attnviz.exec.local")
    assert layer("attnviz.pretrained.tasks") > layer("attnviz.exec.local")  # the engine sits at the bottom
    assert layer("attnviz.training.loop") == layer("attnviz.interp.scores")


def test_the_engine_imports_only_the_core():
    """`attnviz.exec` runs any function by reference: it imports attnviz's top-level modules and
    itself, never a domain package (no backends, models, interp, training, lessons, app)."""
    edges = graph()
    found = sorted(
        f"{a} → {b}"
        for a, targets in edges.items()
        if a.startswith("attnviz.exec")
        for b in targets
        if not b.startswith("attnviz.exec") and layer_part(b) != "core"
    )
    assert not found, "the engine imports a domain:\n" + "\n".join(found)
    assert layer_part("attnviz.interp.lens") == "interp" and layer_part("attnviz.errors") == "core"


def test_a_screens_tasks_import_no_streamlit_and_nothing_of_the_app():
    """A worker imports a screen's `tasks.py` by name: it must not pull Streamlit or the shell in."""
    found = {
        str(p.relative_to(ROOT)): sorted(b for b in imports(p, set(graph())) if b.startswith("attnviz.app"))
        for p in (ROOT / "attnviz" / "app").glob("*/tasks.py")
    }
    assert found, "the screens' tasks are where this test looks"
    bad = {path: names for path, names in found.items() if names or streamlit_imports(ROOT / path)}
    assert not bad, f"a screen's tasks import the app or Streamlit: {bad}"


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


def test_no_module_in_a_subfolder_reuses_a_top_level_name():
    reused = [str(p.relative_to(ROOT)) for p in LIBRARY if p.parent != ROOT / "attnviz" and p.stem in TOP]
    assert not reused, f"named like a top-level module, for another job: {reused}"


# A second way to write what `attnviz.formats` writes: a head's name, a byte count in a unit, a token's
# invisible characters drawn by hand (or with the newline glyph it does not use).
SECOND_WAYS = {
    "a head's name (formats.head)": re.compile(r"L\{[^{}]*\}\.H\{"),
    "a byte count in MiB (formats.size)": re.compile(
        r"(/|//|>>) ?(2 ?\*\* ?20|MIB|20)\b[^\"'\n]*\} ?MiB|\"KiB\", \"MiB\"|\(\"MiB\", 2 ?\*\* ?20\)"
    ),
    "a token drawn (formats.token)": re.compile(r"↵|replace\([^()]*, [\"'][␣⏎⇥][\"']\)"),
}
FORMATS = ROOT / "attnviz" / "formats" / "__init__.py"


def second_ways(text: str) -> list[str]:
    """What `text` writes a second way: one entry per line and kind."""
    return [
        f"{n}: {what}: {line.strip()[:80]}"
        for n, line in enumerate(text.splitlines(), 1)
        for what, pattern in SECOND_WAYS.items()
        if pattern.search(line)
    ]


def test_a_size_a_token_and_a_heads_name_are_written_one_way():
    found = [
        f"{p.relative_to(ROOT)}:{hit}"
        for p in [*LIBRARY, *PAGES, ROOT / "app.py"]
        if p != FORMATS
        for hit in second_ways(p.read_text(encoding="utf-8"))
    ]
    assert not found, "written beside attnviz.formats:\n" + "\n".join(found)


def test_the_second_way_check_finds_each_kind():
    found = second_ways(
        'names = [f"L{a}.H{b}" for a in range(L)]\n'
        'msg = f"needs {need / 2**20:,.0f} MiB"\n'
        'msg = f"at most {MAX_BYTES >> 20} MiB"\n'
        'for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):\n'
        'shown = t.replace("\\n", "↵")\n'
        'shown = t.replace(" ", "␣")\n'
        'ok = f"{formats.size(need)} and {formats.head(a, b)}; budget {limits.memory_mb:g} MiB"\n'
    )
    assert [hit.split(":")[0] for hit in found] == ["1", "2", "3", "4", "5", "6"], found


# The one test folder named for no package: the browser's walks through the running app.
TEST_ONLY_FOLDERS = {"browser"}


def test_the_tests_mirror_the_package():
    """Each folder of `tests/` is named for a package of `attnviz/` (or is the browser's walks), and at most a dozen test modules sit at the top: those of the core's top-level modules
    and of the house itself."""
    packages = {p.name for p in (ROOT / "attnviz").iterdir() if (p / "__init__.py").exists()}
    folders = {p.name for p in (ROOT / "tests").iterdir() if (p / "__init__.py").exists()}
    assert folders - packages - TEST_ONLY_FOLDERS == set()
    top = sorted(p.name for p in (ROOT / "tests").glob("test_*.py"))
    assert len(top) <= 12, top


def test_pages_holds_one_script_per_routed_screen():
    from attnviz.app.frame.pages import PAGES as ROUTED

    assert [p.path for p in ROUTED] == [f"pages/{p.name}.py" for p in ROUTED]
    assert {p.stem for p in PAGES} == {p.name for p in ROUTED}, "one script per row of the pages list"
    assert not [p for p in (ROOT / "pages").iterdir() if p.suffix != ".py" and p.name != "__pycache__"]
    shared = {"frame", "sidebar"}
    folders = {p.name for p in (ROOT / "attnviz" / "app").iterdir() if (p / "__init__.py").is_file()}
    assert folders - shared <= {p.name for p in ROUTED}, "a screen folder under attnviz/app/ with no page"


def first_statement_after_imports(path: Path) -> ast.stmt | None:
    body = ast.parse(path.read_text(encoding="utf-8")).body
    rest = [n for n in body[1:] if not isinstance(n, ast.Import | ast.ImportFrom)]
    return rest[0] if rest else None


FRAMEWORK_MODULES = {"torch", "tensorflow", "keras", "transformers"}


@pytest.mark.parametrize("path", PAGES, ids=[p.stem for p in PAGES])
def test_each_page_is_thin_and_opens_inside_the_shell(path):
    """Thin: at most 250 lines (the size test), no framework imported; its first statement after
    the imports is `routed("<its name>")`, so the page runs inside the shell even when Streamlit's
    legacy `pages/` routing ran it alone (a fresh server's first deep link)."""
    first = first_statement_after_imports(path)
    assert (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Call)
        and getattr(first.value.func, "id", None) == "routed"
        and [a.value for a in first.value.args if isinstance(a, ast.Constant)] == [path.stem]
    ), f'{path.name}: its first statement after the imports is not routed("{path.stem}")'
    heavy = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            heavy |= {a.name.split(".")[0] for a in node.names} & FRAMEWORK_MODULES
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in FRAMEWORK_MODULES:
            heavy.add(node.module)
    assert not heavy, f"{path.name} imports a framework: {heavy}"


def test_the_thin_page_check_finds_a_page_outside_the_shell(tmp_path):
    page = tmp_path / "explorer.py"
    page.write_text('"""A page."""\nimport streamlit as st\n\nst.title("x")\nrouted("explorer")\n')
    assert getattr(first_statement_after_imports(page).value.func, "attr", None) == "title"


# -- the map: docs/architecture.md names only what exists ------------------------------------------

MAP = ROOT / "docs" / "architecture.md"


def top_level_names(path: Path) -> set[str]:
    """What a module defines or imports at its top level (its functions, classes, constants, and
    what its `__init__.py` re-exports)."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def module_file(parts: list[str]) -> Path | None:
    base = ROOT.joinpath(*parts)
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)


def named_in_map(text: str) -> list[str]:
    """What a code span of the map names and the tree lacks: a path (`attnviz/exec/outcome.py`, a
    folder, `path::name` with `name` defined there) or a dotted name under attnviz
    (`attnviz.exec.submit`). Placeholders (`pages/<name>.py`) and calls (`door.run(…)`) are not names."""
    missing = []
    for span in re.findall(r"`([^`\n]+)`", text):
        if any(c in span for c in "<>()… ") or not (span.startswith("attnviz") or "/" in span):
            continue
        if "/" in span:
            path, _, name = span.partition("::")
            target = ROOT / path
            if not target.exists() or (name and name not in top_level_names(target)):
                missing.append(span)
            continue
        parts = span.split(".")
        found = next((i for i in range(len(parts), 0, -1) if module_file(parts[:i])), None)
        rest = parts[found:] if found else parts
        if not found or (rest and rest[0] not in top_level_names(module_file(parts[:found]))):
            missing.append(span)
    return missing


def test_every_path_the_map_names_exists():
    text = MAP.read_text(encoding="utf-8")
    assert "attnviz/exec/monitor.py" in text and "pages/explorer.py" in text, "the map names paths"
    missing = named_in_map(text)
    assert not missing, f"docs/architecture.md names what is not there: {missing}"


def test_the_map_check_finds_a_name_that_is_not_there():
    assert named_in_map(
        "`attnviz/exec/tasks.py`, `attnviz.exec.tasks`, `attnviz/app/frame/door.py::bounded`"
    ) == [
        "attnviz/exec/tasks.py",
        "attnviz.exec.tasks",
        "attnviz/app/frame/door.py::bounded",
    ]
    assert named_in_map("`pages/<name>.py`, `attnviz.exec.submit`, `attnviz/app/frame/door.py::run`") == []


# -- clicks: every button with a callback keeps a new session's first click (issue 46, point 13) ---

CLICK_WIDGETS = {"button", "form_submit_button", "download_button"}  # Streamlit's widgets with on_click
KEEPER = ROOT / "attnviz" / "app" / "frame" / "session.py"  # `button`, `submit`: the one place


def bare_callback_buttons(source: str) -> list[int]:
    """The lines of a Streamlit click widget given a callback — `st.button(…, on_click=f)`, also on a
    column or form (`c1.button`, `st.form_submit_button`, a download) — rather than drawn by
    `session.button` / `session.submit`: a new session (a tab left open across a server restart) gets
    its first click without the callback. `on_click="ignore"` / `"rerun"` carry none."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in CLICK_WIDGETS or getattr(node.func.value, "id", None) == "session":
            continue
        on_click = next((k.value for k in node.keywords if k.arg == "on_click"), None)
        if on_click is not None and not (
            isinstance(on_click, ast.Constant) and isinstance(on_click.value, str | None)
        ):
            lines.append(node.lineno)
    return lines


def bare_in_app(finder) -> set[str]:
    """`path:line` of each call `finder` (source → lines) reports in app.py, the pages and attnviz/app,
    but in `KEEPER` (attnviz/app/frame/session.py, where the helpers draw the widgets themselves)."""
    app = [ROOT / "app.py", *PAGES, *sorted((ROOT / "attnviz" / "app").rglob("*.py"))]
    return {
        f"{p.relative_to(ROOT)}:{line}"
        for p in app
        if p != KEEPER
        for line in finder(p.read_text(encoding="utf-8"))
    }


def test_every_callback_button_keeps_a_new_sessions_first_click():
    bare = bare_in_app(bare_callback_buttons)
    assert not bare, f"a button's callback drawn without attnviz.app.frame.session's button/submit: {bare}"


def test_the_click_check_finds_each_kind_of_bare_callback_button():
    source = """
st.button("a", on_click=f)
c1.button("b", key="b", on_click=functools.partial(f, 1), args=(2,))
st.form_submit_button("c", on_click=f)
st.download_button("d", b"", on_click=f)
st.sidebar.button("e", on_click=f)
session.button("f", key="f", on_click=f, where=c1)
session.submit("g", key="g", on_click=f)
st.download_button("h", b"", on_click="ignore")
st.button("i")
"""
    assert bare_callback_buttons(source) == [2, 3, 4, 5, 6]


# -- values: every value widget or chart with a callback is drawn by the one helper (issue 46, point 13)

VALUE_CALLBACKS = {"on_change": "value", "on_select": "chart"}  # the keyword, and session's helper for it


def bare_value_callbacks(source: str) -> list[int]:
    """The lines of a call given a value widget's callback (`on_change=f`) or a chart's (`on_select=f`)
    other than `session.value` / `session.chart`, where a new session's first change is decided in one
    place (kept where it can be told, else lost as Streamlit loses it, and said there). Constants
    (`on_select="rerun"`, `on_change=None`) carry no callback."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        helper = getattr(node.func, "attr", None) if getattr(node.func, "value", None) is not None else None
        through = getattr(getattr(node.func, "value", None), "id", None) == "session"
        for k in node.keywords:
            if k.arg not in VALUE_CALLBACKS or (through and helper == VALUE_CALLBACKS[k.arg]):
                continue
            if not (isinstance(k.value, ast.Constant) and isinstance(k.value.value, str | None)):
                lines.append(node.lineno)
    return lines


def test_every_value_callback_is_drawn_by_the_session_helper():
    bare = bare_in_app(bare_value_callbacks)
    assert not bare, f"a value widget's or chart's callback drawn without session.value/chart: {bare}"


def test_the_value_check_finds_each_kind_of_bare_value_callback():
    source = """
st.selectbox("a", [1], key="a", on_change=f)
c1.toggle("b", key="b", on_change=functools.partial(f, 1), args=(2,))
factory(label, key=name, bind="query-params", on_change=changed)
st.data_editor(frame, key="d", on_change=f)
st.plotly_chart(fig, key="e", on_select=functools.partial(f, "e"))
c2.plotly_chart(fig, key="f", on_select=f)
session.chart(fig, key="g", on_change=f)
session.value(st.text_input, "h", key="h", on_change=f, unchanged="")
session.chart(fig, key="i", on_select=f, where=c1)
st.plotly_chart(fig, key="j", on_select="rerun")
st.text_input("k", on_change=None)
"""
    assert bare_value_callbacks(source) == [2, 3, 4, 5, 6, 7, 8]
