"""Grouped K/V heads, rotary positions and the sliding window, proven against independent code.

Oracles: the float64 NumPy reference (≤ 1e-10), PyTorch's
`F.scaled_dot_product_attention(enable_gqa=True)` with transformers' Llama rotary
embedding (`LlamaRotaryEmbedding` + `apply_rotary_pos_emb`), and Keras's
`GroupQueryAttention` (with its `sliding_window`), each holding attnviz's
parameters (≤ 1e-5 in float32).
"""

import json

import numpy as np
import pytest

from attnviz import AttentionSpec, expected_steps, init_params, make_inputs, masks, reference, run_attention
from attnviz.errors import SpecError
from attnviz.frameworks import backend, is_installed
from attnviz.params import kv_cache_bytes, kv_cache_table
from attnviz.reference import multi_head_attention, rope
from attnviz.result import Recorder
from attnviz.run import estimate_bytes
from tests.conftest import RTOL_F32, RTOL_F64, assert_close, requires

# (fields) — shapes, groupings and options the proofs run over.
SHAPES = [
    {"n_heads": 4, "n_kv_heads": 2},
    {"n_heads": 4, "n_kv_heads": 1, "mask": "causal"},
    {"n_heads": 8, "n_kv_heads": 2, "d_model": 64, "len_q": 12, "rope_base": 10000.0, "mask": "causal"},
    {"n_heads": 6, "n_kv_heads": 3, "d_model": 48, "batch": 2, "rope_base": 500000.0, "bias": False},
    {"n_heads": 2, "rope_base": 100.0, "len_q": 16, "mask": "causal", "window": 4},
    {"n_heads": 9, "n_kv_heads": 3, "d_model": 36, "len_q": 10, "rope_base": 100000.0, "mask": "causal", "window": 3},
    {"n_heads": 4, "n_kv_heads": 2, "mode": "cross", "len_kv": 7, "d_kv_in": 10, "rope_base": 50.0, "batch": 3},
]  # fmt: skip


def case_id(case: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in case.items())


@pytest.mark.parametrize("case", SHAPES, ids=case_id)
def test_every_step_matches_the_float64_reference(framework, case):
    spec = AttentionSpec(dtype="float64", **case)
    ref = multi_head_attention(spec, init_params(spec), *make_inputs(spec))
    result = run_attention(spec, framework)
    assert [s.name for s in result.steps] == expected_steps(spec) == list(ref)
    for step in result.steps:
        finite = np.isfinite(ref[step.name])
        assert (np.isfinite(step.value) == finite).all(), step.name
        assert_close(step.value[finite], ref[step.name][finite], RTOL_F64, f"{framework} {step.name}")
    assert_close(result.weights, ref["softmax"], RTOL_F64, "weights")
    assert_close(result.output, ref["output_proj"], RTOL_F64, "output")


@requires("torch", "tensorflow")
@pytest.mark.parametrize("case", SHAPES, ids=case_id)
def test_both_frameworks_agree_in_float32(case):
    spec = AttentionSpec(**case)
    a, b = run_attention(spec, "torch"), run_attention(spec, "tensorflow")
    assert [(s.name, s.shape) for s in a.steps] == [(s.name, s.shape) for s in b.steps]
    assert_close(a.output, b.output, RTOL_F32, "output")
    assert_close(a.weights, b.weights, RTOL_F32, "weights")


