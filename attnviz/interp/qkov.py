"""Why a head attends where it does: its QK and OV circuits, and how heads compose.

Follows Elhage et al., 2021, "A Mathematical Framework for Transformer Circuits":

- the **QK circuit** of a head is the bilinear form `W_Q W_Kᵀ` (row layout, `x @ W`) that scores a
  query token against a key token; here it is read on token embeddings passed through the layer's
  input norm, scaled as the layer scales its scores, and — for rotary models — with the query turned
  `offset` positions past the key (RoPE makes the score depend only on that distance);
- the **OV circuit** `W_V W_O` is what the head writes when it attends to a token; read through the
  final norm's gain and the unembedding it says which logits attending to a token raises. A copying
  head raises the logit of the token it attends to; the paper's summary is the eigenvalues λ of
  the full circuit `E_l W_V W_O U_effᵀ` (V × V): `Σλ / Σ|λ|`, from −1 to 1, 1 when every eigenvalue
  is positive — copying;
- **composition** between a head of an earlier layer (writing through `W_OV¹`) and one of a later
  layer: Q-composition `‖W_QK²ᵀ W_OV¹‖_F / (‖W_QK²‖_F ‖W_OV¹‖_F)`, K-composition with `W_QK²`,
  V-composition with `W_OV²` — in the paper's column convention, where `W_QK = W_Qᵀ W_K` and
  `W_OV = W_O W_V` act on column vectors. Random matrices of the same shapes give a baseline.

Biases are left out (the paper's circuits are the weights alone); the layer's input norm is folded
into W_Q, W_K and W_V (its gain, and the centring of a LayerNorm). GPT-2's QK table reads token
embeddings only (no position embedding). Gemma 3: the QK table applies its QK-norm to each q and k
(exactly, before RoPE, with the local or global layer's base); the OV circuit, the copying scores and
composition fold the QK-norm's and the post-attention norm's gains into the weights and leave out
their divisors — one positive number per token, which a weights-only reading cannot know.

Shapes: L layers, H heads, D hidden size, Dh head width, V vocabulary, n chosen tokens.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attnviz.errors import SpecError
from attnviz.exec.monitor import Monitor, watch
from attnviz.interp import weights
from attnviz.interp.patching import token_id

KINDS = {
    "q": "Q-composition: the later head's queries read the earlier head's output",
    "k": "K-composition: the later head's keys read the earlier head's output (induction heads)",
    "v": "V-composition: the later head's values read the earlier head's output",
}
MAX_TOKENS = 24
BASELINE_DRAWS = 64


def composition(later: np.ndarray, earlier: np.ndarray) -> float:
    """`‖later · earlier‖_F / (‖later‖_F ‖earlier‖_F)` for two `(D, D)` matrices (column convention).

    Q-composition passes `W_QKᵀ` as `later`, K-composition `W_QK`, V-composition the later `W_OV`.
    """
    later, earlier = np.asarray(later, np.float64), np.asarray(earlier, np.float64)
    denominator = np.linalg.norm(later) * np.linalg.norm(earlier)
    return float(np.linalg.norm(later @ earlier) / denominator) if denominator else 0.0


def rotate(x: np.ndarray, position: int, base: float) -> np.ndarray:
    """`x (..., Dh)` turned by RoPE as at `position`: pair (i, i + Dh/2) by position · base^(−2i/Dh)."""
    Dh = x.shape[-1]
    angle = position * base ** (-np.arange(0, Dh, 2) / Dh)  # (Dh/2,)
    first, second = x[..., : Dh // 2], x[..., Dh // 2 :]
    cos, sin = np.cos(angle), np.sin(angle)
    return np.concatenate([first * cos - second * sin, first * sin + second * cos], axis=-1)


def token_ids(ckpt, tokens) -> list[int]:
    """Ids of 1 … `MAX_TOKENS` distinct tokens given as ids or one-token texts."""
    if isinstance(tokens, str) or not 1 <= len(tokens) <= MAX_TOKENS:
        raise SpecError("tokens", tokens, f"a list of 1 … {MAX_TOKENS} tokens (ids or one-token texts)")
    ids = [token_id(ckpt, t, "tokens") for t in tokens]
    if len(set(ids)) != len(ids):
        raise SpecError("tokens", tokens, "distinct tokens")
    return ids


def _check_head(ckpt, layer: int, head: int) -> weights.LayerHeads:
    heads = weights.layer_heads(ckpt, layer)
    H = heads.W_Q.shape[0]
    if isinstance(head, bool) or not isinstance(head, int | np.integer) or not 0 <= head < H:
        raise SpecError("head", head, f"an integer 0 … {H - 1}")
    return heads


@dataclass(frozen=True)
class TokenTable:
    """A `(n, n)` table over chosen tokens.

    Attributes:
        values: QK: `values[i, j]` the score of query token i against key token j;
            OV: `values[i, j]` how much attending to token i raises the logit of token j.
        labels: the n tokens as text.
        self_rank: OV only, `(n,)`: the rank of token i's own logit among the whole vocabulary's
            when the head attends to token i (1: it raises its own logit most); else None.
    """

    values: np.ndarray
    labels: list[str]
    self_rank: np.ndarray | None = None

    @property
    def copying(self) -> float:
        """The share of rows whose largest entry is on the diagonal."""
        return float(np.mean(self.values.argmax(axis=1) == np.arange(len(self.labels))))


def qk_table(ckpt, layer: int, head: int, tokens, offset: int = 0) -> TokenTable:
    """The head's QK circuit on `tokens`: the score (before softmax) of each as a query against each
    as a key, the query `offset` positions after the key (rotary models; GPT-2 ignores it)."""
    heads = _check_head(ckpt, layer, head)
    ids = token_ids(ckpt, tokens)
    limit = ckpt.config.max_position_embeddings
    if isinstance(offset, bool) or not isinstance(offset, int | np.integer) or not 0 <= offset < limit:
        raise SpecError("offset", offset, f"an integer 0 … {limit - 1} (positions from key to query)")
    x = weights.input_norm(ckpt, layer)(weights.embedding(ckpt, ids))  # (n, D)
    q, k = x @ heads.W_Q[head], x @ heads.W_K[head]  # (n, Dh) each
    if heads.q_norm is not None:  # Gemma's QK-norm, before RoPE
        q, k = heads.q_norm(q), heads.k_norm(k)
    if heads.rope_base is not None:
        q = rotate(q, int(offset), heads.rope_base)  # the key at position 0, the query at `offset`
    return TokenTable(q @ k.T * heads.scale, ckpt.labels(ids))


# Vocabulary rows per step: the (V, D) matrices are never held in float64 at once. At 4,096 rows a
# step of Gemma 3's copying scores holds ~100 MiB (16,384 held ~400 MiB, near a worker's 512 MiB budget).
CHUNK = 4_096
PAIR_BLOCK = 16  # random heads drawn at once for the composition baseline


def effective_unembedding(ckpt, rows=slice(None)) -> np.ndarray:
    """`(V, D)` (or `rows` of it): row v read by the final norm's output up to its positive divisor —
    the gain folded in, centred for a LayerNorm (whose input is centred first)."""
    norm = weights.final_norm(ckpt)
    return norm.centre(weights.unembedding(ckpt, rows) * norm.weight)


def read_out(ckpt, y: np.ndarray) -> np.ndarray:
    """`(n, V)`: `y (n, D)` read through the effective unembedding, `CHUNK` rows at a time."""
    V = ckpt.n_tokens
    return np.concatenate(
        [y @ effective_unembedding(ckpt, slice(i, i + CHUNK)).T for i in range(0, V, CHUNK)], axis=1
    )


def ov_table(ckpt, layer: int, head: int, tokens) -> TokenTable:
    """The head's OV circuit on `tokens`: each token's normed embedding through `W_V W_O` and the
    effective unembedding; with each token's own rank in the whole vocabulary."""
    heads = _check_head(ckpt, layer, head)
    ids = token_ids(ckpt, tokens)
    x = weights.input_norm(ckpt, layer)(weights.embedding(ckpt, ids))  # (n, D)
    logits = read_out(ckpt, x @ heads.W_V[head] @ heads.W_O_gained[head])  # (n, V)
    own = logits[np.arange(len(ids)), ids]
    rank = 1 + (logits > own[:, None]).sum(axis=1)
    return TokenTable(logits[:, ids], ckpt.labels(ids), rank)


