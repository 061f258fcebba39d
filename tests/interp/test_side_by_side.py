"""Two decoders side by side (issue 31 §3): every number against an independent computation.

Tiny random GPT-2, Llama (GQA; tied and untied unembedding) and Gemma 3 (local and global layers,
MQA, QK-norm) built with transformers here: sink strength, attention span and the role scan's scores
from transformers' own attentions with NumPy loops written from the definitions; parameters by part
from transformers' `named_parameters` (and their total from `sum(p.numel())`); KV bytes per token
from the transformers config. The real SmolLM2 and Gemma 3 270M (slow): parameters by part from the
GGUF files' own tensor table (Gemma: 167,772,160 of 268,098,176 in the embedding).
"""

from __future__ import annotations

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.errors import SpecError
from attnviz.interp.side_by_side import PARTS, parameter_counts, relative_depth, side_by_side, summary
from tests.conftest import RTOL_MODEL, requires
from tests.kernels.test_decoding import make_tiny_gemma
from tests.pretrained.test_gpt2 import make_tiny_gpt2
from tests.pretrained.test_llama import make_tiny_llama

transformers = pytest.importorskip("transformers", reason="transformers (the oracle) is not installed")
torch = pytest.importorskip("torch")

FRAMEWORKS = [pytest.param("torch"), pytest.param("tensorflow", marks=requires("tensorflow"))]
FAMILIES = ["gpt2", "llama", "llama_untied", "gemma"]
TEXT = "The quick brown fox jumps over the lazy dog."
SCAN = {"half": 6, "n": 2, "seed": 1}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("side")
    return {
        "gpt2": make_tiny_gpt2(root / "gpt2"),
        "llama": make_tiny_llama(root / "llama"),
        "llama_untied": make_tiny_llama(root / "llama_untied", tie=False, seed=1),
        "gemma": make_tiny_gemma(root / "gemma"),
    }


@pytest.fixture(scope="module")
def models(folders):
    """name → (attnviz checkpoint, transformers' eager model of the same folder)."""
    return {
        name: (
            pretrained.load(folder),
            transformers.AutoModelForCausalLM.from_pretrained(
                str(folder), attn_implementation="eager"
            ).eval(),
        )
        for name, folder in folders.items()
    }


def hf_attentions(model, ids) -> np.ndarray:
    """transformers' `(L, H, T, T)` attentions, float64."""
    with torch.no_grad():
        out = model(torch.tensor([list(ids)]), output_attentions=True)
    return torch.stack(out.attentions)[:, 0].double().numpy()