def test_steps_and_shapes_name_the_kv_heads():
    spec = AttentionSpec(batch=2, len_q=5, d_model=24, n_heads=6, n_kv_heads=2, rope_base=1e4)
    ref = multi_head_attention(spec, init_params(spec), *make_inputs(spec))
    shapes = {name: value.shape for name, value in ref.items()}
    assert shapes["k_proj"] == (2, 5, 2 * 4) and shapes["k_heads"] == (2, 2, 5, 4)
    assert shapes["q_rope"] == (2, 6, 5, 4) and shapes["k_rope"] == (2, 2, 5, 4)
    assert shapes["k_repeated"] == (2, 6, 5, 4) and shapes["v_repeated"] == (2, 6, 5, 4)
    for h in range(6):  # query head h reads K/V head h // 3
        np.testing.assert_array_equal(ref["k_repeated"][:, h], ref["k_rope"][:, h // 3])
        np.testing.assert_array_equal(ref["v_repeated"][:, h], ref["v_heads"][:, h // 3])
    params = init_params(spec)
    assert params["W_k"].shape == (24, 8) and params["W_v"].shape == (24, 8) and params["b_k"].shape == (8,)


def test_rotary_scores_depend_only_on_the_offset():
    """The same q and k at every position: after RoPE, q_i·k_j is a function of i − j alone."""
    rng = np.random.default_rng(0)
    L, D = 12, 8
    q = np.broadcast_to(rng.standard_normal(D), (L, D))
    k = np.broadcast_to(rng.standard_normal(D), (L, D))
    scores = rope(q, 100.0) @ rope(k, 100.0).T  # (L, L)
    for offset in range(-L + 1, L):
        diagonal = np.diagonal(scores, -offset)
        assert np.ptp(diagonal) < 1e-12, offset
    assert np.ptp([np.diagonal(scores, -o)[0] for o in range(L)]) > 0.1  # but it does change with the offset


def test_rope_is_a_rotation_of_each_pair():
    x = np.random.default_rng(1).standard_normal((3, 7, 10))
    turned = rope(x, 10000.0)
    pairs = lambda a: np.hypot(a[..., :5], a[..., 5:])  # noqa: E731  |(x_i, x_{i+5})|
    np.testing.assert_allclose(pairs(turned), pairs(x), rtol=1e-12)
    np.testing.assert_array_equal(turned[:, 0], x[:, 0])  # position 0 is not turned


# -- PyTorch and transformers -----------------------------------------------------------------


def _torch_reference(spec, params, x_q, x_kv, dtype):
    """Projections, transformers' Llama RoPE, `F.scaled_dot_product_attention(enable_gqa=True)`."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    pytest.importorskip("transformers")
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    t = lambda a: torch.from_numpy(np.asarray(a, dtype))  # noqa: E731
    bias = (lambda n: t(params[n])) if spec.bias else (lambda n: 0.0)
    B, Lq, Lk, H, Hkv, Dk = spec.batch, spec.len_q, spec.len_kv, spec.n_heads, spec.n_kv_heads, spec.d_k
    q = (t(x_q) @ t(params["W_q"]) + bias("b_q")).view(B, Lq, H, Dk).transpose(1, 2)
    k = (t(x_kv) @ t(params["W_k"]) + bias("b_k")).view(B, Lk, Hkv, Dk).transpose(1, 2)
    v = (t(x_kv) @ t(params["W_v"]) + bias("b_v")).view(B, Lk, Hkv, spec.d_v).transpose(1, 2)
    if spec.rope_base is not None:
        config = LlamaConfig(
            hidden_size=spec.d_model, num_attention_heads=H, head_dim=Dk, rope_theta=spec.rope_base
        )
        rotary = LlamaRotaryEmbedding(config)
        cos_q, sin_q = rotary(q, torch.arange(Lq)[None])
        cos_k, sin_k = rotary(k, torch.arange(Lk)[None])
        q, _ = apply_rotary_pos_emb(q, q, cos_q, sin_q)
        _, k = apply_rotary_pos_emb(k, k, cos_k, sin_k)
    mask = masks.from_spec(spec)
    mask = None if mask is None else torch.from_numpy(mask[:, None])
    context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=spec.head_scale, enable_gqa=True)
    merged = context.transpose(1, 2).reshape(B, Lq, H * spec.d_v)
    return (merged @ t(params["W_o"]) + bias("b_o")).numpy()


@requires("torch")
@pytest.mark.parametrize("case", SHAPES, ids=case_id)
def test_torch_matches_sdpa_with_gqa_and_transformers_rope(case):
    spec = AttentionSpec(**case)
    params, (x_q, x_kv) = init_params(spec), make_inputs(spec)
    expected = _torch_reference(spec, params, x_q, x_kv, np.float32)
    assert_close(run_attention(spec, "torch").output, expected, RTOL_F32, "output")


@requires("torch")
def test_transformers_rope_equals_attnviz_rope_in_float64():
    """Our rotation and transformers' `apply_rotary_pos_emb`, both in float64, on the same angles."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    from attnviz.backends.torch_backend.attention import rotary

    x = torch.from_numpy(np.random.default_rng(2).standard_normal((2, 3, 9, 16)))
    cos, sin = rotary(9, 16, 10000.0, x)
    theirs, _ = apply_rotary_pos_emb(x, x, cos[None], sin[None])
    assert_close(theirs.numpy(), rope(x.numpy(), 10000.0), RTOL_F64, "rope")


# -- Keras ---------------------------------------------------------------------------------


@requires("tensorflow")
@pytest.mark.parametrize("case", [c for c in SHAPES if "rope_base" not in c and "mode" not in c], ids=case_id)
def test_tensorflow_matches_keras_group_query_attention(case):
    spec = AttentionSpec(**case)
    params, (x_q, _) = init_params(spec), make_inputs(spec)
    tf_backend = backend("tensorflow")
    keras = tf_backend.keras
    H, Hkv, Dk = spec.n_heads, spec.n_kv_heads, spec.d_k
    gqa = keras.layers.GroupQueryAttention(
        head_dim=Dk, num_query_heads=H, num_key_value_heads=Hkv, use_bias=spec.bias
    )
    gqa(x_q, x_q)  # builds the sublayers
    for key, layer, heads in (
        ("q", gqa._query_dense, H),
        ("k", gqa._key_dense, Hkv),
        ("v", gqa._value_dense, Hkv),
    ):
        layer.kernel.assign(params[f"W_{key}"].reshape(spec.d_model, heads, Dk))
        if spec.bias:
            layer.bias.assign(params[f"b_{key}"].reshape(heads, Dk))
    gqa._output_dense.kernel.assign(params["W_o"].reshape(H, Dk, spec.d_model))
    if spec.bias:
        gqa._output_dense.bias.assign(params["b_o"])
    out, scores = gqa(x_q, x_q, use_causal_mask=spec.mask == "causal", return_attention_scores=True)
    result = run_attention(spec, "tensorflow")
    assert_close(result.output, np.asarray(out), RTOL_F32, "output")
    assert_close(result.weights, np.asarray(scores), RTOL_F32, "weights")


@requires("tensorflow")
@pytest.mark.parametrize("window", [1, 3, 6])
def test_tensorflow_window_matches_keras_sliding_window(window):
    spec = AttentionSpec(len_q=9, d_model=16, n_heads=4, n_kv_heads=2, mask="causal", window=window)
    params, (x_q, _) = init_params(spec), make_inputs(spec)
    keras = backend("tensorflow").keras
    gqa = keras.layers.GroupQueryAttention(
        head_dim=4, num_query_heads=4, num_key_value_heads=2, sliding_window=window
    )
    gqa(x_q, x_q)
    for key, layer, heads in (
        ("q", gqa._query_dense, 4),
        ("k", gqa._key_dense, 2),
        ("v", gqa._value_dense, 2),
    ):
        layer.kernel.assign(params[f"W_{key}"].reshape(16, heads, 4))
        layer.bias.assign(params[f"b_{key}"].reshape(heads, 4))
    gqa._output_dense.kernel.assign(params["W_o"].reshape(4, 4, 16))
    gqa._output_dense.bias.assign(params["b_o"])
    out, scores = gqa(x_q, x_q, use_causal_mask=True, return_attention_scores=True)
    result = run_attention(spec, "tensorflow")
    assert_close(result.weights, np.asarray(scores), RTOL_F32, "weights")
    assert_close(result.output, np.asarray(out), RTOL_F32, "output")
    assert (result.weights[..., ~masks.window(9, 9, window)] == 0).all()


# -- the layers themselves: window applied by the layer, bad arguments refused ---------------


@pytest.mark.parametrize("window", [1, 2, 5])
def test_the_layer_applies_its_window_without_a_mask(framework, window):
    """`MultiHeadAttention(window=…)` called with no mask attends within the causal window only."""
    spec = AttentionSpec(
        len_q=7, d_model=16, n_heads=4, n_kv_heads=2, rope_base=1e4, mask="causal", window=window
    )
    spec = spec.replace(dtype="float64")
    be = backend(framework)
    dev = be.resolve_device("cpu")
    layer = be.build_layer(spec, dev)
    params, (x_q, _) = init_params(spec), make_inputs(spec)
    layer.load_params(params)
    x = be.to_tensor(x_q, dev)
    out, weights = be.forward(layer, x, x, None, spec=spec, record=Recorder(enabled=False))
    ref = multi_head_attention(spec, params, x_q, x_q)
    assert_close(be.to_numpy(weights), ref["softmax"], RTOL_F64, "weights")
    assert_close(be.to_numpy(out), ref["output_proj"], RTOL_F64, "output")


BAD = [
    ({"n_heads": 4, "n_kv_heads": 3}, "n_kv_heads"),
    ({"n_heads": 4, "n_kv_heads": 0}, "n_kv_heads"),
    ({"n_heads": 4, "n_kv_heads": 8}, "n_kv_heads"),
    ({"n_heads": 4, "n_kv_heads": 2.0}, "n_kv_heads"),
    ({"n_heads": 4, "n_kv_heads": True}, "n_kv_heads"),
    ({"rope_base": 0}, "rope_base"),
    ({"rope_base": 1.0}, "rope_base"),
    ({"rope_base": -100.0}, "rope_base"),
    ({"rope_base": float("inf")}, "rope_base"),
    ({"rope_base": float("nan")}, "rope_base"),
    ({"rope_base": "10000"}, "rope_base"),
    ({"rope_base": True}, "rope_base"),
    ({"d_model": 30, "n_heads": 2, "rope_base": 1e4}, "d_k"),
    ({"d_k": 5, "rope_base": 1e4}, "d_k"),
    ({"mask": "causal", "window": 0}, "window"),
    ({"mask": "causal", "window": -2}, "window"),
    ({"mask": "causal", "window": 2.5}, "window"),
    ({"window": 3}, "window"),
    ({"mask": "padding", "valid_kv_len": 4, "window": 3}, "window"),
]


@pytest.mark.parametrize(("fields", "field"), BAD, ids=[f"{f}:{b}" for b, f in BAD])
def test_bad_values_are_refused_with_the_field_named(fields, field):
    with pytest.raises(SpecError) as err:
        AttentionSpec(**fields)
    assert err.value.field == field and f"AttentionSpec.{field}:" in str(err.value)
    assert "allowed:" in str(err.value)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"n_kv_heads": 3}, "n_kv_heads"), ({"rope_base": 0.5}, "rope_base"), ({"window": 0}, "window"),
])  # fmt: skip
def test_the_layers_refuse_bad_arguments_too(framework, kwargs, field):
    with pytest.raises(SpecError) as err:
        backend(framework).MultiHeadAttention(16, 4, 4, 4, **kwargs)
    assert err.value.field == field


