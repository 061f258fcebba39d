"""No number in a link crashes a page (issue 26 §3): every URL-bound number field of every page, fed
NaN, ±inf, huge and negative values, Unicode digits ('²', '١٢'), empty strings and text, opens the page
without an exception, and each value the one reader (`links.read_number`) refuses gets its note
("URL parameter … ignored; allowed: …"). Property-based (Hypothesis): all of a page's fields at once.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from attnviz import pretrained
from attnviz.app.frame import links
from attnviz.app.frame.link_values import FIELDS, MULTI_VALUED, TEXT_LIMITS
from attnviz.settings import DEFAULTS, LIMITS
from tests.app.conftest import open_directly, plain
from tests.app.test_fields import assert_widgets_within_the_guard

NAME = "tiny-gpt2"
HOSTILE = [
    "NaN",
    "nan",
    "inf",
    "-inf",
    "Infinity",
    "1e999",
    "9" * 40,
    "-5",
    "-1e308",
    "²",
    "١٢",
    "５",
    "",
    "ten",
    "1,5",
]
# Each page's own settings that keep it light: the tiny GPT-2 instead of SmolLM2.
BASE = {
    "pretrained": {"pre.checkpoint": NAME},
    "interpret": {"interp.checkpoint": NAME},
    "tiles": {"tiles.checkpoint": NAME},
}
PREFIX = {"pretrained": "pre.", "interpret": "interp.", "training": "training.", "timing": "timing.",
          "steps": "steps.", "lesson": "lesson.", "tiles": "tiles."}  # fmt: skip


def bounds(key: str) -> tuple[float, float, float | None]:
    """What the page accepts for `key`: the app's table, or the explorer's limits."""
    if key in FIELDS:
        return FIELDS[key]
    low, high = LIMITS[key]
    return low, high, 1 if isinstance(DEFAULTS[key], int) else None


def fields(page: str) -> list[str]:
    if page == "explorer":  # the configuration's numbers (the sidebar of the explorer)
        return [k for k, v in DEFAULTS.items() if k in LIMITS and not isinstance(v, bool)]
    return [k for k in FIELDS if k.startswith(PREFIX[page])]


def notes(at) -> str:
    return " ".join(plain(w.value) for where in (at.main, at.sidebar) for w in where.warning)


@pytest.mark.parametrize("page", ["explorer", *PREFIX])
def test_hostile_numbers_in_a_link_give_notes_not_errors(page, gpt_folders, monkeypatch):
    monkeypatch.setenv(pretrained.ENV_DIRS, str(gpt_folders))
    keys = fields(page)
    assert keys, page

    @settings(max_examples=2, deadline=None)
    @example(values={k: HOSTILE[i % len(HOSTILE)] for i, k in enumerate(keys)})
    # a refused value beside one whose plain form is refused on the rerun (1e308 → 309 digits)
    @example(values={k: ("NaN", "-1e308")[i % 2] for i, k in enumerate(keys)})
    @given(st.fixed_dictionaries({k: st.sampled_from(HOSTILE) | st.text(max_size=6) for k in keys}))
    def check(values):
        at = open_directly(page, {**BASE.get(page, {}), **values})
        assert not at.exception, [e.value for e in at.exception]
        said = notes(at)
        for key, raw in values.items():
            if links.read_number(raw, *bounds(key)) is None:
                assert f"URL parameter {key}=" in said, (key, raw, said)
        assert_widgets_within_the_guard(at)

    check()


def test_the_problem_sets_students_field_says_which_count_is_used():
    """The field keeps its last value when a number over the limit is typed (issue 26 §4): the page
    says which count it uses, and the limit."""
    at = open_directly("lesson", {})
    said = lambda: " ".join(plain(c.value) for c in at.main.caption)  # noqa: E731
    assert "Using **30** students (at most 60" in said()
    at.number_input(key="lesson.students").set_value(45).run()
    assert not at.exception and "Using **45** students" in said()


def test_a_number_given_several_times_is_refused_with_a_note_not_the_last_one_taken():
    """Issue 46, point 25: `steps.head=2&steps.head=1&steps.head=3` was taken silently, the last winning."""
    at = open_directly("steps", {"steps.head": ["2", "1", "3"]})
    said = " ".join(plain(w.value) for w in at.warning)
    assert "steps.head='2, 1, 3' ignored; allowed: one value (it was given 3 times)" in said
    assert "steps.head" not in at.query_params


def test_any_one_valued_parameter_given_several_times_is_refused_a_multi_choice_keeps_its_values():
    """Issue 46's final walk: a repeated number was refused (point 25), but a repeated choice, device or
    text (`pre.framework=PyTorch&pre.framework=TensorFlow`, `pre.text=first&pre.text=second`) was taken
    silently, the last winning. A widget that holds several choices writes one value per repetition."""
    at = open_directly(
        "timing",
        {"timing.heads": ["4", "8"], "timing.dtype": ["float32", "float64"], "timing.lengths": ["16", "64"]},
    )
    said = notes(at)
    assert "timing.heads='4, 8' ignored; allowed: one value (it was given 2 times)" in said, said
    assert "timing.dtype='float32, float64' ignored; allowed: one value (it was given 2 times)" in said, said
    assert "timing.heads" not in at.query_params and "timing.dtype" not in at.query_params
    assert at.query_params["timing.lengths"] == ["16", "64"], at.query_params
    assert "timing.lengths" not in said


def test_every_multi_valued_link_key_is_declared_and_no_other():
    """`link_values.MULTI_VALUED` names exactly the URL-bound widgets that hold several choices (a
    multiselect, multi-select pills): one missing there would lose its choices to the one-value rule."""
    assert bound_widget_keys(multi=True) == set(MULTI_VALUED)


def bound_widget_keys(kinds: tuple[str, ...] = ("multiselect",), multi: bool = False) -> set[str]:
    """The keys of pages' and screens' widgets of `kinds` bound to the link (`bind=…` or `**URL`), read
    from their source; `multi`: also pills that hold several choices (`selection_mode="multi"`)."""
    keys = set()
    for names, calls in _widget_calls():
        for call in calls:
            if call.func.attr in FORWARDING and FORWARDING[call.func.attr][0] in kinds:
                keys.add(_text(call.args[FORWARDING[call.func.attr][1]], names))
                continue
            options = {k.arg: k.value for k in call.keywords}
            if _forwarded(call):
                continue
            chosen = call.func.attr in kinds or (
                multi
                and call.func.attr in ("pills", "segmented_control")
                and getattr(options.get("selection_mode"), "value", None) == "multi"
            )
            if chosen and ("bind" in options or None in options):
                keys.add(_text(options["key"], names))
    return keys


# Helpers that draw a bound widget under a key their callers write: the helper's name → (the widget's
# kind, the key's position in a call of the helper). Their own widget call (`key=key`) is read through
# their callers' calls (`attnviz/app/interpret/work.py::prompt_box`, the Interpretability tabs' prompts).
FORWARDING = {"prompt_box": ("text_input", 1)}
_FORWARDED: set[ast.Call] = set()  # the calls inside them (`_widget_calls` finds them)


def _forwarded(call: ast.Call) -> bool:
    """A widget call inside a `FORWARDING` helper, whose key is the helper's parameter, not a string."""
    return call in _FORWARDED