def loop_sink_and_span(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The definitions as loops: weight on key 0 from queries ≥ 1; Σ_j a·(i − j) over all queries."""
    L, H, T, _ = a.shape
    sink, span = np.zeros(L), np.zeros(L)
    for layer in range(L):
        for h in range(H):
            for i in range(T):
                if i >= 1:
                    sink[layer] += a[layer, h, i, 0] / (H * (T - 1))
                span[layer] += sum(a[layer, h, i, j] * (i - j) for j in range(i + 1)) / (H * T)
    return sink, span


def hf_parts(model) -> dict[str, int]:
    """transformers' parameters (tied ones once, as `named_parameters` gives them) by their names."""
    parts = dict.fromkeys(PARTS, 0)
    for name, p in model.named_parameters():
        if any(k in name for k in ("wte", "wpe", "embed_tokens")):
            part = "embedding"
        elif "norm" in name or ".ln_" in name or "ln_f" in name:
            part = "norms"
        elif "attn" in name:
            part = "attention"
        elif "mlp" in name:
            part = "mlp"
        else:
            assert name.startswith("lm_head"), name
            part = "unembedding"
        parts[part] += p.numel()
    return parts


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("family", FAMILIES)
def test_every_number_against_transformers(models, family, framework):
    ckpt, hf = models[family]
    got = summary(ckpt, TEXT, framework, **SCAN)
    ids = ckpt.encode(TEXT)[0]
    sink, span = loop_sink_and_span(hf_attentions(hf, ids))
    tol = 10 * RTOL_MODEL[framework]
    np.testing.assert_allclose(got.sink, sink, rtol=tol, atol=1e-6)
    np.testing.assert_allclose(got.span, span, rtol=tol, atol=1e-6)
    assert np.all(got.span > 0) and np.all(got.span < len(ids))
    L = hf.config.num_hidden_layers
    np.testing.assert_allclose(got.depth, [layer / (L - 1) for layer in range(L)])
    # the role scan's scores from transformers' attentions on the scan's own sequences
    half, attn = SCAN["half"], np.stack([hf_attentions(hf, row) for row in got.roles.ids])  # (N, L, H, T, T)
    t = np.arange(half, 2 * half)
    first = attn[..., 1:, 0].mean(axis=(0, 3))  # (L, H)
    previous = attn[..., np.arange(1, 2 * half), np.arange(2 * half - 1)].mean(axis=(0, 3))
    induction = attn[..., t, t - half + 1].mean(axis=(0, 3))
    for role, expected in (("first_token", first), ("previous_token", previous), ("induction", induction)):
        np.testing.assert_allclose(got.roles.scores[role], expected, rtol=tol, atol=1e-6, err_msg=role)
        np.testing.assert_allclose(got.role_peak(role), expected.max(axis=1), rtol=tol, atol=1e-6)
    # parameters and KV bytes
    assert got.parameters == hf_parts(hf)
    assert got.total == sum(p.numel() for p in hf.parameters())
    cfg = hf.config
    kv_heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    assert got.kv.per_token == 2 * L * kv_heads * head_dim * 4
    assert got.kv.per_token_mha == 2 * L * cfg.num_attention_heads * head_dim * 4


def test_layer_types_unembedding_and_the_pair(models):
    gemma, llama = models["gemma"][0], models["llama_untied"][0]
    first, second = side_by_side(gemma, llama, TEXT, "torch", **SCAN)
    assert first.layer_types == ("local", "local", "global", "local") and second.layer_types is None
    assert first.name == gemma.name and second.name == llama.name
    assert first.tokens == gemma.labels(gemma.encode(TEXT)[0])
    assert first.parameters["unembedding"] == 0 < second.parameters["unembedding"]
    assert first.kv.layout == "MQA" and second.kv.layout == "GQA"
    assert first.kv.at(4096) < 4096 * first.kv.per_token  # local layers hold only their window


def test_relative_depth_of_one_layer():
    np.testing.assert_array_equal(relative_depth(1), [0.0])
    np.testing.assert_array_equal(relative_depth(3), [0.0, 0.5, 1.0])


def test_bad_input_names_the_field(models):
    gpt2 = models["gpt2"][0]
    for text, field in (("a", "text"), ("", "text")):
        with pytest.raises(SpecError) as error:
            summary(gpt2, text, "torch", **SCAN)
        assert error.value.field == field
    with pytest.raises(SpecError) as error:
        summary(gpt2, TEXT, "torch", half=0)
    assert error.value.field == "half"
    with pytest.raises(SpecError) as error:
        summary(gpt2, TEXT, "jax", **SCAN)
    assert error.value.field == "framework"


def gguf_parts(file) -> dict[str, int]:
    """Parameters by part from a GGUF file's own tensor table (llama.cpp's names)."""
    import gguf

    parts = dict.fromkeys(PARTS, 0)
    for t in gguf.GGUFReader(str(file)).tensors:
        kind = t.name.split(".")[-2] if t.name.startswith("blk.") else t.name.split(".")[0]
        part = (
            "embedding" if kind == "token_embd"
            else "unembedding" if kind == "output"
            else "norms" if kind.endswith("norm")
            else "attention" if kind.startswith("attn_")
            else "mlp" if kind.startswith("ffn_")
            else kind
        )  # fmt: skip
        parts[part] += int(t.n_elements)
    return parts


@pytest.mark.slow
@pytest.mark.parametrize("name", ["SmolLM2-135M-Instruct", "gemma-3-270m"])
def test_real_parameters_against_the_gguf_files(name, gemma_cache):
    if name not in pretrained.local_checkpoints():
        pytest.skip(f"{name} is not installed here: {pretrained.not_installed().get(name)}")
    from attnviz.pretrained import gguf

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(gguf.ENV_CACHE_DIR, str(gemma_cache))
        pretrained.CACHE.clear()
        ckpt = pretrained.load_choice(name)
    counts = parameter_counts(ckpt)
    pretrained.CACHE.clear()
    assert counts == gguf_parts(pretrained.local_checkpoints()[name])
    if name == "gemma-3-270m":
        assert counts["embedding"] == 262_144 * 640 == 167_772_160
        assert sum(counts.values()) == 268_098_176 and counts["unembedding"] == 0