def test_spec_round_trips_and_replace_rederives_the_kv_heads():
    spec = AttentionSpec(n_heads=4, n_kv_heads=2, rope_base=500000.0, mask="causal", window=3)
    again = AttentionSpec(**json.loads(json.dumps(spec.as_dict(raw=True))))
    assert again == spec and again.n_kv_heads == 2 and again.rope_base == 500000.0 and again.window == 3
    plain = AttentionSpec(n_heads=4)
    assert plain.n_kv_heads == 4 and plain.as_dict(raw=True)["n_kv_heads"] is None
    assert plain.replace(n_heads=8).n_kv_heads == 8  # derived, so re-derived
    assert spec.replace(n_heads=8).n_kv_heads == 2  # given, so kept
    assert spec.replace(rope_base=None, window=None).rope_base is None
    with pytest.raises(SpecError, match="n_kv_heads"):
        spec.replace(n_heads=3, d_model=30)


def test_memory_estimate_counts_the_kv_heads_and_the_copies():
    base = AttentionSpec(len_q=64, d_model=64, n_heads=8)
    grouped = base.replace(n_kv_heads=2)
    rotated = base.replace(rope_base=1e4)
    assert estimate_bytes(grouped, capture=False) < estimate_bytes(base, capture=False)
    assert estimate_bytes(rotated) > estimate_bytes(base)
    assert sum(a.size for a in init_params(grouped).values()) < sum(
        a.size for a in init_params(base).values()
    )


