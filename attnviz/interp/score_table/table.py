"""One head's pre-softmax score taken apart, exactly, into (query part × key part) terms.

A score is `scale · qᵢ · kⱼ` with `qᵢ = rope_i(qknorm(norm(xᵢ) W_Q + b_Q))` and `kⱼ` the same at j
(Vaswani et al., 2017; Su et al., 2021, RoPE; Elhage et al., 2021). Held at this run's values, every
step is linear in the residual stream `xᵢ = Σ_a partₐ` (`stream.split`):

- the layer's input norm, with its divisor (σ for LayerNorm, the RMS for RMSNorm) held at its value
  at that position — a LayerNorm's centring is linear, its shift β joins the projection's bias;
- the projection `W_Q`, `W_K` (GPT-2's biases `b_Q`, `b_K` and β·W make the part "bias");
- Gemma 3's QK-norm, an RMSNorm of each head's q (and k) before RoPE: linear with **its own
  per-position divisor** held too — the RMS of the whole qᵢ, which every part shares. Without
  holding it the split is not a sum: the divisor is a function of all the parts together. Both
  divisors (the input norm's and the QK-norm's) are read from this run, so the table is exact for
  this run and says how the score is built from its parts at these divisors, not what the score
  would be with a part removed (removing a part would change the divisors);
- RoPE, a rotation by the position's angles: linear, applied to each part at its own position.

So `qᵢ = Σ_a qₐ`, `kⱼ = Σ_b k_b`, and `score = Σ_a Σ_b scale · qₐ · k_b`: a table of
`(len(query_parts), len(key_parts))` terms whose sum is the score to float64 rounding. `.score` is
the score the framework computed (its "scaled" step); the table is computed in float64 from the
run's float32 residual stream, so the two agree to float32 rounding.

For a whole row (`score_row`), the terms of every visible key, and which parts lift the picked key
above the rest: `lift = table(picked) − Σⱼ wⱼ table(j)` (w the head's weights in the row), whose sum
is `s_picked − Σⱼ wⱼ sⱼ = log w_picked + H(w)` (H the row's entropy): a part with a large positive
lift is one that moves the weight onto the picked key.

Shapes: T tokens, n keys of a row, D hidden size, Dh head width, Pq/Pk query/key parts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.errors import SpecError
from attnviz.interp import weights
from attnviz.interp.qkov import rotate
from attnviz.interp.score_table.stream import StreamParts, split

BIAS = "bias"
SCORE_STEP = "scaled"  # the attention's pre-softmax score, scale included (`attnviz.result.STEP_DOCS`)


@dataclass(frozen=True)
class Side:
    """One side (query or key) of a head at n positions, as parts.

    Attributes:
        names: the stream's part names, then "bias" where the family has biases (GPT-2).
        vectors: `(P, n, Dh)` float64: each part's share of the head's q (or k) at each position,
            after the input norm, QK-norm and RoPE; `vectors.sum(0)` is the q (or k) itself.
    """

    names: list[str]
    vectors: np.ndarray


def side(ckpt, parts: StreamParts, layer: int, head: int, positions, which: str) -> Side:
    """`parts` (the stream entering `layer` at `positions`) through head `head`'s query ("q") or
    key ("k") map, each part on its own with every divisor held at the run's value."""
    norm, lay = weights.input_norm(ckpt, layer), weights.layer_heads(ckpt, layer)
    W = (lay.W_Q if which == "q" else lay.W_K)[head]  # (D, Dh)
    s = norm.scale(parts.stream)  # (n,): the input norm's divisor at each position
    rows = (norm.centre(parts.vectors) / s[None, :, None] * norm.weight) @ W  # (P, n, Dh)
    bias = np.broadcast_to(norm.bias @ W + _projection_bias(ckpt, layer, head, which), rows.shape[1:])
    names, vectors = list(parts.names), rows
    if weights.family(ckpt) == "gpt2":
        names, vectors = [*names, BIAS], np.concatenate([rows, bias[None]])  # (P + 1, n, Dh)
    qk_norm = lay.q_norm if which == "q" else lay.k_norm
    if qk_norm is not None:  # Gemma 3: each part shares the divisor of the whole q (k) there
        r = qk_norm.scale(vectors.sum(0))  # (n,)
        vectors = vectors / r[None, :, None] * qk_norm.weight
    if lay.rope_base is not None:
        vectors = rotate(vectors, np.asarray(positions)[:, None], lay.rope_base)  # each at its position
    return Side(names, vectors)


