"""attnviz's GPT-2 decoder reproduces Hugging Face's GPT2LMHeadModel, offline.

The checkpoint is made here: a tiny random GPT-2 (`transformers.GPT2Config`, 2 layers, 4 heads,
weights drawn wide enough that attention is far from uniform) saved with safetensors, and a
byte-level BPE `tokenizer.json` trained here with `tokenizers`. `transformers` (eager attention)
is the oracle.
"""

import json

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.errors import SpecError
from attnviz.interp import neuron
from tests.conftest import RTOL_MODEL, assert_close, requires

transformers = pytest.importorskip("transformers", reason="transformers (the oracle) is not installed")
torch = pytest.importorskip("torch")

LINES = [
    "The cat sat on the mat because it was tired.",
    "The quick brown fox jumps over the lazy dog.",
    "Der schnelle braune Fuchs springt über den faulen Hund.",
    "Ça va très bien, merci ! 我爱自然语言处理。",
]
TEXTS = ["The cat sat on the mat.", "a", "naïve café 🙂 我爱", "the the the the cat cat"]
RTOL = RTOL_MODEL
FRAMEWORKS = [pytest.param("torch"), pytest.param("tensorflow", marks=requires("tensorflow"))]


def make_tiny_gpt2(folder, *, n_positions=32, seed=0):
    """A random GPT-2 checkpoint (config.json, model.safetensors, tokenizer.json) in `folder`."""
    from tokenizers import ByteLevelBPETokenizer

    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(LINES * 3, vocab_size=300, min_frequency=1, show_progress=False)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    config = transformers.GPT2Config(
        vocab_size=tokenizer.get_vocab_size(),
        n_positions=n_positions,
        n_embd=32,
        n_layer=2,
        n_head=4,
        bos_token_id=0,
        eos_token_id=0,
    )
    torch.manual_seed(seed)
    model = transformers.GPT2LMHeadModel(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name.endswith("ln_f.weight"):
                p.copy_(1 + 0.2 * torch.randn_like(p))
            else:
                p.copy_((0.4 if p.dim() == 2 else 0.1) * torch.randn_like(p))
    model.save_pretrained(folder, safe_serialization=True)
    return folder


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_tiny_gpt2(tmp_path_factory.mktemp("tiny-gpt2"))


@pytest.fixture(scope="module")
def checkpoint(folder):
    return pretrained.load(folder)


@pytest.fixture(scope="module")
def oracle(folder):
    model = transformers.GPT2LMHeadModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"))

    def run(text):
        ids = tokenizer(text, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            out = model(ids, output_attentions=True, output_hidden_states=True)
        tokens = tokenizer.convert_ids_to_tokens(ids[0])
        return (
            tokens,
            torch.stack(out.attentions)[:, 0].numpy(),
            out.hidden_states[-1][0].numpy(),
            out.logits[0].numpy(),
        )

    run.model, run.tokenizer = model, tokenizer
    return run


@pytest.mark.parametrize("text", TEXTS, ids=["english", "one-token", "unicode", "repeats"])
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_matches_hugging_face_gpt2(checkpoint, oracle, text, framework):
    tokens, attentions, hidden, logits = oracle(text)
    ours = checkpoint.run(text, framework)
    assert ours.tokens == tokens
    if text == "a":
        assert len(tokens) == 1
    assert ours.attentions.shape == (2, 4, len(tokens), len(tokens))
    assert_close(ours.attentions, attentions, RTOL[framework], "attentions")
    assert_close(ours.last_hidden_state, hidden, RTOL[framework], "last_hidden_state")
    assert_close(ours.logits, logits, RTOL[framework], "logits")


def test_decoder_is_causal_and_not_uniform(checkpoint):
    assert checkpoint.kind == "decoder"
    out = checkpoint.run(TEXTS[0])
    T = len(out.tokens)
    assert np.all(np.triu(out.attentions, 1) == 0)  # no query sees a later key
    np.testing.assert_allclose(out.attentions.sum(-1), 1, rtol=1e-5)
    uniform = 1 / np.arange(1, T + 1)[:, None]  # what near-zero random weights would give
    assert np.abs(out.attentions - np.tril(np.broadcast_to(uniform, (T, T)))).max() > 0.2


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_captured_layer_gives_the_neuron_view(checkpoint, framework):
    out = checkpoint.run(TEXTS[0], framework, capture_layer=1)
    view = neuron.neuron_view(out.steps, head=2, query=4)
    code = {step.name: step.code for step in out.steps}
    assert "matmul" in code["scores"] or "@" in code["scores"]  # the backend's own line, for the page
    np.testing.assert_allclose(view.qk.sum(-1), view.scores, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(view.scaled, view.scores / np.sqrt(8), rtol=1e-5)
    assert np.isneginf(view.masked[5:]).all() and np.isfinite(view.masked[:5]).all()
    np.testing.assert_allclose(view.weights, out.attentions[1, 2, 4], rtol=1e-6)
    manual = np.exp(view.scaled[:5] - view.scaled[:5].max())
    np.testing.assert_allclose(view.weights[:5], manual / manual.sum(), rtol=1e-5)
    with pytest.raises(SpecError, match="capture_layer"):
        neuron.neuron_view(checkpoint.run("a").steps, 0, 0)


def greedy(oracle, text, n):
    ids = oracle.tokenizer(text)["input_ids"]
    for _ in range(n):
        with torch.no_grad():
            ids.append(int(oracle.model(torch.tensor([ids])).logits[0, -1].argmax()))
    return ids


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_generation_is_reproducible_and_cold_is_greedy(checkpoint, oracle, framework):
    a = checkpoint.generate("The cat", framework, max_new_tokens=6, seed=7)
    b = checkpoint.generate("The cat", framework, max_new_tokens=6, seed=7)
    assert a.output.ids == b.output.ids and len(a.new_ids) == 6
    assert a.prompt_length == len(checkpoint.encode("The cat")[0])
    others = {
        tuple(checkpoint.generate("The cat", framework, max_new_tokens=6, seed=s).new_ids) for s in range(4)
    }
    assert len(others) > 1  # the seed matters at temperature 1
    expected = greedy(oracle, "The cat", 6)
    assert checkpoint.generate("The cat", framework, 6, temperature=0).output.ids == expected
    with torch.no_grad():
        logits = oracle.model(torch.tensor([a.output.ids])).logits[0].numpy()
    assert_close(a.output.logits, logits, RTOL[framework], "logits of the generated sequence")


def test_next_token_probabilities():
    logits = np.array([1.0, 3.0, 2.0, 3.0 - 1e-3])
    p = pretrained.next_token_probabilities(logits, 1.0)
    np.testing.assert_allclose(p, np.exp(logits) / np.exp(logits).sum())
    top2 = pretrained.next_token_probabilities(logits, 2.0, top_k=2)
    z = np.exp(logits[[1, 3]] / 2)
    np.testing.assert_allclose(top2, [0, z[0] / z.sum(), 0, z[1] / z.sum()])
    assert pretrained.next_token_probabilities(logits, 0).tolist() == [0, 1, 0, 0]
    for bad in ({"temperature": -1}, {"temperature": float("nan")}, {"top_k": 0}, {"top_k": 1.5}):
        with pytest.raises(SpecError):
            pretrained.next_token_probabilities(logits, **{"temperature": 1.0, **bad})


# -- bad input ---------------------------------------------------------------------------------


def test_text_longer_than_the_positions(checkpoint):
    with pytest.raises(SpecError, match="at most 32 tokens") as info:
        checkpoint.run("the cat " * 40)
    assert info.value.field == "text"
    with pytest.raises(SpecError) as info:
        checkpoint.generate("The cat", max_new_tokens=31)
    assert info.value.field == "max_new_tokens"
    with pytest.raises(SpecError) as info:
        checkpoint.run("a", text_pair="b")
    assert info.value.field == "text_pair"


def rewrite(folder, tmp_path, *, config=None, drop=None):
    from safetensors.numpy import load_file, save_file

    out = tmp_path / "bad"
    out.mkdir()
    (out / "tokenizer.json").write_bytes((folder / "tokenizer.json").read_bytes())
    data = {**json.loads((folder / "config.json").read_text()), **(config or {})}
    (out / "config.json").write_text(json.dumps(data))
    tensors = load_file(str(folder / "model.safetensors"))
    save_file({k: v for k, v in tensors.items() if k != drop}, str(out / "model.safetensors"))
    return out


@pytest.mark.parametrize(
    ("kwargs", "file", "field"),
    [
        ({"config": {"model_type": "t5"}}, "config.json", "model_type"),
        ({"config": {"n_embd": "32"}}, "config.json", "n_embd"),
        ({"config": {"layer_norm_epsilon": 0.0}}, "config.json", "layer_norm_epsilon"),
        ({"drop": "transformer.h.1.mlp.c_fc.weight"}, "model.safetensors", "h.1.mlp.c_fc.weight"),
        ({"config": {"vocab_size": 100}}, "tokenizer.json", "vocabulary"),
        ({"config": {"n_layer": 1}}, "model.safetensors", "layers"),
        ({"config": {"tie_word_embeddings": False}}, "model.safetensors", "lm_head.weight"),
    ],
    ids=["model-type", "width-type", "eps", "missing-weight", "vocab", "layers", "untied"],
)
def test_bad_checkpoint(folder, tmp_path, kwargs, file, field):
    with pytest.raises(pretrained.CheckpointError) as info:
        pretrained.load(rewrite(folder, tmp_path, **kwargs))
    assert (info.value.file, info.value.field) == (file, field), str(info.value)


def test_labels_are_readable_text(checkpoint):
    text = "The cat sat on the mat."
    ids = checkpoint.encode(text)[0]
    labels = checkpoint.labels(ids)
    assert "".join(labels) == text and not any("Ġ" in label for label in labels)
    assert checkpoint.next_tokens(checkpoint.run(text).logits[-1], k=3)[0][1] > 0