@pytest.mark.skipif(not is_installed("torch"), reason="torch is not installed here")
def test_gqa_layer_keeps_the_weight_layout():
    """`query`, `key`, `value`, `output_proj` sublayers, K/V narrowed to n_kv_heads · d_k."""
    layer = backend("torch").MultiHeadAttention(64, 8, 8, 8, n_kv_heads=2, rope_base=1e4, bias=False)
    shapes = {name: tuple(p.shape) for name, p in layer.named_parameters()}
    assert shapes == {
        "query.weight": (64, 64),
        "key.weight": (16, 64),
        "value.weight": (16, 64),
        "output_proj.weight": (64, 64),
    }


def test_band_scores_see_only_the_offset_and_are_the_cosine_of_the_angle():
    offsets = np.arange(20)
    at_zero = reference.rope_band_scores(16, 10000.0, offsets)
    for start in (1, 9, 40):
        assert_close(
            reference.rope_band_scores(16, 10000.0, offsets, start=start), at_zero, RTOL_F64, "start"
        )
    theta = 10000.0 ** (-np.arange(0, 16, 2) / 16)
    assert_close(at_zero, np.cos(offsets[None] * theta[:, None]), RTOL_F64, "cos")


def test_kv_cache_bytes_per_token():
    assert kv_cache_bytes(30, 3, 64, 64, 2) == 30 * 3 * 2 * 64 * 2 == 23040
    table = kv_cache_table(30, 9, 3, 64, 64, 2)
    assert list(table.values()) == [69120, 23040, 7680] and list(table)[1] == "GQA (3 K/V heads)"
    assert list(kv_cache_table(1, 4, 4, 8, 8, 4)) == ["MHA (4 K/V heads)", "MQA (1 K/V head)"]


