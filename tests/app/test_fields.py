"""A screen's number fields are declared once (`attnviz.app.frame.links.Field`, issue 41 point 4): the
link guard's table holds each declaration's row, the widget is drawn with the same bounds (narrowed
only where the page says so), and no screen writes a declared field's bounds a second time."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from attnviz.app.decoding import fields as decoding
from attnviz.app.frame import link_values, links
from attnviz.app.interpret import fields as interpret
from attnviz.app.lesson import fields as lesson
from attnviz.app.models import fields as models
from attnviz.app.pretrained import fields as pretrained
from attnviz.app.speech import fields as speech
from attnviz.app.steps import fields as steps
from attnviz.app.tiles import fields as tiles
from attnviz.app.timing import fields as timing

ROOT = Path(__file__).parents[2]
SCREENS = {
    "pretrained": pretrained, "models": models, "tiles": tiles, "speech": speech, "lesson": lesson, "decoding": decoding,
    "interpret": interpret, "timing": timing, "steps": steps,
}  # fmt: skip
DECLARED = [f for module in SCREENS.values() for f in module.ALL]


def assert_widgets_within_the_guard(at, keys=None) -> None:
    """Each drawn number widget of `keys` (None: of every field in the guard's table; given keys must all
    be drawn) starts where the link guard's range starts and ends within it (a page narrows the end to
    its state: the model's layers, the room left), on the guard's grid."""
    drawn = {w.key: w.proto for w in [*at.number_input, *at.slider] if w.key in link_values.FIELDS}
    assert keys is None or set(keys) <= set(drawn), (keys, sorted(drawn))
    for key, proto in drawn.items():
        if (keys is None or key in keys) and key not in link_values.PAGE_RANGES:
            low, high, step = link_values.FIELDS[key]
            assert proto.min == low and proto.max <= high, (key, proto.min, proto.max, low, high)
            assert step is None or proto.step == step, (key, proto.step, step)


class Drawn:
    """A stand-in for a column: what a widget was drawn with."""

    def __init__(self):
        self.calls = []

    def slider(self, *args, **kwargs):
        self.calls.append(("slider", args, kwargs))
        return args[3]

    number_input = slider


@pytest.mark.parametrize("field", DECLARED, ids=[f.key for f in DECLARED])
def test_the_link_guard_and_the_widget_read_one_declaration(field):
    assert link_values.FIELDS[field.key] == (field.low, field.high, field.step)
    assert field.low <= field.default <= field.high
    for draw in (field.slider, field.number_input):
        where = Drawn()
        assert draw(where, disabled=True) == field.default
        (_, (label, low, high, value, step), options) = where.calls[0]
        assert (label, low, high, value) == (field.label, field.low, field.high, field.default)
        assert step == (field.widget_step or field.step)
        assert options == {"key": field.key, "bind": "query-params", "disabled": True}


def test_a_narrowed_field_lowers_its_high_and_default_and_its_notes_name_the_same_range():
    where = Drawn()
    speech.LAYER.number_input(where, high=3)  # Whisper tiny: 4 layers, the last by default
    assert where.calls[0][1][1:4] == (0, 3, 3)
    assert speech.LAYER.notes({"speech.layer": ["3"]}, high=3) == []
    assert speech.LAYER.notes({"speech.layer": ["4"]}, high=3) == [
        links.ignored("speech.layer", "4", "0 … 3 (whole numbers)")
    ]
    assert pretrained.TEMPERATURE_FIELD.notes({"pre.temperature": ["0.123"]}) == []  # any number


def screen_sources(name: str) -> list[Path]:
    return [
        p
        for p in [ROOT / "pages" / f"{name}.py", *(ROOT / "attnviz" / "app" / name).glob("*.py")]
        if p.name != "fields.py"
    ]


@pytest.mark.parametrize("name", SCREENS)
def test_no_screen_writes_a_declared_fields_key_or_bounds_again(name):
    """The page and its folder name a declared field only through its declaration: no `key="pre.k"`,
    no `P + "layer"` for it, no `links.number(...)` for it."""
    keys = [f.key for f in SCREENS[name].ALL]
    suffixes = {k.split(".", 1)[1] for k in keys}
    written = re.compile(
        "|".join([*(re.escape(f'"{k}"') for k in keys), *(rf'\+ "{re.escape(s)}"' for s in suffixes)])
    )
    found = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in screen_sources(name)
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if written.search(line)
    ]
    assert not found, "a declared field written again:\n" + "\n".join(found)


def test_inline_text_draws_a_line_break_as_a_token_does():
    """A prompt or a generation shown inline (`literal.one_line`) draws a line break with the token
    glyph (⏎, `attnviz.formats`), not a space that hid a generated newline inside its highlight."""
    from attnviz import formats
    from attnviz.app.frame.literal import one_line

    assert one_line("Hi *you*\nBye") == "Hi \\*you\\*⏎Bye"
    assert one_line("\n") == formats.token("\n")
