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

from dataclasses import dataclass

import numpy as np

from attnviz.errors import SpecError
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
PAIR_BLOCK = 16  # earlier heads per matrix product of the composition scores


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


def copying_scores(ckpt) -> np.ndarray:
    """`(L, H)`: `Σλ / Σ|λ|` over the eigenvalues of each head's full OV circuit `E_l W_V W_O U_effᵀ`.

    The nonzero eigenvalues of that `(V, V)` product are those of `W_O (U_effᵀ E_l) W_V` `(Dh, Dh)`;
    `U_effᵀ E_l` `(D, D)` is one product over the vocabulary shared by every layer up to its norm's
    gain and bias: `E_l = centre(E) / r · γ_l + β_l` with r each row's σ or RMS. The product is summed
    `CHUNK` rows of the vocabulary at a time.
    """
    norm0 = weights.input_norm(ckpt, 0)
    D = ckpt.config.hidden_size
    shared, column = np.zeros((D, D)), np.zeros(D)  # U_effᵀ (normed E), and U_effᵀ 1
    for i in range(0, ckpt.n_tokens, CHUNK):
        E, U = weights.embedding(ckpt, slice(i, i + CHUNK)), effective_unembedding(ckpt, slice(i, i + CHUNK))
        shared += U.T @ (norm0.centre(E) / norm0.scale(E)[:, None])  # every layer's eps is the config's
        column += U.sum(axis=0)
    scores = []
    for layer in range(ckpt.config.num_hidden_layers):
        norm, heads = weights.input_norm(ckpt, layer), weights.layer_heads(ckpt, layer)
        through = shared * norm.weight + np.outer(column, norm.bias)  # (D, D) = U_effᵀ E_l
        circuit = heads.W_O_gained @ through @ heads.W_V  # (H, Dh, Dh)
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


def _right(A: np.ndarray) -> np.ndarray:
    """`R (…, Dh, Dh)` with `RᵀR = AᵀA` (`A (…, D, Dh)`), so `‖Y Aᵀ‖_F = ‖Y Rᵀ‖_F` for any Y:
    the square root of the Gram matrix (a QR's R up to a rotation; defined for any rank)."""
    lam, vec = np.linalg.eigh(A.swapaxes(-1, -2) @ A)  # (…, Dh), (…, Dh, Dh)
    return np.sqrt(np.clip(lam, 0, None))[..., :, None] * vec.swapaxes(-1, -2)


def _sides(heads: weights.LayerHeads, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Per head, reduced factors whose product's norm is a composition's numerator: `earlier
    (H, Dh, D)` with `‖earlier‖_F = ‖W_OV‖_F`, and `later (H, D, Dh)` with `‖later‖_F` the norm of
    the later head's matrix for `kind` (see `composition_scores`)."""
    earlier = _right(heads.W_V) @ heads.W_O  # ‖W_V W_O Y‖ = ‖R_V W_O Y‖
    if kind == "q":
        later = heads.W_Q @ _right(heads.W_K).swapaxes(-1, -2)  # ‖Y W_Q W_Kᵀ‖ = ‖Y W_Q R_Kᵀ‖
    elif kind == "k":
        later = heads.W_K @ _right(heads.W_Q).swapaxes(-1, -2)
    else:
        later = heads.W_V @ _right(heads.W_O.swapaxes(-1, -2)).swapaxes(-1, -2)
    return earlier, later


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


def composition_scores(ckpt, kind: str, *, seed: int = 0) -> Composition:
    """Every (later head, earlier head) pair's composition of `kind`, and the random baseline.

    In the row layout `W_QKᵀ W_OV¹` (Q) has the norm of `W_V¹ W_O¹ W_Q² W_K²ᵀ`, K that of
    `W_V¹ W_O¹ W_K² W_Q²ᵀ`, V that of `W_V¹ W_O¹ W_V² W_O²`; replacing each outer factor by
    (the square root of its Gram matrix) leaves `(Dh, D) @ (D, Dh)` products, one matrix product per pair of layers.
    """
    if kind not in KINDS:
        raise SpecError("kind", kind, " | ".join(map(repr, KINDS)))
    weights.family(ckpt)
    L, H = ckpt.config.num_hidden_layers, ckpt.config.num_attention_heads
    # Per layer: the factors as float32 rows for the products, and each head's norm in float64. One
    # (H·Dh, D) @ (D, H·Dh) product per pair of layers keeps the peak to a few MiB beyond the factors
    # (every earlier head at once held ~0.5 GB on Gemma 3: over a worker's 512 MiB budget).
    rows, columns, left_norm, right_norm = [], [], [], []
    for layer in range(L):
        earlier, later = _sides(folded(ckpt, layer), kind)  # (H, Dh, D), (H, D, Dh)
        Dh, D = earlier.shape[-2:]
        rows.append(earlier.reshape(-1, D).astype(np.float32))
        columns.append(later.transpose(1, 0, 2).reshape(D, -1).astype(np.float32))
        left_norm.append(np.linalg.norm(earlier, axis=(-2, -1)))
        right_norm.append(np.linalg.norm(later, axis=(-2, -1)))
    scores = np.full((L, H, L, H), np.nan)
    for later in range(1, L):
        for first in range(later):
            product = (rows[first] @ columns[later]).astype(np.float64).reshape(H, Dh, H, Dh)
            numerator = np.sqrt((product**2).sum(axis=(1, 3)))  # (H earlier, H later)
            scores[later, :, first, :] = (numerator / np.outer(left_norm[first], right_norm[later])).T
    return Composition(kind, scores, random_baseline(kind, D, Dh, seed=seed))


def random_baseline(kind: str, D: int, Dh: int, *, seed: int = 0, draws: int = BASELINE_DRAWS) -> float:
    """The mean composition score of `kind` between heads whose W_Q, W_K, W_V `(D, Dh)` and W_O
    `(Dh, D)` are standard Gaussian (the scores do not depend on the scale)."""
    rng = np.random.default_rng(seed)

    def draw(n: int) -> weights.LayerHeads:  # `n` random heads
        W_Q, W_K, W_V = (rng.standard_normal((n, D, Dh)) for _ in range(3))
        return weights.LayerHeads(W_Q, W_K, W_V, rng.standard_normal((n, Dh, D)), np.zeros(D), 1.0, None)

    scores = []
    for start in range(0, draws, PAIR_BLOCK):  # all draws at once held ~600 MiB at Gemma 3's sizes
        n = min(PAIR_BLOCK, draws - start)
        earlier, later = _sides(draw(n), kind)[0], _sides(draw(n), kind)[1]  # (n, Dh, D), (n, D, Dh)
        norms = np.linalg.norm(earlier, axis=(-2, -1)) * np.linalg.norm(later, axis=(-2, -1))
        scores.append(np.linalg.norm(earlier @ later, axis=(-2, -1)) / norms)
    return float(np.mean(np.concatenate(scores)))
