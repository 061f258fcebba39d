"""The seed tutorials' worked examples and teaching points, reproduced (see ../shared/seeds)."""

import math

import numpy as np
import pytest

from attnviz import AttentionSpec, init_params, make_inputs, masks, run_attention
from attnviz.frameworks import backend
from attnviz.reference import scaled_dot_product_attention as ref_sdpa
from tests.conftest import requires


def test_seed002_uniform_keys_give_mean_of_values(framework):
    """Keys all ones → every key scores the same → the context is the mean value row."""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 1, 1, 2)).astype("float32")  # (B, H, Lq, Dk)
    k = np.ones((2, 1, 10, 2), "float32")
    v = np.tile(np.arange(40, dtype="float32").reshape(1, 1, 10, 4), (2, 1, 1, 1))
    mod = backend(framework)
    as_tensor = (lambda a: mod.torch.from_numpy(a)) if framework == "torch" else mod.tf.constant
    context, weights = mod.scaled_dot_product_attention(as_tensor(q), as_tensor(k), as_tensor(v))
    np.testing.assert_allclose(np.asarray(context), [[[[18, 19, 20, 21]]]] * 2, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(weights), 0.1, rtol=1e-6)


def test_seed002_cross_attention_4_queries_over_6_keys(framework):
    spec = AttentionSpec(
        batch=2,
        len_q=4,
        mode="cross",
        len_kv=6,
        d_model=100,
        n_heads=5,
        bias=False,
        dropout=0.2,
        training=False,
    )
    ones_q, ones_kv = np.ones((2, 4, 100), "float32"), np.ones((2, 6, 100), "float32")
    result = run_attention(spec, framework, x_q=ones_q, x_kv=ones_kv)
    assert result.output.shape == (2, 4, 100)
    np.testing.assert_allclose(result.weights, 1 / 6, rtol=1e-6)  # identical keys: uniform


def _seed_tf_tutorial(q, k, v, blocked):
    """Seeds 000/003's TensorFlow recipe in NumPy: logits += mask * -1e9 (1 = blocked)."""
    logits = q @ k.swapaxes(-1, -2) / math.sqrt(k.shape[-1]) + blocked * -1e9
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_seed000_opposite_conventions_agree_once_encoded():
    rng = np.random.default_rng(2)
    q, k, v = rng.standard_normal((3, 5, 4)), rng.standard_normal((3, 7, 4)), rng.standard_normal((3, 7, 2))
    keep = masks.sliding_window(5, 7, width=3)  # True = may attend
    _, ours, _ = ref_sdpa(q, k, v, keep)
    additive = masks.to_convention(keep, "additive mask · −1e9 (TensorFlow tutorial style)")
    np.testing.assert_allclose(_seed_tf_tutorial(q, k, v, additive), ours, atol=1e-12)
    # Passing attnviz's mask where 1 means "blocked" attends to exactly the wrong keys.
    wrong = _seed_tf_tutorial(q, k, v, keep.astype(float))
    assert (wrong[:, ~keep] > 0).all() and np.allclose(wrong[:, keep], 0)


@pytest.mark.parametrize("convention", list(masks.CONVENTIONS))
def test_every_convention_round_trips(convention):
    keep = masks.strided(6, 6, stride=2)
    encoded = masks.to_convention(keep, convention)
    np.testing.assert_array_equal(masks.from_convention(encoded, convention), keep)


@requires("torch")
def test_seed001_scaling_by_sqrt_embed_size_flattens_attention():
    """Seed 001 divides by sqrt(embed_size) instead of sqrt(d_k): √heads too much."""
    spec = AttentionSpec(d_model=64, n_heads=16, len_q=12, seed=5)
    right = run_attention(spec, "torch")
    wrong = run_attention(spec.replace(scale=1 / math.sqrt(spec.d_model)), "torch")
    np.testing.assert_allclose(wrong.step("scaled").value, right.step("scaled").value / 4, rtol=1e-5)
    entropy = lambda w: -(w * np.log(w)).sum(-1).mean()  # noqa: E731
    assert entropy(wrong.weights) > entropy(right.weights)


@requires("torch", "tensorflow")
def test_seed004_temperature_residual_and_layer_norm():
    """jadore801120's MultiHeadAttention: no bias, q / temperature, fc, + residual, LayerNorm(1e-6)."""
    torch = backend("torch").torch
    spec = AttentionSpec(d_model=24, n_heads=3, d_k=5, d_v=6, bias=False, residual_norm=True, mask="causal")
    params, (x, _) = init_params(spec), make_inputs(spec)
    t = {k: torch.from_numpy(v) for k, v in params.items()}
    xt, temperature = torch.from_numpy(x), spec.d_k**0.5
    heads = lambda a, d: a.view(1, 8, 3, d).transpose(1, 2)  # noqa: E731
    q, k, v = heads(xt @ t["W_q"], 5), heads(xt @ t["W_k"], 5), heads(xt @ t["W_v"], 6)
    attn = torch.matmul(q / temperature, k.transpose(2, 3))
    attn = attn.masked_fill(torch.from_numpy(masks.causal(8)) == 0, -1e9).softmax(-1)
    out = (attn @ v).transpose(1, 2).reshape(1, 8, 18) @ t["W_o"] + xt
    out = torch.nn.functional.layer_norm(out, (24,), t["ln_gamma"], t["ln_beta"], eps=1e-6)
    for framework in ("torch", "tensorflow"):
        result = run_attention(spec, framework)
        np.testing.assert_allclose(result.output, out.numpy(), atol=2e-5)
        np.testing.assert_allclose(result.weights, attn.numpy(), atol=1e-6)
