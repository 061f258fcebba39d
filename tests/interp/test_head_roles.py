"""`head_roles` against position-by-position loops in plain Python (the oracle), on heads
built to do one thing, and on random heads."""

import numpy as np
import pytest

from attnviz.errors import SpecError
from attnviz.interp.roles import MAX_OFFSET, head_roles


def mean_at(w: np.ndarray, key) -> float:
    """Mean over queries i = 1 … T−1 of w[i, key(i)], skipping keys outside 0 … T−1."""
    values = [w[i, key(i)] for i in range(1, len(w)) if 0 <= key(i) < len(w)]
    return sum(values) / len(values)


def rows(T: int, target, causal: bool) -> np.ndarray:
    """A head whose query i puts all its weight on `target(i)` (itself where that is out of range)."""
    w = np.zeros((T, T))
    for i in range(T):
        j = target(i)
        w[i, j if 0 <= j < T and (j <= i or not causal) else i] = 1.0
    return w


@pytest.mark.parametrize("causal", [False, True])
def test_built_heads_are_named_and_scored_as_the_loops_say(causal):
    T = 9
    tokens = ["[CLS]", *"abcdefg", "[SEP]"]
    built = {
        "previous token": rows(T, lambda i: i - 1, causal),
        "same token": rows(T, lambda i: i, causal),
        "first token ([CLS])": rows(T, lambda i: 0, causal),
        "2 tokens back": rows(T, lambda i: i - 2, causal),
    }
    if not causal:
        built["next token"] = rows(T, lambda i: i + 1, causal)
        built["last token ([SEP])"] = rows(T, lambda i: T - 1, causal)
    uniform = np.tril(np.ones((T, T))) if causal else np.ones((T, T))
    built["broad"] = uniform / uniform.sum(-1, keepdims=True)
    shorts = {"previous token": "previous", "same token": "same", "first token ([CLS])": "first"}
    shorts |= {"2 tokens back": "-2", "next token": "next", "last token ([SEP])": "last", "broad": "broad"}
    weights = np.stack(list(built.values()))
    for (name, w), r in zip(built.items(), head_roles(weights, tokens, causal=causal), strict=True):
        assert r.role == name, (name, r)
        assert r.short == shorts[name]
        assert r.previous == pytest.approx(mean_at(w, lambda i: i - 1))
        assert r.same == pytest.approx(mean_at(w, lambda i: i))
        assert r.first == pytest.approx(mean_at(w, lambda i: 0))
        offsets = range(-MAX_OFFSET, (0 if causal else MAX_OFFSET) + 1)
        best = max(offsets, key=lambda d: mean_at(w, lambda i, d=d: i + d))  # the first of ties, as argmax
        assert r.offset_score == pytest.approx(mean_at(w, lambda i, d=best: i + d))
    assert head_roles(weights, tokens, causal=causal)[-1].entropy_share == pytest.approx(1.0)


def test_random_heads_match_the_loops_and_entropy_counts_only_the_keys_a_row_sees():
    rng = np.random.default_rng(0)
    T = 7
    scores = rng.normal(size=(3, T, T)) * 3
    scores = np.where(np.tril(np.ones((T, T), bool)), scores, -np.inf)
    w = np.exp(scores - scores.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    for h, r in enumerate(head_roles(w, list("abcdefg"), causal=True)):
        assert r.previous == pytest.approx(mean_at(w[h], lambda i: i - 1))
        entropy = [
            -sum(p * np.log(p) for p in w[h, i, : i + 1] if p > 0) / np.log(i + 1) for i in range(1, T)
        ]
        assert r.entropy_share == pytest.approx(sum(entropy) / len(entropy))
        if r.strength is None:
            assert r.role.startswith(("broad", "no fixed position"))


@pytest.mark.parametrize("shape", [(2, 1, 1), (2, 3, 4), (3, 3)])
def test_shapes_it_cannot_summarise_are_refused(shape):
    with pytest.raises(SpecError, match="weights"):
        head_roles(np.ones(shape), ["a"] * shape[-1], causal=False)
