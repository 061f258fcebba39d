"""Generation over a KV cache (issue 29 §1) gives what rerunning the whole sequence gives, and what
transformers' own cached `generate` gives.

Tiny random models of every decoder family (GPT-2 and Llama built with transformers, as
tests/pretrained/test_gpt2.py and tests/pretrained/test_llama.py build them; a Training-lab model trained for a step):
cached and uncached generation draw the same tokens from the same per-step logits (within the
suite's model tolerance); greedy tokens equal `transformers.generate` (its own KV cache); the cache
holds keys and values per K/V head (GQA's saving in bytes); a layer with a sliding window keeps
only its window and a per-layer RoPE base is a row of the layout, not a new model.
SmolLM2 against transformers' `generate` is tests/pretrained/test_smollm2.py (slow), which now runs cached.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from attnviz import pretrained
from attnviz import training as tr
from attnviz.pretrained.families.layouts import llama_layout
from attnviz.pretrained.model import Checkpoint
from tests.conftest import RTOL_MODEL, assert_close, requires
from tests.pretrained.test_gpt2 import make_tiny_gpt2
from tests.pretrained.test_llama import make_tiny_llama

transformers = pytest.importorskip("transformers", reason="transformers (the oracle) is not installed")
torch = pytest.importorskip("torch")

FRAMEWORKS = [pytest.param("torch"), pytest.param("tensorflow", marks=requires("tensorflow"))]
FAMILIES = ["gpt2", "llama", "lab"]
PROMPTS = {"gpt2": "The cat", "llama": "The quick brown", "lab": "1 2 3"}
LAB = tr.TrainConfig(
    task="induction", seq_len=12, vocab=12, n_layers=2, n_heads=2, d_model=16, causal=True, mlp=True,
    steps=1, snapshot_every=1, batch=4,
)  # fmt: skip


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("kv")
    return {
        "gpt2": make_tiny_gpt2(root / "gpt2"),
        "llama": make_tiny_llama(root / "llama"),
        "lab": tr.train(LAB, "torch").save(root / "lab"),
    }


@pytest.fixture(scope="module")
def checkpoints(folders):
    return {name: pretrained.load(folder) for name, folder in folders.items()}


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("temperature", [0, 1.0], ids=["greedy", "sampled"])
def test_cached_generation_equals_rerunning_the_sequence(checkpoints, family, framework, temperature):
    ckpt = checkpoints[family]
    n = 6 if family == "lab" else 8
    cached = ckpt.generate(PROMPTS[family], framework, n, temperature=temperature, seed=3)
    full = ckpt.generate(PROMPTS[family], framework, n, temperature=temperature, seed=3, cache=False)
    assert cached.new_ids == full.new_ids and len(cached.new_ids) == n
    assert cached.logits.shape == full.logits.shape == (n, ckpt.config.vocab_size)
    assert_close(cached.logits, full.logits, RTOL_MODEL[framework], "per-step logits")
    assert full.cache_bytes is None
    # what the page draws is a full run of the final text, cached or not
    again = ckpt.run_ids(cached.output.ids, framework)
    np.testing.assert_array_equal(cached.output.attentions, again.attentions)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_greedy_tokens_equal_transformers_generate(checkpoints, folders, family, framework):
    cls = transformers.GPT2LMHeadModel if family == "gpt2" else transformers.LlamaForCausalLM
    model = cls.from_pretrained(str(folders[family]), attn_implementation="eager").eval()
    ids = checkpoints[family].encode(PROMPTS[family])[0]
    with torch.no_grad():
        expected = model.generate(
            torch.tensor([ids]), max_new_tokens=8, do_sample=False, pad_token_id=0, eos_token_id=None
        )[0].tolist()
    got = checkpoints[family].generate(PROMPTS[family], framework, 8, temperature=0)
    assert got.output.ids == expected


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_cache_holds_keys_and_values_per_kv_head(checkpoints, framework):
    """Llama: 4 query heads read 2 K/V heads, so the cache is half of multi-head attention's."""
    ckpt = checkpoints["llama"]
    cfg = ckpt.config
    gen = ckpt.generate(PROMPTS["llama"], framework, 5, temperature=0)
    cached = len(gen.output.ids) - 1  # the last token is drawn, never run
    per_position = cfg.num_hidden_layers * 2 * cfg.num_key_value_heads * cfg.head_dim * 4  # K and V, float32
    assert cfg.num_key_value_heads < cfg.num_attention_heads
    assert gen.cache_bytes == cached * per_position
    cache = ckpt.model(framework).new_cache()
    ckpt.model(framework).step(gen.output.ids[:4], cache)
    assert tuple(cache.keys[0].shape) == (1, cfg.num_key_value_heads, 4, cfg.head_dim)


def windowed(ckpt: Checkpoint, window: int) -> Checkpoint:
    """`ckpt` with layer 0 a sliding-window layer and layer 1 given its own RoPE base: a row, not a file."""

    def layout(cfg):
        base = llama_layout(cfg)
        local = dataclasses.replace(
            base.layers[0], heads=dataclasses.replace(base.layers[0].heads, window=window)
        )
        glob = dataclasses.replace(
            base.layers[1], heads=dataclasses.replace(base.layers[1].heads, rope_base=500.0)
        )
        return dataclasses.replace(base, layers=(local, glob, *base.layers[2:]))

    family = dataclasses.replace(ckpt.family, layout=layout)
    return Checkpoint("windowed", ckpt.path, ckpt.config, ckpt.weights, ckpt.tokenizer, family)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_sliding_window_layer_keeps_only_its_window(checkpoints, framework):
    ckpt, window = windowed(checkpoints["llama"], 3), 3
    text = PROMPTS["llama"]
    cached = ckpt.generate(text, framework, 8, temperature=0)
    full = ckpt.generate(text, framework, 8, temperature=0, cache=False)
    assert cached.new_ids == full.new_ids
    assert_close(cached.logits, full.logits, RTOL_MODEL[framework], "per-step logits")
    # the window changes the model: layer 0's attention is banded
    attn = cached.output.attentions[0]  # (H, T, T)
    T = attn.shape[-1]
    i, j = np.indices((T, T))
    assert np.all(attn[:, (i - j) >= window] == 0) and window < T
    assert not np.allclose(
        cached.logits, checkpoints["llama"].generate(text, framework, 8, temperature=0).logits
    )
    cache = ckpt.model(framework).new_cache()
    ckpt.model(framework).step(cached.output.ids, cache)
    assert cache.keys[0].shape[2] == window and cache.keys[1].shape[2] == T
    assert cache.length == T
