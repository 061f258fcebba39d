"""Direct logit attribution, the QK and OV circuits, copying scores and composition on Gemma 3
(issue 30, issue 31 §3), against transformers' own `Gemma3ForCausalLM` on the tiny random model of
tests/pretrained/test_gemma3.py (local and global layers, MQA, QK-norm, sandwich norms with random weights).

The oracles read transformers' modules and activations, never attnviz's weight tables:
- DLA: each head's input to `o_proj` (a pre-hook), its slice of `o_proj`, the post-attention norm
  with the divisor of the block's output (the norm's own input, hooked) and the final norm's
  divisor, against `lm_head`'s rows — and the parts add up to the model's logit difference;
- QK: layer 0's `q_norm` / `k_norm` outputs on the tokens, turned by transformers' own rotary
  embedding at the query's and the key's positions;
- OV: embeddings through `input_layernorm`, `v_proj`, the head's `o_proj` slice, the post-attention
  norm's gain and the final norm's gain, against the tied unembedding;
- copying scores: the eigenvalues of the full `(V, V)` OV circuit built from those modules;
- composition: ‖·‖_F ratios of the folded matrices built from those modules, pair by pair.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.interp import dla, qkov
from tests.conftest import RTOL_MODEL, assert_close, requires
from tests.pretrained.test_gemma3 import tiny  # noqa: F401 — the tiny model and its checkpoint, module-scoped

transformers = pytest.importorskip("transformers", reason="transformers (the oracle) is not installed")
torch = pytest.importorskip("torch")

FRAMEWORKS = [pytest.param("torch"), pytest.param("tensorflow", marks=requires("tensorflow"))]
TEXT = "The cat sat on the mat because it was"
ANSWER, WRONG = " the", " tired"


def gain(norm) -> np.ndarray:
    return 1.0 + norm.weight.detach().double().numpy()  # Gemma3RMSNorm scales by 1 + w


def rms(x: np.ndarray, eps: float) -> np.ndarray:
    return np.sqrt((x**2).mean(-1) + eps)


def dla_oracle(model, ids: list[int], a: int, w: int) -> tuple[np.ndarray, float]:
    """`(L, H)` each head's direct term at the last position, and the model's logit difference."""
    cfg, layers = model.config, model.model.layers
    H, Dh = cfg.num_attention_heads, cfg.head_dim
    z, block, final = {}, {}, {}
    hooks = [
        *(lay.self_attn.o_proj.register_forward_pre_hook(
            lambda _m, args, i=i: z.__setitem__(i, args[0][0, -1].double().numpy())) for i, lay in enumerate(layers)),
        *(lay.post_attention_layernorm.register_forward_pre_hook(
            lambda _m, args, i=i: block.__setitem__(i, args[0][0, -1].double().numpy())) for i, lay in enumerate(layers)),
        model.model.norm.register_forward_pre_hook(lambda _m, args: final.__setitem__(0, args[0][0, -1].double().numpy())),
    ]  # fmt: skip
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, -1].double().numpy()
    for hook in hooks:
        hook.remove()
    U = model.lm_head.weight.detach().double().numpy()
    u = (U[a] - U[w]) * gain(model.model.norm) / rms(final[0], cfg.rms_norm_eps)  # (D,)
    terms = np.zeros((len(layers), H))
    for i, lay in enumerate(layers):
        W_o = lay.self_attn.o_proj.weight.detach().double().numpy()  # (D, H·Dh)
        post = gain(lay.post_attention_layernorm) / rms(block[i], cfg.rms_norm_eps)  # (D,)
        for h in range(H):
            written = W_o[:, h * Dh : (h + 1) * Dh] @ z[i][h * Dh : (h + 1) * Dh]  # (D,)
            terms[i, h] = (written * post) @ u
    return terms, float(logits[a] - logits[w])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_logit_attribution_matches_transformers_and_adds_up(tiny, framework):  # noqa: F811
    ckpt, model = tiny
    ids = ckpt.encode(TEXT)[0]
    a, w = (ckpt.encode(t)[0][0] for t in (ANSWER, WRONG))
    parts = dla.decompose(ckpt, TEXT, a, w, framework)
    expected, diff = dla_oracle(model, ids, a, w)
    assert_close(parts.heads, expected, RTOL_MODEL[framework] * 10, "heads' direct terms")
    assert parts.logit_diff == pytest.approx(diff, rel=RTOL_MODEL[framework] * 10, abs=1e-5)
    assert parts.total == pytest.approx(parts.logit_diff, rel=1e-5, abs=1e-5)  # every part counted once


def layer0_qk(model, ids: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Layer 0's q and k `(1, H, n, Dh)` of each token after QK-norm, before RoPE (transformers' modules)."""
    cfg, attn = model.config, model.model.layers[0].self_attn
    with torch.no_grad():
        x = model.model.layers[0].input_layernorm(model.model.embed_tokens(torch.tensor([ids])))
        q = attn.q_norm(attn.q_proj(x).view(1, len(ids), -1, cfg.head_dim)).transpose(1, 2)
        k = attn.k_norm(attn.k_proj(x).view(1, len(ids), -1, cfg.head_dim)).transpose(1, 2)
    return q, k


