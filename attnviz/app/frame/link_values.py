"""Every number a page reads from its link, checked by one reader before any widget sees it; and a
framework named in a link by its internal name ("tensorflow") read as the label its radio shows.

A number widget bound to the URL parses the link itself, and some values crash it (Streamlit's
`number_input` calls `int(inf)`; `int("١٢")` is 12, `str.isdigit("²")` is True). So app.py calls
`guard()` before the page runs: each value of a field listed in `FIELDS` goes through
`links.read_number` (ASCII digits, finite, in range, on the grid); a value it refuses is removed from
the link, so the widget starts from its default, and the page shows the usual note ("URL parameter
interp.half='inf' ignored; allowed: 2 … 64 (whole numbers)."). A value it accepts is written back in
its plain form ("1e1" → "10"), and the run starts again from the repaired link (widgets seed from
the link a run started with), as the explorer's `attnviz.app.sidebar.url.first_visit` does.

A screen's rows are derived from the fields its `fields.py` declares (`links.Field`: key, label,
bounds, default, step), the same declarations its widgets and notes read. Bounds that depend on the
page's state (the heads of the chosen model, the room left for new tokens) are the widest the page can
offer; the page narrows them when it draws the widget and writes its notes (`Field.notes`).
The explorer's fields are read by `attnviz.settings.from_query`, through the same reader.
"""

from __future__ import annotations

import functools
import math

import streamlit as st

from attnviz.app.frame import links
from attnviz.frameworks import FRAMEWORKS, label

NOTES = "links.refused_numbers"  # the notes of the run that read the link, by page


def __getattr__(name: str):
    """`FIELDS`, built at its first use (PEP 562): its bounds come from the screens' declarations,
    which read the lessons, the Training lab and the pretrained models, whose packages take ≈ 0.45 s to
    import — a server's first page (the explorer's) reads none of them, and its first chart waited for
    them (docs/performance.md)."""
    if name == "FIELDS":
        return fields()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def fields() -> dict[str, tuple[float, float, float | None]]:
    """Each number field a link can carry: its lowest, highest value and step (None: any real) — the
    screens' declared fields (`attnviz.app.<screen>.fields`), then the rows not declared yet."""
    from attnviz import training
    from attnviz.app.decoding import fields as decoding_fields
    from attnviz.app.interpret import fields as interpret_fields
    from attnviz.app.lesson import fields as lesson_fields
    from attnviz.app.models import fields as models_fields
    from attnviz.app.pretrained import fields as pretrained_fields
    from attnviz.app.speech import fields as speech_fields
    from attnviz.app.steps import fields as steps_fields
    from attnviz.app.tiles import fields as tiles_fields
    from attnviz.app.timing import fields as timing_fields

    return {
        **links.table(
            *pretrained_fields.ALL,
            *models_fields.ALL,
            *tiles_fields.ALL,
            *speech_fields.ALL,
            *lesson_fields.ALL,
            *decoding_fields.ALL,
            *interpret_fields.ALL,
            *timing_fields.ALL,
            *steps_fields.ALL,
        ),
        # Interpretability (pages/interpret.py)
        "interp.parts_query": (0, 4095, 1),  # a score's query and key (score parts: the text's tokens)
        "interp.parts_key": (0, 4095, 1),
        # Training lab (pages/training.py)
        **{f"training.{name}": (lo, hi, 1) for name, (lo, hi) in training.LIMITS.items()},
        "training.lr": (1e-5, training.LR_MAX, None),
    }


# Fields whose page checks the range itself, against its configuration (Step by step: the heads, batch
# and length of the spec), and names that narrower range: the guard refuses only what is not a number.
PAGE_RANGES = frozenset({"steps.head", "steps.batch", "steps.pos"})

# Every text box bound to the link, and the characters it keeps (the boxes' `max_chars` read it where they
# set one): a longer link's text is cut here with a note, not silently by the box or not at all (issue 46's
# final walk: `interp.clean` kept 20,000 characters). tests/app/test_link_numbers.py finds every such box.
TEXT_LIMITS = {
    "decoding.text": 500, "models.text": 500, "tiles.text": 500, "interp.text": 500, "interp.parts_text": 500,
    "pre.text": 1000, "pre.pair": 1000,
    # the Interpretability screen's patching prompts and answer tokens, and its QK/OV tokens' text
    "interp.clean": 500, "interp.corrupted": 500, "interp.answer": 100, "interp.wrong": 100,
    "interp.circuit_text": 500,
}  # fmt: skip

# Widgets bound to the link that hold several choices (a multiselect, multi-select pills): the link repeats
# their key once per value. Every other parameter of a page has one value, and a repeated one is refused
# (issue 46: `pre.text=first&pre.text=second` was taken silently, the last winning).
MULTI_VALUED = frozenset(
    {"pre.view_heads", "pre.ablate", "decoding.sinks.models", "timing.impls", "timing.lengths"}
)