def copying_scores(ckpt, *, monitor: Monitor | None = None) -> np.ndarray:
    """`(L, H)`: `Σλ / Σ|λ|` over the eigenvalues of each head's full OV circuit `E_l W_V W_O U_effᵀ`.

    The nonzero eigenvalues of that `(V, V)` product are those of `W_O (U_effᵀ E_l) W_V` `(Dh, Dh)`;
    `U_effᵀ E_l` `(D, D)` is one product over the vocabulary shared by every layer up to its norm's
    gain and bias: `E_l = centre(E) / r · γ_l + β_l` with r each row's σ or RMS. The product is summed
    `CHUNK` rows of the vocabulary at a time. `monitor` is told that product's chunks and then each
    layer done, and asked between them whether to stop (`Monitor.step`).
    """
    norm0 = weights.input_norm(ckpt, 0)  # refuses a checkpoint these circuits do not read
    monitor, L, V = watch(monitor), ckpt.config.num_hidden_layers, ckpt.n_tokens
    chunks = -(-V // CHUNK)
    D = ckpt.config.hidden_size
    shared, column = np.zeros((D, D)), np.zeros(D)  # U_effᵀ (normed E), and U_effᵀ 1
    for i in range(0, V, CHUNK):
        monitor.step(i // CHUNK, chunks + L)
        E, U = weights.embedding(ckpt, slice(i, i + CHUNK)), effective_unembedding(ckpt, slice(i, i + CHUNK))
        shared += U.T @ (norm0.centre(E) / norm0.scale(E)[:, None])  # every layer's eps is the config's
        column += U.sum(axis=0)
    scores = []
    for layer in range(L):
        monitor.step(chunks + layer, chunks + L)
        norm, heads = weights.input_norm(ckpt, layer), weights.layer_heads(ckpt, layer)
        through = shared * norm.weight + np.outer(column, norm.bias)  # (D, D) = U_effᵀ E_l
        H, Dh, _ = heads.W_O_gained.shape
        # One (H·Dh, D) @ (D, D) product: NumPy's broadcast (H, Dh, D) @ (D, D) was ~3× slower.
        left = (heads.W_O_gained.reshape(H * Dh, D) @ through).reshape(H, Dh, D)
        circuit = left @ heads.W_V  # (H, Dh, Dh)
        lam = np.linalg.eigvals(circuit)  # (H, Dh)
        scores.append(lam.sum(-1).real / np.abs(lam).sum(-1))
    return np.stack(scores)


def folded(ckpt, layer: int) -> weights.LayerHeads:
    """Layer `layer`'s heads with its input norm's gain (and a LayerNorm's centring) in W_Q, W_K, W_V;
    Gemma's QK-norm gains in W_Q, W_K and its post-attention norm's gain in W_O (their divisors,
    one positive number per token, are no part of a weights-only reading)."""
    heads, norm = weights.layer_heads(ckpt, layer), weights.input_norm(ckpt, layer)

    def fold(W: np.ndarray) -> np.ndarray:  # (H, D, Dh): x ↦ centre(x) · γ, then W
        W = norm.weight[:, None] * W
        return W - W.mean(axis=-2, keepdims=True) if norm.centred else W

    W_Q, W_K = fold(heads.W_Q), fold(heads.W_K)
    if heads.q_norm is not None:
        W_Q, W_K = W_Q * heads.q_norm.weight, W_K * heads.k_norm.weight
    return weights.LayerHeads(
        W_Q, W_K, fold(heads.W_V), heads.W_O_gained, heads.b_O, heads.scale, heads.rope_base
    )


@dataclass(frozen=True)
class Sides:
    """Per head of one layer, what a composition score reads, for one kind (`sides`).

    A score's numerator is `‖A M B‖_F` with `M = W_O¹ · inner²` `(Dh, Dh)`: the earlier head's
    `W_V¹ (D, Dh)` as A, the later head's outer factor as B. `‖A M B‖²_F = Σ (G_A M) ∘ (M G_B)`
    with the Gram matrices `G_A = AᵀA`, `G_B = BBᵀ` `(Dh, Dh)`, so no `(D, D)` matrix is formed.

    Attributes:
        W_O: `(H, Dh, D)` the head as an earlier head: its slice of the output projection.
        G_V: `(H, Dh, Dh)` `W_Vᵀ W_V` (its outer factor's Gram matrix as an earlier head).
        ov_norm: `(H,)` `‖W_V W_O‖_F`.
        inner: `(H, D, Dh)` the head as a later head: W_Q (q), W_K (k) or W_V (v).
        G_outer: `(H, Dh, Dh)` its outer factor's Gram: `W_Kᵀ W_K` (q), `W_Qᵀ W_Q` (k), `W_O W_Oᵀ` (v).
        later_norm: `(H,)` the norm of its matrix for the kind: `‖W_Q W_Kᵀ‖_F` (q, k), `‖W_V W_O‖_F` (v).
    """

    W_O: np.ndarray
    G_V: np.ndarray
    ov_norm: np.ndarray
    inner: np.ndarray
    G_outer: np.ndarray
    later_norm: np.ndarray


def gram(A: np.ndarray) -> np.ndarray:
    """`AᵀA` `(…, Dh, Dh)` of `A (…, D, Dh)`."""
    return A.swapaxes(-1, -2) @ A


def sides(heads: weights.LayerHeads, kind: str) -> Sides:
    """One layer's heads (`folded`, or random ones) as the earlier and the later side of `kind`."""
    G_V, G_O = gram(heads.W_V), heads.W_O @ heads.W_O.swapaxes(-1, -2)  # (H, Dh, Dh) each
    ov_norm = np.sqrt((G_V * G_O).sum((-2, -1)))  # ‖W_V W_O‖² = tr(G_V · W_O W_Oᵀ)
    if kind == "v":
        return Sides(heads.W_O, G_V, ov_norm, heads.W_V, G_O, ov_norm)
    G_Q, G_K = gram(heads.W_Q), gram(heads.W_K)
    qk_norm = np.sqrt((G_Q * G_K).sum((-2, -1)))  # ‖W_Q W_Kᵀ‖² = tr(G_Q G_K)
    inner, G_outer = (heads.W_Q, G_K) if kind == "q" else (heads.W_K, G_Q)
    return Sides(heads.W_O, G_V, ov_norm, inner, G_outer, qk_norm)


def numerator(W_O, G_V, inner, G_outer, *, dtype=np.float64) -> np.ndarray:
    """`‖W_V¹ W_O¹ inner² outer²‖_F` for earlier heads `(W_O (…, Dh, D), G_V (…, Dh, Dh))` against
    later heads `(inner (…, D, Dh), G_outer (…, Dh, Dh))`, broadcast over the leading axes; the
    `(Dh, D) @ (D, Dh)` products in `dtype` (float32 for every pair of heads at once)."""
    M = (W_O.astype(dtype) @ inner.astype(dtype)).astype(np.float64)  # (…, Dh, Dh)
    square = ((G_V @ M) * (M @ G_outer)).sum((-2, -1))  # ‖A M B‖² = Σ (G_A M) ∘ (M G_B)
    return np.sqrt(np.clip(square, 0, None))  # rounding can leave a zero product a hair below 0


@dataclass(frozen=True)
class Composition:
    """Composition scores of one kind.

    Attributes:
        kind: "q", "k" or "v" (`KINDS`).
        scores: `(L, H, L, H)`: `scores[l2, h2, l1, h1]` for the later head (l2, h2) reading the
            earlier head (l1, h1); NaN unless l1 < l2.
        baseline: the mean score of random Gaussian matrices of the same shapes.
    """

    kind: str
    scores: np.ndarray
    baseline: float


def layer_sides(ckpt, kind: str) -> list[Sides]:
    """Every layer's `sides` of `kind` (the `kind` and the family checked first)."""
    if kind not in KINDS:
        raise SpecError("kind", kind, " | ".join(map(repr, KINDS)))
    weights.family(ckpt)
    return [sides(folded(ckpt, layer), kind) for layer in range(ckpt.config.num_hidden_layers)]


def composition_scores(ckpt, kind: str, *, seed: int = 0, monitor: Monitor | None = None) -> Composition:
    """Every (later head, earlier head) pair's composition of `kind`, and the random baseline.

    In the row layout `W_QKᵀ W_OV¹` (Q) has the norm of `W_V¹ W_O¹ W_Q² W_K²ᵀ`, K that of
    `W_V¹ W_O¹ W_K² W_Q²ᵀ`, V that of `W_V¹ W_O¹ W_V² W_O²` (`Sides`): per pair of layers, H × H
    `(Dh, D) @ (D, Dh)` products in float32, the rest in float64. `monitor` is told each later
    layer done (of L − 1) and asked before each whether to stop (`Monitor.step`). Every pair costs about
    L·H times one head's row (`composition_row`), which is what the Interpret screen draws first.
    """
    per_layer, monitor = layer_sides(ckpt, kind), watch(monitor)
    L, H = ckpt.config.num_hidden_layers, ckpt.config.num_attention_heads
    scores = np.full((L, H, L, H), np.nan)
    for later in range(1, L):
        monitor.step(later - 1, L - 1)  # raises `Stop` when asked to stop
        b = per_layer[later]
        for first in range(later):
            a = per_layer[first]
            num = numerator(a.W_O[:, None], a.G_V[:, None], b.inner[None], b.G_outer[None], dtype=np.float32)
            scores[later, :, first, :] = (num / np.outer(a.ov_norm, b.later_norm)).T  # (H later, H earlier)
        monitor.report(later, L - 1)
    D, Dh = per_layer[0].inner.shape[-2:]
    return Composition(kind, scores, random_baseline(kind, D, Dh, seed=seed))


@dataclass(frozen=True)
class CompositionRow:
    """One head's composition scores of one kind with every head it can compose with.

    Attributes:
        kind: "q", "k" or "v"; layer, head: the head.
        reads: True: `scores[l1, h1]` is the head (as the later one) reading earlier head (l1, h1)
            — `Composition.scores[layer, head]`; False: later head (l2, h2) reading it —
            `Composition.scores[:, :, layer, head]`.
        scores: `(L, H)`, NaN where the pair is not earlier → later.
        baseline: as `Composition.baseline`.
    """

    kind: str
    layer: int
    head: int
    reads: bool
    scores: np.ndarray
    baseline: float


def composition_row(
    ckpt, kind: str, layer: int, head: int, *, reads: bool = True, seed: int = 0
) -> CompositionRow:
    """The heads `(layer, head)` reads from (`reads`), or the heads that read it: one row (or
    column) of `composition_scores`, each `(Dh, D) @ (D, Dh)` product in float64 — about 1/(L·H) of
    the work of every pair."""
    return composition_rows(ckpt, kind, [(layer, head, reads)], seed=seed)[0]


def composition_rows(
    ckpt, kind: str, rows: Sequence[tuple[int, int, bool]], *, seed: int = 0, monitor: Monitor | None = None
) -> list[CompositionRow]:
    """`composition_row` for each `(layer, head, reads)`, the weights read once; `monitor` is told
    each row done and asked before each whether to stop (`Monitor.step`)."""
    per_layer, monitor = layer_sides(ckpt, kind), watch(monitor)
    L, H = ckpt.config.num_hidden_layers, ckpt.config.num_attention_heads
    D, Dh = per_layer[0].inner.shape[-2:]
    found = []
    for i, (layer, head, reads) in enumerate(rows):
        monitor.step(i, len(rows))
        for name, value, top in (("layer", layer, L), ("head", head, H)):
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or not 0 <= value < top:
                raise SpecError(name, value, f"an integer 0 … {top - 1}")
        scores = _row(per_layer, layer, head, bool(reads), np.full((L, H), np.nan))
        found.append(
            CompositionRow(
                kind, int(layer), int(head), bool(reads), scores, random_baseline(kind, D, Dh, seed=seed)
            )
        )
    monitor.report(len(rows), len(rows))
    return found


def _row(per_layer: list[Sides], layer: int, head: int, reads: bool, scores: np.ndarray) -> np.ndarray:
    """`scores (L, H)` filled with head (layer, head)'s composition with the earlier heads it reads
    (`reads`) or the later heads that read it."""
    me = per_layer[layer]
    for other in range(layer) if reads else range(layer + 1, len(per_layer)):
        o = per_layer[other]
        if reads:  # (H earlier heads) against this head as the later one
            num = numerator(o.W_O, o.G_V, me.inner[head], me.G_outer[head])
            scores[other] = num / (o.ov_norm * me.later_norm[head])
        else:  # this head as the earlier one against (H later heads)
            num = numerator(me.W_O[head], me.G_V[head], o.inner, o.G_outer)
            scores[other] = num / (me.ov_norm[head] * o.later_norm)
    return scores


def random_baseline(kind: str, D: int, Dh: int, *, seed: int = 0, draws: int = BASELINE_DRAWS) -> float:
    """The mean composition score of `kind` between heads whose W_Q, W_K, W_V `(D, Dh)` and W_O
    `(Dh, D)` are standard Gaussian (the scores do not depend on the scale); drawn once per process
    for the same shapes."""
    return _baseline(kind, int(D), int(Dh), int(seed), int(draws))


@functools.lru_cache(maxsize=16)  # a float per (kind, shapes, seed, draws)
def _baseline(kind: str, D: int, Dh: int, seed: int, draws: int) -> float:
    rng = np.random.default_rng(seed)

    def draw(n: int) -> Sides:  # `n` random heads
        W_Q, W_K, W_V = (rng.standard_normal((n, D, Dh)) for _ in range(3))
        return sides(
            weights.LayerHeads(W_Q, W_K, W_V, rng.standard_normal((n, Dh, D)), np.zeros(D), 1.0, None), kind
        )

    scores = []
    for start in range(0, draws, PAIR_BLOCK):  # all draws at once held ~600 MiB at Gemma 3's sizes
        n = min(PAIR_BLOCK, draws - start)
        a, b = draw(n), draw(n)  # draw i of `a` (earlier) against draw i of `b` (later)
        scores.append(numerator(a.W_O, a.G_V, b.inner, b.G_outer) / (a.ov_norm * b.later_norm))
    return float(np.mean(np.concatenate(scores)))