@functools.cache
def _widget_calls() -> list[tuple[dict[str, str], list[ast.Call]]]:
    """Per module of pages/ and attnviz/app/: its module-level strings (a screen's prefix: P = "decoding.",
    or URL, P = "…", "…") and its method calls (`st.…(…)`, `column.…(…)`)."""
    root = Path(__file__).parents[2]
    modules = []
    for path in [*root.glob("pages/*.py"), *root.glob("attnviz/app/**/*.py")]:
        tree = ast.parse(path.read_text())
        names = {}
        for node in [n for n in tree.body if isinstance(n, ast.Assign) and len(n.targets) == 1]:
            target, value = node.targets[0], node.value
            both = isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)
            pairs = zip(target.elts, value.elts, strict=True) if both else [(target, value)]
            names.update(
                {t.id: v.value for t, v in pairs if isinstance(t, ast.Name) and isinstance(v, ast.Constant)}
            )
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
        for helper in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name in FORWARDING]:
            _FORWARDED.update(n for n in ast.walk(helper) if isinstance(n, ast.Call))
        modules.append((names, calls))
    return modules


def _text(node: ast.expr, names: dict[str, str]) -> str:
    """A key written as a string, a module's string constant, or their sum."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text(node.left, names) + _text(node.right, names)
    return names[node.id] if isinstance(node, ast.Name) else node.value


def test_every_text_box_bound_to_the_link_has_a_length_the_guard_cuts_it_to():
    """Issue 46's final walk: `/interpret?interp.clean=` + 20,000 characters (and `interp.corrupted`,
    `interp.answer`) was kept whole in the link and the session, with no note; the guard cuts a link's text
    to `TEXT_LIMITS` with one (tests/app/test_interpret_page.py reads such a note)."""
    boxes = bound_widget_keys(("text_input", "text_area"))
    assert {"interp.clean", "interp.wrong", "interp.circuit_text"} <= boxes  # read through `prompt_box` too
    missing = boxes - set(TEXT_LIMITS)
    assert not missing, missing