# Radios that show `label(fw)` and write it in the link.
FRAMEWORK_FIELDS = (
    "speech.framework",
    "pre.framework",
    "interp.framework",
    "tiles.framework",
    "decoding.framework",
    "models.framework",
)


def plain(value: float | int) -> str:
    """How a link spells an accepted number."""
    return str(value) if isinstance(value, int) else repr(float(value))


def read_back(raw: str, low: float, high: float, step: float | None) -> float | int | None:
    """`links.read_number(raw, …)`, and None too when its plain form would not be read back (`1e308`
    is a number, its 309 digits are not): the guard writes the plain form, and the rerun it starts
    must accept what it wrote, or its notes would replace this run's."""
    value = links.read_number(raw, low, high, step)
    if value is None or links.read_number(plain(value), low, high, step) is None:
        return None
    return value


def prefix(page: str) -> str:
    """The prefix of a page's URL parameters, from its name (`PageInfo.name`: "timing" → "timing.")."""
    return {"pretrained": "pre.", "interpret": "interp."}.get(page, page + ".")


def guard(page: str) -> list[str]:
    """Before the page's widgets: drop the link's numbers that `links.read_number` refuses, write
    the others in their plain form, and a framework's internal name as its label; returns (and keeps
    for the page's later runs) the notes.

    Args:
        page: the running page's name (`attnviz.app.frame.pages.PageInfo.name`): only its own
            parameters are read (another page's stay in the link for that page to read).
    """
    own = prefix(page)
    changed = False
    for key in [k for k in FRAMEWORK_FIELDS if k.startswith(own)]:
        raw = st.query_params.get(key)
        if raw is not None and raw.lower() in FRAMEWORKS and raw != label(raw.lower()):
            # the internal name, as other pages take it; the label itself ("TensorFlow") is left alone
            st.query_params[key], changed = label(raw.lower()), True
    notes = repeated(own)
    changed = changed or bool(notes)
    for key in [k for k in st.query_params if k.startswith(own) and k in fields()]:
        low, high, step = fields()[key]
        if key in PAGE_RANGES:
            low, high = -math.inf, math.inf
        raws = st.query_params.get_all(key)
        values = [read_back(raw, low, high, step) for raw in raws]
        notes += [
            links.ignored(
                key,
                raw,
                "whole numbers (their range follows the configuration)"
                if key in PAGE_RANGES
                else links.allowed_numbers(low, high, step),
            )
            for raw, value in zip(raws, values, strict=True)
            if value is None
        ]
        kept = [plain(v) for v in values if v is not None]
        if kept != raws:
            changed = True
            if kept:
                st.query_params[key] = kept if len(kept) > 1 else kept[0]
            else:
                del st.query_params[key]
    for key in [k for k in st.query_params if k in TEXT_LIMITS and k.startswith(own)]:
        raw, most = st.query_params[key], TEXT_LIMITS[key]
        if len(raw) > most:
            notes.append(
                f"URL parameter {key} has {len(raw):,} characters; its first {most} are kept (allowed: at most {most})."
            )
            st.query_params[key], changed = raw[:most], True
    if notes:
        st.session_state[NOTES] = (page, notes)
    if changed:  # widgets seed from the link the run started with: start again from the repaired one
        st.rerun()
    return notes


def repeated(own: str) -> list[str]:
    """Drop from the link each parameter starting with `own` that is given several times and holds one
    value (not in `MULTI_VALUED`): which one was meant is not guessed. Returns their notes."""
    notes = []
    for key in [k for k in st.query_params if k.startswith(own) and k not in MULTI_VALUED]:
        raws = st.query_params.get_all(key)
        if len(raws) > 1:
            notes.append(links.ignored(key, ", ".join(raws), f"one value (it was given {len(raws)} times)"))
            del st.query_params[key]
    return notes


def note(own: str, text: str) -> None:
    """Add `text` to the notes of the page whose parameters start with `own` (`prefix`), shown above
    the page by `show` — where a phone sees them (its sidebar opens collapsed)."""
    page = {"pre.": "pretrained", "interp.": "interpret"}.get(own, own.rstrip("."))
    kept = st.session_state.get(NOTES)
    notes = kept[1] if kept and kept[0] == page else []
    st.session_state[NOTES] = (page, [*notes, text])


def show(page: str) -> None:
    """The notes of this page's link, above the page (until the visitor opens another page)."""
    kept = st.session_state.get(NOTES)
    if kept and kept[0] == page:
        st.warning("\n\n".join(map(links.escape_markdown, kept[1])), icon=":material/link_off:")
    elif kept:
        del st.session_state[NOTES]
