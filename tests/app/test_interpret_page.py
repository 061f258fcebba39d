"""The Interpretability page on a tiny random GPT-2 (tests/test_gpt2.py) offered through
`ATTNVIZ_CHECKPOINTS`: every grid the page draws equals the library's numbers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.interp import circuits, lens, patching, roles
from tests.app.conftest import array, assert_clean, errors, open_page
from tests.conftest import ATOL_FIGURE

pytest.importorskip("transformers", reason="transformers builds the test's GPT-2")

NAME = "tiny-gpt2"
CLEAN, CORRUPTED = "The cat sat on the mat", "The dog sat on the mat"


@pytest.fixture(scope="module")
def gpt_folders(tmp_path_factory):
    from tests.test_gpt2 import make_tiny_gpt2

    root = tmp_path_factory.mktemp("checkpoints")
    make_tiny_gpt2(root / NAME)
    return root


@pytest.fixture
def gpt(gpt_folders, monkeypatch):
    """The tiny GPT-2, offered for this test only (a setting left for the module would leak into others)."""
    monkeypatch.setenv(pretrained.ENV_DIRS, str(gpt_folders))
    return pretrained.load_choice(NAME)


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


def test_patching_sweep_on_request_and_bad_prompts_get_a_message(gpt):
    answer = " the"
    wrong = "0"
    at = page(**{"interp.tab": "Patching", "interp.clean": CLEAN, "interp.corrupted": CORRUPTED,
                 "interp.answer": answer, "interp.wrong": wrong})  # fmt: skip
    assert not errors(at), errors(at)
    at.button(key="interp.run_sweep").click().run()
    assert_clean(at)
    assert not errors(at), errors(at)
    expected = patching.sweep(gpt, CLEAN, CORRUPTED, answer, wrong, "torch")
    (fig,) = [c for c in charts(at) if "patching" in c["layout"]["title"]["text"]]
    np.testing.assert_allclose(array(fig["data"][0]["z"]), expected.restored, atol=1e-5)
    best = np.unravel_index(np.nanargmax(expected.restored), expected.restored.shape)
    assert at.selectbox(key="interp.patch_head").value == f"L{best[0]}.H{best[1]}"
    at.selectbox(key="interp.patch_head").set_value("L1.H3").run()
    both = [c for c in charts(at) if c["layout"]["title"]["text"].startswith("L1.H3")]
    for fig, prompt in zip(both, (CLEAN, CORRUPTED), strict=True):
        shown = array(fig["data"][0]["z"])  # the future is blocked: NaN there
        assert np.isnan(shown[np.triu_indices(len(shown), 1)]).all()
        np.testing.assert_allclose(
            np.nan_to_num(shown), gpt.run(prompt, "torch").attentions[1, 3], atol=ATOL_FIGURE
        )
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