def _projection_bias(ckpt, layer: int, head: int, which: str) -> np.ndarray:
    """`(Dh,)` head `head`'s q or k projection bias (zeros where the family has none)."""
    params, Dh = ckpt.layer_params(layer), ckpt.config.head_dim
    b = params.get(f"b_{which}")
    if b is None:
        return np.zeros(Dh)
    kv = head if which == "q" else head * (b.size // Dh) // ckpt.config.num_attention_heads
    return b.astype(np.float64)[kv * Dh : (kv + 1) * Dh]


@dataclass(frozen=True)
class ScoreParts:
    """One score `scale · qᵢ · kⱼ` of one head, split into (query part × key part) terms.

    Attributes:
        score: the pre-softmax score the framework computed, scale included.
        query_parts, key_parts: the parts' names ("embed", "pos", "L0.H3", "L0.attn_bias",
            "L0.mlp", "bias").
        table: `(len(query_parts), len(key_parts))` float64; `table.sum()` is the score.
        tokens: the prompt's tokens as text; layer, head, query, key: which score.
    """

    score: float
    query_parts: list[str]
    key_parts: list[str]
    table: np.ndarray
    tokens: list[str]
    layer: int
    head: int
    query: int
    key: int

    @property
    def total(self) -> float:
        """The table's sum: equals `score` up to float32 rounding."""
        return float(self.table.sum())


@dataclass(frozen=True)
class RowParts:
    """One head's whole row at one query, and which parts move the weight onto one key.

    Attributes:
        parts: the picked key's score, split (`ScoreParts`).
        keys: `(n,)` the positions the query sees; scores: `(n,)` the framework's scores there;
            weights: `(n,)` the head's attention weights there.
        lift: `(Pq, Pk)` `table(picked) − Σⱼ wⱼ table(j)`; its sum is `log w_picked + H(w)`.
    """

    parts: ScoreParts
    keys: np.ndarray
    scores: np.ndarray
    weights: np.ndarray
    lift: np.ndarray

    @property
    def picked(self) -> int:
        """The key position the lift is about."""
        return self.parts.key


def terms(ckpt, hidden: np.ndarray, heads: np.ndarray, layer: int, head: int, query: int, keys) -> tuple:
    """The pure split, on a run's arrays: `(query Side (Pq, 1, Dh), key Side (Pk, n, Dh), scale)`.

    Args:
        hidden: `(L + 1, T, D)` the residual stream entering each block; heads: `(L, H, T, Dh)`
            each head's attention-weighted values (attnviz's `Forward`, or any run of the same
            model: the tests pass transformers' float64 run).
        keys: the n key positions.
    """
    both = split(ckpt, hidden, heads, layer, [query, *keys])  # the earlier layers read once
    at_query = StreamParts(both.names, both.vectors[:, :1], both.stream[:1])  # (P, 1, D)
    at_keys = StreamParts(both.names, both.vectors[:, 1:], both.stream[1:])  # (P, n, D)
    q = side(ckpt, at_query, layer, head, [query], "q")
    k = side(ckpt, at_keys, layer, head, keys, "k")
    return q, k, weights.layer_heads(ckpt, layer).scale


def score_parts(
    ckpt, text: str, layer: int, head: int, query: int, key: int, framework: str = "torch"
) -> ScoreParts:
    """One run of `text` in `framework`; head (`layer`, `head`)'s score of `query` on `key`, split.

    Every divisor is held at this run's value at its position: the input norm's (σ or the RMS of
    the residual stream), and on Gemma 3 the QK-norm's too (the RMS of the whole q at the query and
    of the whole k at the key) — only with that held is the score a sum of part × part terms (the
    module docstring says why). The table is float64, from the run's float32 residual stream.

    Raises:
        SpecError: a checkpoint these circuits do not read, or a layer, head, query or key out of
            range (the key must be one the query sees: at or before it, inside a sliding window).
    """
    out = _run(ckpt, text, layer, head, framework)
    _check_query(query, len(out.ids))
    seen = _visible(ckpt, layer, query)
    if isinstance(key, bool) or not isinstance(key, int | np.integer) or key not in seen:
        raise SpecError("key", key, f"a position {seen[0]} … {seen[-1]}, the keys query {query} sees")
    q, k, scale = terms(ckpt, out.hidden_states, out.head_outputs, layer, head, query, [key])
    return _cell(out, (layer, head, query, key), q, Side(k.names, k.vectors[:, 0]), scale)


def score_row(
    ckpt, text: str, layer: int, head: int, query: int, framework: str = "torch", *, key: int | None = None
) -> RowParts:
    """Head (`layer`, `head`)'s whole row at `query`, split; the lift is about `key` (default: the
    key the head puts most weight on)."""
    out = _run(ckpt, text, layer, head, framework)
    _check_query(query, len(out.ids))
    keys = _visible(ckpt, layer, query)
    w = out.attentions[layer, head, query, keys].astype(np.float64)  # (n,)
    picked = int(keys[np.argmax(w)]) if key is None else key
    if isinstance(picked, bool) or not isinstance(picked, int | np.integer) or picked not in keys:
        raise SpecError("key", key, f"None or a position {keys[0]} … {keys[-1]}, the keys query {query} sees")
    q, k, scale = terms(ckpt, out.hidden_states, out.head_outputs, layer, head, query, keys)
    at = k.vectors[:, list(keys).index(picked)]  # (Pk, Dh)
    k_mean = np.einsum("n,bnd->bd", w, k.vectors)  # (Pk, Dh): the key parts, weighted as the head reads them
    lift = scale * q.vectors[:, 0] @ (at - k_mean).T  # (Pq, Pk)
    parts = _cell(out, (layer, head, query, picked), q, Side(k.names, at), scale)
    return RowParts(parts=parts, keys=keys, scores=_scores(out, head, query)[keys], weights=w, lift=lift)


def _cell(out, where: tuple[int, int, int, int], q: Side, k: Side, scale: float) -> ScoreParts:
    """The `ScoreParts` of score (layer, head, query, key) = `where`, from the query's parts
    `(Pq, 1, Dh)` and the key's `(Pk, Dh)`."""
    layer, head, query, key = where
    return ScoreParts(
        score=float(_scores(out, head, query)[key]), query_parts=q.names, key_parts=k.names,
        table=scale * q.vectors[:, 0] @ k.vectors.T,  # (Pq, Pk)
        tokens=out.tokens, layer=layer, head=head, query=query, key=key,
    )  # fmt: skip


def _run(ckpt, text: str, layer: int, head: int, framework: str):
    """The run every split reads: the layer's steps captured, every head's output kept."""
    weights.family(ckpt)
    H = ckpt.config.num_attention_heads
    weights.layer_heads(ckpt, layer)  # refuses a layer out of range
    if isinstance(head, bool) or not isinstance(head, int | np.integer) or not 0 <= head < H:
        raise SpecError("head", head, f"an integer 0 … {H - 1}")
    return ckpt.run(text, framework, capture_layer=layer, head_outputs=True)


def _check_query(query: int, T: int) -> None:
    if isinstance(query, bool) or not isinstance(query, int | np.integer) or not 0 <= query < T:
        raise SpecError("query", query, f"a token position 0 … {T - 1} of this {T}-token text")


def _visible(ckpt, layer: int, query: int) -> np.ndarray:
    """The key positions query `query` sees at `layer`: causal, inside a sliding window if any."""
    window = ckpt.family.layout(ckpt.config).layers[layer].heads.window
    return np.arange(0 if window is None else max(0, query - window + 1), query + 1)


def _scores(out, head: int, query: int) -> np.ndarray:
    """`(T,)` the framework's pre-softmax scores of `query` in `head` (the captured layer's step)."""
    step = next(s for s in out.steps if s.name == SCORE_STEP)
    return step.value.reshape(-1, *step.value.shape[-3:])[0, head, query].astype(np.float64)
