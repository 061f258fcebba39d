"""Interpretable heads (attnviz.heads): each hand-built head shows the pattern it names, on any input.

The proofs run the built weights through `run_attention` in both frameworks
and through the float64 NumPy reference, on random and on sentence inputs,
and read the pattern off the attention weights with an independent check
(explicit index arithmetic here, not `heads.targets`).
"""

from __future__ import annotations

import numpy as np
import pytest

from attnviz import AttentionSpec, heads, make_inputs, run_attention
from attnviz.errors import SpecError
from attnviz.params import embed, param_shapes
from attnviz.reference import multi_head_attention

LENGTHS = [2, 3, 5, 8, 16, 64]
WORDS = ("the cat sat on the mat because the cat was tired and it slept " * 8).split(" ")[:-1]


def assert_patterns(weights: np.ndarray, causal: bool) -> None:
    """`weights (H, L, L)`: head h puts ≥ 0.99 of each row on the key its name says (the window
    head ≥ 0.95 within i − 2 … i + 2), in every row where that key exists."""
    H, L, _ = weights.shape
    for h in range(H):
        w = weights[h]
        pattern = heads.PATTERNS[h % 4]
        least = 0.99
        if pattern == "previous token":
            got = [w[i, i - 1] for i in range(1, L)]
        elif pattern == "same position":
            got = [w[i, i] for i in range(L)]
        elif pattern == "first token":
            got = [w[i, 0] for i in range(L)]
        else:
            got, least = [w[i, max(0, i - 2) : i + 3].sum() for i in range(L)], 0.95
        assert min(got, default=1.0) >= least, (
            f"head {h} ({pattern}), causal={causal}: row shares {np.round(got, 3)}"
        )


def inputs(kind: str, spec: AttentionSpec):
    if kind == "random":
        return make_inputs(spec)
    words = WORDS[: spec.len_q]
    x = embed(words, spec.d_model, spec.batch, spec.dtype)
    return x, x


@pytest.mark.parametrize("kind", ["random", "sentence"])
@pytest.mark.parametrize("mask", ["none", "causal"])
@pytest.mark.parametrize("length", LENGTHS)
def test_heads_show_their_patterns_in_each_framework(framework, kind, mask, length):
    spec = AttentionSpec(len_q=length, d_model=32, n_heads=8, d_k=4, d_v=4, mask=mask, seed=length)
    params, x_q, _ = heads.build(spec, *inputs(kind, spec))
    result = run_attention(spec, framework, x_q=x_q, x_kv=None, params=params, capture=False)
    assert_patterns(np.asarray(result.weights)[0], causal=mask == "causal")


@pytest.mark.parametrize("mask", ["none", "causal"])
@pytest.mark.parametrize("length", [1, *LENGTHS, 512])
def test_heads_in_float64_reference(mask, length):
    spec = AttentionSpec(batch=2, len_q=length, d_model=16, n_heads=4, mask=mask, dtype="float64", seed=3)
    params, x_q, x_kv = heads.build(spec, *make_inputs(spec))
    weights = multi_head_attention(spec, params, x_q, x_kv)["softmax"]
    for b in range(spec.batch):
        assert_patterns(weights[b], causal=mask == "causal")


def test_content_does_not_move_the_pattern():
    """Two unrelated contents (random, and huge-valued) give the same weights."""
    spec = AttentionSpec(len_q=12, d_model=32, n_heads=4, dtype="float64")
    x = make_inputs(spec)[0]
    params, a, _ = heads.build(spec, x, x)
    _, b, _ = heads.build(spec, 1e3 * make_inputs(spec.replace(seed=9))[0], None)
    wa = multi_head_attention(spec, params, a, a)["softmax"]
    wb = multi_head_attention(spec, params, b, b)["softmax"]
    np.testing.assert_allclose(wa, wb, atol=1e-12)


def test_cross_mode_with_equal_lengths(framework):
    spec = AttentionSpec(len_q=10, mode="cross", len_kv=10, d_model=16, d_kv_in=8, n_heads=4)
    x_q, x_kv = make_inputs(spec)
    params, q, kv = heads.build(spec, x_q, x_kv)
    assert kv is not q and kv.shape == x_kv.shape
    result = run_attention(spec, framework, x_q=q, x_kv=kv, params=params, capture=False)
    assert_patterns(np.asarray(result.weights)[0], causal=False)