def test_misread_weights_is_the_masked_softmax_of_the_mask_as_applied():
    logits = np.random.default_rng(3).standard_normal((5, 5))
    mask = masks.window(5, 5, 2)
    built, passed = list(masks.CONVENTIONS)[:2]
    right, applied, wrong = reference.misread_weights(logits, mask, built, passed)
    np.testing.assert_array_equal(applied, ~mask)  # bool True=attend read as True=blocked
    for weights, allowed in ((right, mask), (wrong, applied)):
        expected = np.where(allowed, np.exp(logits), 0.0)
        sums = expected.sum(-1, keepdims=True)
        assert_close(
            weights, np.divide(expected, sums, out=np.zeros_like(expected), where=sums > 0), RTOL_F64, "w"
        )


@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
def test_interpretable_heads_hold_with_shared_kv_heads(framework, n_kv_heads):
    """The hand-built heads read one key code (the circle), so any K/V grouping keeps their patterns."""
    from attnviz import heads

    spec = AttentionSpec(len_q=8, d_model=16, n_heads=4, n_kv_heads=n_kv_heads, mask="causal", window=8)
    params, x_q, _ = heads.build(spec, *make_inputs(spec))
    weights = run_attention(spec, framework, x_q=x_q, params=params).weights[0]
    for h in range(4):
        w = weights[h]
        least = 0.95 if h == 3 else 0.99
        rows = {
            0: [w[i, i - 1] for i in range(1, 8)],
            1: [w[i, i] for i in range(8)],
            2: [w[i, 0] for i in range(8)],
            3: [w[i, max(0, i - 2) : i + 1].sum() for i in range(8)],
        }[h]
        assert min(rows) >= least, (h, np.round(rows, 3))