@pytest.mark.parametrize("offset", [0, 1, 3])
def test_qk_table_is_transformers_score_at_that_distance(tiny, offset):  # noqa: F811
    from transformers.models.gemma3.modeling_gemma3 import apply_rotary_pos_emb

    ckpt, model = tiny
    ids = list(dict.fromkeys(ckpt.encode(TEXT)[0]))[:6]
    table = qkov.qk_table(ckpt, 0, 2, ids, offset)
    q, k = layer0_qk(model, ids)
    x = torch.zeros(1, 1, model.config.hidden_size)
    layer_type = model.config.layer_types[0]
    turned = {}
    for name, where in (("q", offset), ("k", 0)):  # every token at the query's, then the key's position
        cos, sin = model.model.rotary_emb(x, torch.full((1, len(ids)), where), layer_type)
        turned[name] = apply_rotary_pos_emb(q, k, cos, sin)[0 if name == "q" else 1]
    scores = (
        turned["q"][0, 2] @ turned["k"][0, 0].T * model.config.query_pre_attn_scalar**-0.5
    )  # head 2, K/V 0
    np.testing.assert_allclose(table.values, scores.double().numpy(), rtol=1e-4, atol=1e-5)


def folded_from_modules(model, layer: int) -> dict[str, np.ndarray]:
    """Per head `W_Q, W_K, W_V (H, D, Dh)` and `W_O (H, Dh, D)` from transformers' modules, with the
    input norm's, the QK-norm's and the post-attention norm's gains folded in."""
    cfg, lay = model.config, model.model.layers[layer]
    H, Hkv, Dh = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    g_in = gain(lay.input_layernorm)[:, None]

    def heads(proj, n, norm=None):  # (n·Dh, D) → (H, D, Dh), K/V heads repeated
        W = proj.weight.detach().double().numpy().T.reshape(-1, n, Dh).transpose(1, 0, 2) * g_in
        W = W * gain(norm) if norm is not None else W
        return np.repeat(W, H // n, axis=0)

    attn = lay.self_attn
    W_O = attn.o_proj.weight.detach().double().numpy().T.reshape(H, Dh, -1) * gain(
        lay.post_attention_layernorm
    )
    return {
        "W_Q": heads(attn.q_proj, H, attn.q_norm), "W_K": heads(attn.k_proj, Hkv, attn.k_norm),
        "W_V": heads(attn.v_proj, Hkv), "W_O": W_O,
    }  # fmt: skip


def test_ov_table_and_copying_scores_from_transformers_modules(tiny):  # noqa: F811
    ckpt, model = tiny
    ids = list(dict.fromkeys(ckpt.encode(TEXT)[0]))[:6]
    layer, head = 2, 1
    V = ckpt.n_tokens
    with torch.no_grad():
        E = model.model.embed_tokens(torch.arange(V)[None])[0].double()  # scaled by √D
        E = model.model.layers[layer].input_layernorm(E.float()).double().numpy()  # (V, D)
    W = folded_from_modules(model, layer)
    g_in = gain(model.model.layers[layer].input_layernorm)
    W_V = W["W_V"][head] / g_in[:, None]  # E is normed with its gain already
    U = model.lm_head.weight.detach().double().numpy()[:V] * gain(model.model.norm)  # (V, D)
    full = E @ W_V @ W["W_O"][head] @ U.T  # (V, V): attending to token i raises logit j
    table = qkov.ov_table(ckpt, layer, head, ids)
    np.testing.assert_allclose(table.values, full[np.ix_(ids, ids)], rtol=1e-4, atol=1e-6)
    lam = np.linalg.eigvals(full)
    assert qkov.copying_scores(ckpt)[layer, head] == pytest.approx(
        lam.sum().real / np.abs(lam).sum(), abs=1e-6
    )


@pytest.mark.parametrize("kind", ["q", "k", "v"])
def test_composition_from_transformers_modules(tiny, kind):  # noqa: F811
    ckpt, model = tiny
    comp = qkov.composition_scores(ckpt, kind)
    early, late = folded_from_modules(model, 0), folded_from_modules(model, 2)
    for h1, h2 in [(0, 0), (1, 3), (3, 2)]:
        W_OV = early["W_V"][h1] @ early["W_O"][h1]  # (D, D), row layout
        later = {
            "q": late["W_Q"][h2] @ late["W_K"][h2].T,
            "k": late["W_K"][h2] @ late["W_Q"][h2].T,
            "v": late["W_V"][h2] @ late["W_O"][h2],
        }[kind]
        expected = np.linalg.norm(W_OV @ later) / (np.linalg.norm(W_OV) * np.linalg.norm(later))
        assert comp.scores[2, h2, 0, h1] == pytest.approx(expected, rel=1e-5)