@pytest.mark.parametrize("scale", [None, 0.01, 7.0])
@pytest.mark.parametrize("bias", [True, False])
def test_params_have_the_spec_shapes_and_any_scale_works(scale, bias):
    spec = AttentionSpec(len_q=6, d_model=12, n_heads=3, bias=bias, scale=scale, residual_norm=True)
    x_q, x_kv = make_inputs(spec)
    params, q, kv = heads.build(spec, x_q, x_kv)
    assert {k: v.shape for k, v in params.items()} == param_shapes(spec)
    assert all(v.dtype == np.float32 for v in params.values()) and q.dtype == np.float32
    assert kv is q, "self mode: x_kv is x_q"
    np.testing.assert_array_equal(q[..., :-3], x_q[..., :-3])  # content kept
    assert not np.shares_memory(q, x_q), "the caller's array is not written"
    assert_patterns(multi_head_attention(spec, params, q, q)["softmax"][0], causal=False)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"d_model": 8, "n_heads": 8}, "d_k"),  # d_k = 1
        ({"d_model": 3, "n_heads": 1}, "d_model"),
        ({"mode": "cross", "len_kv": 5}, "len_kv"),
        ({"mode": "cross", "d_kv_in": 3}, "d_kv_in"),
    ],
)
def test_specs_that_cannot_host_the_heads_are_refused_by_field(changes, field):
    spec = AttentionSpec(len_q=4, **changes)
    with pytest.raises(SpecError, match="allowed: ") as info:
        heads.build(spec, *make_inputs(spec))
    assert info.value.field == field


def test_wrong_input_shape_is_named():
    spec = AttentionSpec(len_q=4)
    with pytest.raises(ValueError, match=r"x_q: got an array of shape \(1, 5, 32\)"):
        heads.build(spec, np.zeros((1, 5, 32)), None)


def test_check_scores_each_head_by_its_pattern():
    L = 5
    eye, prev, first = np.eye(L), np.eye(L, k=-1), np.zeros((L, L))
    first[:, 0] = 1
    prev[0, 0] = 1
    uniform = np.full((L, L), 1 / L)
    report = heads.check(np.stack([prev, eye, first, uniform, eye]))
    assert [r["pattern"] for r in report] == [*heads.PATTERNS, "previous token"]
    assert [r["score"] for r in report[:3]] == [1.0, 1.0, 1.0]
    assert report[3]["score"] == pytest.approx(3 / 5)  # row 0: keys 0..2 of 5
    assert report[4]["score"] == 0.0  # the identity is not a previous-token head
    assert heads.check(np.ones((1, 1, 1)))[0]["score"] is None  # one query: no previous key


@pytest.mark.parametrize("mask", ["none", "causal"])
def test_heads_hold_at_the_apps_longest_input_in_float32(framework, mask):
    """512 positions (the explorer's limit): the sharp heads' scores reach ~6e5 and float32 still resolves them."""
    spec = AttentionSpec(len_q=512, d_model=16, n_heads=4, mask=mask)
    params, x_q, _ = heads.build(spec, *make_inputs(spec))
    result = run_attention(spec, framework, x_q=x_q, params=params, capture=False)
    assert_patterns(np.asarray(result.weights)[0], causal=mask == "causal")


def test_same_position_head_ignores_a_repeated_word(framework):
    """The name is true: with "the" three times, head 1 attends to each query's own position,
    not to the other "the"s (an equal-token head would split its weight between them)."""
    words = ["the", "cat", "saw", "the", "dog", "and", "the", "bird"]
    spec = AttentionSpec(len_q=len(words), d_model=32, n_heads=4, d_k=8, d_v=8)
    x = embed(words, spec.d_model, spec.batch, spec.dtype)
    params, x_q, _ = heads.build(spec, x, x)
    w = np.asarray(run_attention(spec, framework, x_q=x_q, params=params, capture=False).weights)[0, 1]
    the = [i for i, t in enumerate(words) if t == "the"]
    assert heads.PATTERNS[1] == "same position" and len(the) == 3
    for i in the:
        assert w[i, i] >= 0.99 and all(w[i, j] < 0.01 for j in the if j != i)


def test_panel_titles_name_each_heads_pattern():
    assert heads.panel_titles(5) == [
        "head 0: previous token",
        "head 1: same position",
        "head 2: first token",
        "head 3: window",
        "head 4: previous token",
    ]