def test_interpretable_heads_refuse_rope_naming_it():
    from attnviz import heads

    spec = AttentionSpec(len_q=8, d_model=16, n_heads=4, rope_base=1e4)
    with pytest.raises(SpecError) as err:
        heads.build(spec, *make_inputs(spec))
    assert err.value.field == "rope_base"


# -- the override points -----------------------------------------------------------------------


@pytest.mark.parametrize("capture", [True, False])
def test_after_weights_is_where_a_subclass_changes_the_weights(framework, capture):
    """Zero one head's weights in `after_weights`: that head's context, and its share of the output, vanish;
    the returned weights stay the softmax's. Both frameworks, recorded and (PyTorch) in-place paths."""
    spec = AttentionSpec(
        len_q=6, d_model=16, n_heads=4, n_kv_heads=2, rope_base=1e4, mask="causal", dtype="float64"
    )
    be = backend(framework)

    class Ablated(be.MultiHeadAttention):
        def after_weights(self, weights):
            keep = np.ones((1, 4, 1, 1))
            keep[0, 1] = 0.0
            return weights * be.to_tensor(keep, be.resolve_device("cpu"))

    params, (x_q, _) = init_params(spec), make_inputs(spec)
    layer = Ablated.from_spec(spec)
    if framework == "tensorflow":
        layer.build()
    layer.load_params(params)
    record = Recorder(capture, be.to_numpy)
    x = be.to_tensor(x_q, be.resolve_device("cpu"))
    mask = be.to_tensor(masks.from_spec(spec), be.resolve_device("cpu"))
    with be.inference():
        out, weights = be.forward(layer, x, x, mask, spec=spec, record=record)
    ref = multi_head_attention(spec, params, x_q, x_q)
    context = ref["context"].copy()
    context[:, 1] = 0.0
    merged = context.transpose(0, 2, 1, 3).reshape(1, 6, 16)
    assert_close(be.to_numpy(out), merged @ params["W_o"] + params["b_o"], RTOL_F64, "output")
    assert_close(be.to_numpy(weights), ref["softmax"], RTOL_F64, "weights")
    if capture:
        assert (record.steps[-3].value[:, 1] == 0).all() and record.steps[-3].name == "context"


def test_after_split_heads_is_where_a_subclass_adds_a_variant(framework):
    """A subclass that scales q in `after_split_heads` (a stand-in for a new position encoding) changes the
    scores exactly as the same change to the reference's q would; the forward is not forked."""
    spec = AttentionSpec(len_q=5, d_model=16, n_heads=2, dtype="float64")
    be = backend(framework)

    class Doubled(be.MultiHeadAttention):
        def after_split_heads(self, q, k, v, *, start=0, record):
            q, k, v = super().after_split_heads(q, k, v, start=start, record=record)
            return q * 2.0, k, v

    params, (x_q, _) = init_params(spec), make_inputs(spec)
    layer = Doubled.from_spec(spec)
    if framework == "tensorflow":
        layer.build()
    layer.load_params(params)
    x = be.to_tensor(x_q, be.resolve_device("cpu"))
    record = Recorder(True, be.to_numpy)
    be.forward(layer, x, x, None, spec=spec, record=record)
    ref = multi_head_attention(spec.replace(scale=2.0 * spec.head_scale), params, x_q, x_q)
    steps = {s.name: s.value for s in record.steps}
    assert_close(steps["scaled"], ref["scaled"], RTOL_F64, "scaled")
    assert_close(steps["output_proj"], ref["output_proj"], RTOL_F64, "output")
