"""The Interpretability page on a tiny random GPT-2 (tests/pretrained/test_gpt2.py) offered through
`ATTNVIZ_CHECKPOINTS`: every grid the page draws equals the library's numbers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.interp import attribution_patching, circuits, lens, patching, roles
from tests.app.conftest import TINY_GPT2, array, assert_clean, click_if_offered, errors, open_page, titled
from tests.app.test_interpret_circuits import submits
from tests.conftest import ATOL_FIGURE

pytest.importorskip("transformers", reason="transformers builds the test's GPT-2")

NAME = TINY_GPT2  # conftest's `gpt` fixture offers it
CLEAN, CORRUPTED = "The cat sat on the mat", "The dog sat on the mat"


def page(**state):
    at = open_page("interpret", {"interp.checkpoint": NAME, "interp.half": "6", "interp.n": "2", **state})
    assert_clean(at)
    return at


def charts(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def test_head_roles_grid_equals_the_scan(gpt):
    at = page(**{"interp.tab": "Head roles", "interp.head": "L1.H2"})
    assert not errors(at), errors(at)
    scan = roles.scan(gpt, "torch", half=6, n=2, seed=0)
    grid = charts(at)[0]
    shown = [array(t["z"]) for t in grid["data"] if t["type"] == "heatmap"]
    assert len(shown) == len(roles.ROLES)
    for z, role in zip(shown, roles.ROLES, strict=True):
        np.testing.assert_allclose(z, scan.scores[role], atol=ATOL_FIGURE, err_msg=role)
    targets = [t for t in grid["data"] if t["type"] == "scatter"]  # what a click selects: (layer, head)
    assert len(targets) == len(roles.ROLES)
    assert sorted(map(tuple, targets[0]["customdata"])) == [(a, b) for a in range(2) for b in range(4)]
    head = charts(at)[1]
    np.testing.assert_allclose(
        np.nan_to_num(array(head["data"][0]["z"])), scan.attentions[1, 2], atol=ATOL_FIGURE
    )  # blocked: NaN
    (table,) = [d.value for d in at.dataframe]
    assert len(table) == 8 and set(roles.ROLES) <= set(table.columns)


def test_logit_lens_grid_and_its_last_row(gpt):
    at = page(**{"interp.tab": "Logit lens", "interp.text": CLEAN})
    assert not errors(at), errors(at)
    out = gpt.run(CLEAN, "torch")
    table = lens.top_tokens(gpt, gpt.logit_lens(out), 5)
    (fig,) = [c for c in charts(at) if "Logit lens" in c["layout"]["title"]["text"]]
    np.testing.assert_allclose(array(fig["data"][0]["z"]), table.probs[:, :, 0], atol=ATOL_FIGURE)
    assert len(fig["layout"]["yaxis"].get("categoryarray", fig["data"][0]["y"])) == 3  # embed + 2 layers
    # issue 33: the x labels keep the ␣ its cells show for a token's leading space
    tokens = gpt.labels(out.ids)
    assert [x.replace("\u200b", "") for x in fig["data"][0]["x"]] == [
        f"{i}: {t.replace(' ', '␣')}" for i, t in enumerate(tokens)
    ]
    assert any("␣" in x for x in fig["data"][0]["x"]) and any(t.startswith(" ") for t in tokens)


def test_patching_sweep_beside_attribution_patching(gpt, monkeypatch):
    """Issue 30 §2 and issue 33: the estimate at once, the exact sweep on request; then both maps on
    one colour scale, the scatter with its diagonal, ρ and the top-10 overlap, the heads that
    disagree most with their attention's saturation, and the head's two panels titled clean and
    corrupted with the token that differs."""
    answer, wrong = " the", "0"
    at = page(**{"interp.tab": "Patching", "interp.clean": CLEAN, "interp.corrupted": CORRUPTED,
                 "interp.answer": answer, "interp.wrong": wrong})  # fmt: skip
    assert not errors(at), errors(at)
    estimate = attribution_patching.attribution(gpt, CLEAN, CORRUPTED, answer, wrong, "torch")
    (alone,) = titled(at, "Attribution patching")
    np.testing.assert_allclose(array(alone["data"][0]["z"]), estimate.restored, atol=1e-5)
    submitted = submits(monkeypatch)
    click_if_offered(at, "interp.run_sweep")
    assert_clean(at)
    assert not errors(at), errors(at)
    expected = patching.sweep(gpt, CLEAN, CORRUPTED, answer, wrong, "torch")
    (exact,) = titled(at, "Exact patching: share restored")
    (guess,) = titled(at, "Attribution patching: the first-order estimate")
    np.testing.assert_allclose(array(exact["data"][0]["z"]), expected.restored, atol=1e-5)
    np.testing.assert_allclose(array(guess["data"][0]["z"]), estimate.restored, atol=1e-5)
    limit = np.abs(np.concatenate([expected.restored.ravel(), estimate.restored.ravel()])).max()
    for fig in (exact, guess):  # one colour scale: the same colour is the same share on both maps
        assert fig["data"][0]["zmin"] == pytest.approx(-limit, rel=1e-5)
        assert fig["data"][0]["zmax"] == pytest.approx(limit, rel=1e-5)
    (scatter,) = titled(at, "Exact vs attribution patching")
    diagonal, heads, *worst = scatter["data"]
    assert array(diagonal["x"]).tolist() == array(diagonal["y"]).tolist()
    np.testing.assert_allclose(array(heads["x"]), expected.restored.ravel(), atol=1e-5)
    np.testing.assert_allclose(array(heads["y"]), estimate.restored.ravel(), atol=1e-5)
    assert scatter["layout"]["yaxis"]["scaleanchor"] == "x"  # equal scales: the diagonal is at 45°
    agree = attribution_patching.agreement(expected.restored, estimate.restored, k=10, worst=5)
    assert [m.value for m in at.metric] == [f"{agree.rho:.2f}", f"{agree.overlap} of {agree.k}"]
    assert [t["name"] for t in worst] == [f"L{a}.H{b}" for a, b, _, _ in agree.disagree]  # in the legend
    for t, (a, b, _, _) in zip(worst, agree.disagree, strict=True):
        assert (t["x"][0], t["y"][0]) == pytest.approx(
            (expected.restored[a, b], estimate.restored[a, b]), abs=1e-5
        )
    (table,) = [d.value for d in at.dataframe]
    assert list(table["head"]) == [f"L{a}.H{b}" for a, b, _, _ in agree.disagree]
    attn = gpt.run(CORRUPTED, "torch").attentions  # where attribution patching takes its gradient
    largest = [attn[a, b].max(-1).mean() for a, b, _, _ in agree.disagree]
    np.testing.assert_allclose(table["largest weight (mean of its rows)"], largest, atol=1e-3)
    said = " ".join(m.value for m in at.markdown)
    assert "saturated" in said and "Kramár et al., 2024" in said
    best = np.unravel_index(np.nanargmax(expected.restored), expected.restored.shape)
    assert at.selectbox(key="interp.patch_head").value == f"L{best[0]}.H{best[1]}"
    at.selectbox(key="interp.patch_head").set_value("L1.H3").run()
    clean, corrupted = gpt.encode(CLEAN)[0], gpt.encode(CORRUPTED)[0]
    differ = [i for i, (x, y) in enumerate(zip(clean, corrupted, strict=True)) if x != y]
    assert 1 <= len(differ) <= 3
    for which, prompt, ids in (("clean", CLEAN, clean), ("corrupted", CORRUPTED, corrupted)):
        tokens = ", ".join(f"{i}: {gpt.labels(ids)[i]!r}" for i in differ)
        (fig,) = titled(at, f"L1.H3 · {which} · {tokens}")
        shown = array(fig["data"][0]["z"])  # the future is blocked: NaN there
        assert np.isnan(shown[np.triu_indices(len(shown), 1)]).all()
        np.testing.assert_allclose(
            np.nan_to_num(shown), gpt.run(prompt, "torch").attentions[1, 3], atol=ATOL_FIGURE
        )
    # issue 41 point 4: the panels and the table draw the sweep's own runs — no second forward
    assert submitted in ([], ["patching_sweep"]), submitted  # [] where an earlier test's sweep is cached
    at.text_input(key="interp.corrupted").set_value("The dog").run()
    assert "corrupted" in errors(at) and "tokens" in errors(at)


def test_toy_to_real_numbers_are_the_librarys(gpt):
    at = page(**{"interp.tab": "From toy to real", "interp.k": "2"})
    assert not errors(at), errors(at)
    scan = roles.scan(gpt, "torch", half=6, n=2, seed=0)
    cmp = circuits.induction_ablation(gpt, scan, 2, "torch", seed=0)
    text = " ".join(m.value for m in at.markdown)
    assert f"**{cmp.baseline:.3f}**" in text and f"**{cmp.top:.3f}**" in text
    assert f"**{cmp.random_mean:.3f}**" in text
    # issue 33: each value's label sits above its bar — the random bar's above its highest draw
    (bars,) = [c for c in charts(at) if "Loss on the repeated half" in c["layout"]["title"]["text"]]
    labels = bars["layout"]["annotations"]
    assert [a["text"] for a in labels] == [f"{v:.3f}" for v in (cmp.baseline, cmp.top, cmp.random_mean)]
    assert all(a["yanchor"] == "bottom" and a["yshift"] > 0 for a in labels)
    assert labels[2]["y"] >= max(cmp.random) and labels[2]["y"] >= cmp.random_mean
    assert bars["layout"]["yaxis"]["range"][1] > max(a["y"] for a in labels)  # room above the labels


def test_a_saved_training_lab_run_is_listed_for_this_session_and_scanned(monkeypatch, tmp_path):
    """The toy end of the path: an induction-task model trained and saved by this session appears in the
    page's list (and nobody else's), and the page's scan is the library's scan of that checkpoint."""
    from attnviz import training
    from attnviz.app.frame import checkpoints

    monkeypatch.setenv(training.save.ENV_DIR, str(tmp_path))
    monkeypatch.setattr(checkpoints, "session_id", lambda: "visitor-a")
    config = training.PRESETS["induction"].replace(steps=30)
    run = training.train(config, "torch")
    name = training.share(run, training.owner_of("visitor-a"))
    (folder,) = training.session_checkpoints("visitor-a").values()
    assert training.session_checkpoints("someone else") == {}
    label = name  # the name the Training lab saved it under (its link to this page carries it)
    at = open_page("interpret", {"interp.checkpoint": label, "interp.half": "6", "interp.n": "2"})
    assert_clean(at)
    assert not errors(at), errors(at)
    assert f"**{label}** (your Training-lab run) · decoder" in " ".join(m.value for m in at.markdown)
    ckpt = pretrained.load(folder)
    scan = roles.scan(ckpt, "torch", half=6, n=2, seed=0)
    grid = charts(at)[0]
    shown = [array(t["z"]) for t in grid["data"] if t["type"] == "heatmap"]
    np.testing.assert_allclose(shown[1], scan.scores["induction"], atol=ATOL_FIGURE)


def test_a_link_value_the_sidebar_cannot_use_is_said(gpt):
    """The walk's hostile link: `interp.checkpoint=nope` was silently replaced; now each value the
    sidebar could not use is named with what is allowed (numbers by the app's link guard, before the page;
    the checkpoint and the framework by the page), and the page still draws on its defaults."""
    at = page(
        **{"interp.checkpoint": "nope", "interp.half": "1e309", "interp.n": "nan", "interp.framework": "JAX"}
    )
    said = " ".join(w.value for w in at.main.warning).replace("\\", "")  # the notes are markdown-escaped
    for note in ("interp.checkpoint='nope' ignored; allowed: ", "tiny-gpt2",
                 "interp.framework='JAX' ignored; allowed: PyTorch | TensorFlow",
                 "interp.half='1e309' ignored; allowed: 2 … 64", "interp.n='nan' ignored"):  # fmt: skip
        assert note in said, said
    assert at.selectbox(key="interp.checkpoint").value in pretrained.choices() and not errors(at)
    clean = page(**{"interp.tab": "Head roles"})
    assert not clean.main.warning  # a good link says nothing


def test_a_link_text_longer_than_its_box_is_cut_with_a_note(gpt):
    """The walk: a 2,000-character prompt in a link was cut to the box's 500 without a word."""
    from attnviz.app.frame.link_values import TEXT_LIMITS

    most = TEXT_LIMITS["interp.text"]
    long = ("The cat sat on the mat. " * 100)[: most + 37]
    at = page(**{"interp.tab": "Logit lens", "interp.text": long, "interp.clean": "w" * 20_000})
    said = " ".join(w.value for w in at.main.warning).replace("\\", "")
    assert f"URL parameter interp.text has {most + 37:,} characters; its first {most} are kept" in said
    # issue 46's final walk: the patching tab's prompt was kept whole (20,000 characters), with no note
    assert "URL parameter interp.clean has 20,000 characters; its first 500 are kept" in said, said
    box = at.text_input(key="interp.text")
    assert box.value == long[:most] and box.proto.max_chars == most
    assert "allowed: at most 32 tokens" in errors(at)  # the tiny model's positions: said, not a traceback
