"""Attention rollout (Abnar & Zuidema, 2020) against a hand-computed case and its definition."""

import numpy as np
import pytest

from attnviz.errors import SpecError
from attnviz.interp.rollout import attention_rollout


def test_hand_computed_two_layers():
    # One head, two tokens. Layer 0: token 0 attends to itself, token 1 half/half.
    # Layer 1: token 0 half/half, token 1 to itself.
    A = np.array([[[[1.0, 0.0], [0.5, 0.5]]], [[[0.5, 0.5], [0.0, 1.0]]]])
    # With the residual: A0' = [[1, 0], [.25, .75]], A1' = [[.75, .25], [0, 1]]; R = A1' @ A0'.
    expected = np.array([[0.8125, 0.1875], [0.25, 0.75]])
    np.testing.assert_allclose(attention_rollout(A), expected, rtol=1e-12)
    # Without it: A1 @ A0 = [[.75, .25], [.5, .5]].
    np.testing.assert_allclose(attention_rollout(A, residual=False), [[0.75, 0.25], [0.5, 0.5]], rtol=1e-12)


def definition(attentions, residual, reduce):
    """Ã(l) = A'(l) · Ã(l-1), Ã(0) = A'(0), with A'(l) the head-reduced, residual-mixed,
    row-renormalised attention of layer l — written as the paper's recursion, element by element."""
    L, _, T, _ = attentions.shape
    rolled = None
    for l in range(L):
        a = reduce(attentions[l], axis=0)
        if residual:
            a = 0.5 * a + 0.5 * np.eye(T)
        a = a / a.sum(1, keepdims=True)
        if rolled is None:
            rolled = a
        else:
            rolled = np.array(
                [[sum(a[i, k] * rolled[k, j] for k in range(T)) for j in range(T)] for i in range(T)]
            )
    return rolled


@pytest.mark.parametrize("reduce", ["mean", "max", "min"])
@pytest.mark.parametrize("residual", [True, False])
def test_matches_the_definition_on_random_attentions(reduce, residual):
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(4, 3, 6, 6)) * 2
    attentions = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    ours = attention_rollout(attentions, residual=residual, head_reduce=reduce)
    np.testing.assert_allclose(ours, definition(attentions, residual, getattr(np, reduce)), rtol=1e-10)
    np.testing.assert_allclose(ours.sum(-1), 1, rtol=1e-12)


def test_causal_attention_rolls_out_causal():
    rng = np.random.default_rng(0)
    T = 5
    logits = np.where(np.tril(np.ones((T, T))), rng.normal(size=(3, 2, T, T)), -np.inf)
    attentions = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    rolled = attention_rollout(attentions)
    assert np.all(np.triu(rolled, 1) == 0) and rolled[0, 0] == 1


@pytest.mark.parametrize(
    ("attentions", "kwargs", "field"),
    [
        (np.ones((2, 3, 3)), {}, "attentions"),
        (np.ones((2, 1, 3, 4)), {}, "attentions"),
        (np.full((1, 1, 2, 2), np.nan), {}, "attentions"),
        (np.ones((1, 1, 2, 2)) / 2, {"head_reduce": "sum"}, "head_reduce"),
    ],
)
def test_bad_input(attentions, kwargs, field):
    with pytest.raises(SpecError) as info:
        attention_rollout(attentions, **kwargs)
    assert info.value.field == field
