"""What every pretrained model class shares, whatever its framework: written once.

The models (`bert.BertEncoder`, and `decoder.Decoder` for every decoder family and the
Training lab's models) are called as

    model(ids, type_ids, *, replace={layer: {head: "zero" | "mean" | z}},
          capture_layer=None, head_outputs=False) -> Forward

(decoders also take `edit={layer: RowEdit}`, attention rows put in place before they multiply
V, and `window=N`, the local layers' sliding window narrowed to N tokens) and have
`lens(hidden (N, T, D)) -> logits (N, T, V)` (the final norm and the unembedding; decoders
only). `Tap` is the recorder their attention layers write to; `Trace` collects what one
forward pass hands back. `DecoderLayout` is what a family's row declares about its decoder
(norms and where they sit, MLP, positions, each layer's attention); `KVCache` holds one
generation's keys and values.
Shapes: T tokens, D hidden size, H heads, Dh head width, L layers, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnviz.result import Recorder

ABLATIONS = ("zero", "mean")
# What may replace one head's output: an ablation mode, or a patch `z (T, Dh)`.
Replacement = str | np.ndarray


@dataclass(frozen=True)
class RowEdit:
    """One layer's edited attention rows (`attnviz.pretrained.edits`), applied in the attention's
    `after_weights` hook: `weights ← where(where, rows, weights)`.

    Attributes:
        where: `(H, T, T)` bool, True on every key of each replaced (head, query) row.
        rows: `(H, T, T)` float32, the weights put there (zero elsewhere).
    """

    where: np.ndarray
    rows: np.ndarray


def to_numpy(t: Any) -> np.ndarray:
    """A framework tensor (or array) as a NumPy array."""
    return np.asarray(t.detach().cpu() if hasattr(t, "detach") else t)


class Tap:
    """A recorder for `MultiHeadAttention`: keeps the per-head `context` (for ablation, patching
    and head outputs) and passes every step on to `keep` (the captured layer's `Recorder`), if any."""

    def __init__(self, keep: Recorder | None = None):
        self.keep, self.context = keep, None

    @property
    def enabled(self) -> bool:
        """Every step wanted only when a layer is captured; otherwise PyTorch's attention takes its
        in-place fast path, which still hands on the `context`."""
        return self.keep is not None

    def __call__(self, name: str, tensor, *, owned: bool = False) -> None:
        if name == "context":
            self.context = tensor  # (1, H, T, Dh); not written in place afterwards
        if self.keep is not None:
            self.keep(name, tensor, owned=owned)

    def checked_context(self, needed: bool):
        """The recorded context, or a RuntimeError when it is `needed` and the backend stopped
        recording it (never skip an ablation silently)."""
        if needed and self.context is None:
            raise RuntimeError("MultiHeadAttention recorded no 'context' step; head ablation needs it.")
        return self.context


@dataclass
class Trace:
    """What one forward pass collects, layer by layer, as NumPy.

    Attributes:
        hidden: L + 1 × `(T, D)`: the residual stream entering each block, then the last
            block's output (before any final norm).
        attentions: L × `(H, T, T)`.
        heads: L × `(H, T, Dh)`, each head's attention-weighted values as the output
            projection receives them (after any replacement), when asked for.
    """

    want_heads: bool = False
    hidden: list = field(default_factory=list)
    attentions: list = field(default_factory=list)
    heads: list = field(default_factory=list)

    def block(self, x: Any, weights: Any, context: Any) -> None:
        """Record one block: its input `x (1, T, D)`, `weights (1, H, T, T)`, `context (1, H, T, Dh)`."""
        self.hidden.append(to_numpy(x)[0])
        self.attentions.append(to_numpy(weights)[0])
        if self.want_heads:
            self.heads.append(to_numpy(context)[0])

    def finish(self, last: Any, logits: Any, steps: list, final: Any = None) -> Forward:
        """The `Forward` of a pass whose last block produced `last (1, T, D)`; `final (T, D)` is
        what the model calls its last hidden state (after a final norm), default `last`."""
        self.hidden.append(to_numpy(last)[0])
        return Forward(
            last_hidden_state=self.hidden[-1] if final is None else to_numpy(final),
            attentions=np.stack(self.attentions),
            logits=None if logits is None else to_numpy(logits),
            steps=steps,
            hidden_states=np.stack(self.hidden),
            head_outputs=np.stack(self.heads) if self.want_heads else None,
        )


@dataclass(frozen=True)
class Forward:
    """What a model class returns (see the module docstring)."""

    last_hidden_state: np.ndarray  # (T, D)
    attentions: np.ndarray  # (L, H, T, T)
    logits: np.ndarray | None  # (T, V), decoders
    steps: list
    hidden_states: np.ndarray  # (L + 1, T, D)
    head_outputs: np.ndarray | None  # (L, H, T, Dh)


# -- a decoder's parts, as a family's row declares them (`attnviz.pretrained.families`) --------
# Tensor names are final (the layer index already in them); each framework's `decoder.Decoder`
# reads them, so a new family is a new `DecoderLayout`, not a new block loop.


@dataclass(frozen=True)
class Linear:
    """One linear map's tensors. `transposed`: stored `(out, in)` as `nn.Linear` keeps it
    (`x @ Wᵀ`); else `(in, out)` as GPT-2's Conv1D (`x @ W`). `bias` None: none."""

    weight: str
    bias: str | None = None
    transposed: bool = False


@dataclass(frozen=True)
class Norm:
    """A LayerNorm (`kind` "layer": centred, scaled, shifted) or an RMSNorm ("rms": scaled only).
    `offset` is added to the stored weight: Gemma keeps `w` and scales by `1 + w`."""

    kind: str
    weight: str
    bias: str | None
    eps: float
    offset: float = 0.0


@dataclass(frozen=True)
class Sublayer:
    """Where the norms sit around one sublayer `f` (attention or the MLP), each None for none:

        x ← outside(x + after(f(before(x))))

    pre-LN (GPT-2, Llama): `before`; post-LN (Vaswani et al. 2017, the lab): `outside`;
    Gemma 2/3's sandwich: `before` and `after`.
    """

    before: Norm | None = None
    after: Norm | None = None
    outside: Norm | None = None


@dataclass(frozen=True)
class Mlp:
    """`down(act(up(x)))`, or with a `gate`, `down(act(gate(x)) · up(x))` (SwiGLU with `act`
    "silu", GeGLU with "gelu_pytorch_tanh"). `act` names an entry of `blocks.ACTIVATIONS`."""

    act: str
    up: Linear
    down: Linear
    gate: Linear | None = None


@dataclass(frozen=True)
class Heads:
    """One layer's attention, as `MultiHeadAttention`'s arguments: per layer, so local and global
    layers (sliding `window`s, their own `rope_base`) are rows of one table. `qk_norm_eps`: each
    head's q and k RMS-normed before RoPE (Gemma 3's QK-norm), weights `q_norm`, `k_norm` `(Dk,)`."""

    n_heads: int
    d_k: int
    d_v: int
    n_kv_heads: int | None = None
    rope_base: float | None = None
    window: int | None = None
    bias: bool = True
    scale: float | None = None
    qk_norm_eps: float | None = None


@dataclass(frozen=True)
class Layer:
    """One block: attention with its norms, then (unless `mlp` is None) the MLP with its norms."""

    heads: Heads
    attention: Sublayer
    mlp: Mlp | None = None
    mlp_norms: Sublayer = Sublayer()


@dataclass(frozen=True)
class DecoderLayout:
    """A transformer stack as data: what differs between families, nothing else.

    Attributes:
        d_model: the residual width D.
        embed: the token table `(V, D)`.
        position: the learned absolute position table `(P, D)`, or None (positions enter as
            RoPE inside attention, `Heads.rope_base`).
        layers: one `Layer` per block.
        final_norm: applied before the unembedding, or None.
        unembed: hidden → logits.
        causal: each position sees itself and earlier ones; False: every position (a lab encoder).
        embed_scale: the token embeddings are multiplied by it (Gemma: √D).
    """

    d_model: int
    embed: str
    position: str | None
    layers: tuple[Layer, ...]
    final_norm: Norm | None
    unembed: Linear
    causal: bool = True
    embed_scale: float = 1.0


class LayerKV:
    """One attention layer's cache: what `MultiHeadAttention`'s `past=` reads and extends.

    `k (1|B, Hkv, Lk, Dk)` and `v (1|B, Hkv, Lk, Dv)` per K/V head — after QK-norm and RoPE (each
    key turned at its own position), before the repeat for the query heads, so grouped-query
    attention stores `Hkv / H` of multi-head attention's bytes; None until the first call. A
    `window` keeps only the last `window` positions. The body appends to it (`keep`); a cache that
    must stay as it is (a patching sweep's shared prefix) is read through a `copy`.
    """

    def __init__(self, window: int | None = None, k: Any = None, v: Any = None):
        self.window, self.k, self.v = window, k, v

    @property
    def length(self) -> int:
        """How many keys it holds."""
        return 0 if self.k is None else int(self.k.shape[2])

    def keep(self, k: Any, v: Any) -> None:
        """Hold the joined keys and values `(B, Hkv, Lk, Dk|Dv)`, trimmed to the window."""
        if self.window is not None:
            k, v = k[:, :, -self.window :], v[:, :, -self.window :]
        self.k, self.v = k, v

    def copy(self) -> LayerKV:
        """A new cache over the same tensors: what the body appends to it leaves this one as it is."""
        return LayerKV(self.window, self.k, self.v)


class KVCache:
    """One generation's keys and values, a `LayerKV` per layer: owned by the call that generates (a
    model is shared by every session and holds no state of its own).

    `length` counts every position seen. With `weights`, each layer's last step also leaves its new
    queries' attention weights over the keys they read, `(1, H, n, Lk)` (`attnviz.kernels.decoding`
    shows them); they are not cached.
    """

    def __init__(self, windows: list[int | None], weights: bool = False):
        self.layers = [LayerKV(window) for window in windows]
        self.keep_weights = weights
        self.weights: list[Any] = [None] * len(windows)
        self.length, self._end = 0, 0

    @property
    def windows(self) -> list[int | None]:
        return [layer.window for layer in self.layers]

    @property
    def keys(self) -> list[Any]:
        """Each layer's `k (1, Hkv, Lk, Dk)` (None before the first step)."""
        return [layer.k for layer in self.layers]

    @property
    def values(self) -> list[Any]:
        """Each layer's `v (1, Hkv, Lk, Dv)` (None before the first step)."""
        return [layer.v for layer in self.layers]

    def store(self, layer: int, k: Any, v: Any, weights: Any = None) -> None:
        """Keep `layer`'s keys and values after a step (kept and new, `(1, Hkv, Lk, Dk|Dv)`),
        trimmed to the layer's window, and the step's `weights (1, H, n, Lk)` when kept."""
        self.layers[layer].keep(k, v)
        if self.keep_weights:
            self.weights[layer] = weights

    def begin(self, n: int) -> int:
        """Start a step of `n` new positions; returns the first one's position."""
        self._end = self.length + n
        return self.length

    def advance(self) -> None:
        """End the step: its positions are now cached."""
        self.length = self._end

    @property
    def nbytes(self) -> int:
        """The bytes the cache holds now (keys and values of every layer)."""
        return sum(_nbytes(t) for t in (*self.keys, *self.values) if t is not None)


def _nbytes(t: Any) -> int:
    itemsize = t.element_size() if hasattr(t, "element_size") else t.dtype.size
    return int(np.prod(tuple(t.shape))) * itemsize
