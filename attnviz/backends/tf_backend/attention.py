"""TensorFlow / Keras attention, the twin of `torch_backend`, step for step.

Follows "Attention Is All You Need" (Vaswani et al., 2017), §3.2, and the
TensorFlow tutorial's five-step recipe — but with attnviz's mask convention
(True = may attend) instead of its additive `mask * -1e9`. The variants of
Llama, Mistral and Gemma 3 enter at one override point, `MultiHeadAttention.after_split_heads`:
QK-norm (each head's q and k RMS-normed, Gemma 3) and rotary position embeddings (Su et al., 2021,
in transformers' `rotate_half` layout); grouped K/V heads (Ainslie et al., 2023; one K/V head
is multi-query attention) are repeated after the KV cache is joined; the causal sliding window
narrows the mask by position. One body serves a full pass, a cached decoding step and
cross-attention over a memory computed once.
Shapes: B batch, H query heads, Hkv key/value heads, Lq/Lk query/key lengths,
Dk/Dv head widths, D d_model, Dkv key/value input width.

The math alone: the rest of `attnviz.backends.Backend` (devices, threads, tensors to and from
NumPy, the step code) is `device.py`. Importing this module changes no process-wide setting:
Keras must already run on TensorFlow (its default; a clear ImportError otherwise).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf

from attnviz.backends.common import LayerKV
from attnviz.errors import SpecError
from attnviz.result import Recorder
from attnviz.spec import check_variants

if keras.backend.backend() != "tensorflow":
    raise ImportError(
        f"Keras runs on {keras.backend.backend()!r}; attnviz's TensorFlow backend needs Keras on "
        "TensorFlow: unset KERAS_BACKEND (or set it to 'tensorflow') before Keras is imported."
    )

_SKIP = Recorder(enabled=False)


def scaled_dot_product_attention(
    q: tf.Tensor,
    k: tf.Tensor,
    v: tf.Tensor,
    mask: tf.Tensor | None = None,
    *,
    scale: float | None = None,
    dropout: float = 0.0,
    training: bool = False,
    seed: int = 0,
    record: Recorder = _SKIP,
    after_weights: Callable | None = None,
) -> tuple[tf.Tensor, tf.Tensor]:
    """softmax(q·kᵀ·scale) · v.

    Args:
        q: `(B, H, Lq, Dk)`; k: `(B, H, Lk, Dk)`; v: `(B, H, Lk, Dv)`.
        mask: bool, broadcastable to `(B, H, Lq, Lk)`, True = may attend.
        scale: None → `1 / sqrt(Dk)`.
        dropout: rate applied to the weights when `training`.
        seed: seeds the (stateless) dropout draw.
        record: receives each intermediate.
        after_weights: `weights → weights` applied between the weights and the
            values (`MultiHeadAttention.after_weights`); None: nothing.

    Returns:
        `context (B, H, Lq, Dv)` and `weights (B, H, Lq, Lk)` (before
        dropout). Rows with no allowed key get zero weights, zero context
        and zero gradients. Each `(B, H, Lq, Lk)` grid is dropped as soon as
        the next exists, so at most two are alive at once.
    """
    scale = float(q.shape[-1]) ** -0.5 if scale is None else scale
    scores = tf.matmul(q, k, transpose_b=True)  # (B, H, Lq, Lk)
    record("scores", scores)
    logits = scores * tf.constant(scale, scores.dtype)
    record("scaled", logits)
    del scores
    if mask is not None:
        logits = tf.where(mask, logits, tf.constant(-np.inf, logits.dtype))
        record("masked", logits)
        live = tf.reduce_any(mask, axis=-1, keepdims=True)  # (B|1, 1, Lq, 1): rows with an allowed key
        logits = tf.where(live, logits, tf.constant(0.0, logits.dtype))
    weights = tf.nn.softmax(logits, axis=-1)
    del logits
    if mask is not None:
        weights = weights * tf.cast(live, weights.dtype)  # a row with no allowed key: 0
    record("softmax", weights)
    attended = weights if after_weights is None else after_weights(weights)
    if training and dropout > 0:
        draw = tf.random.stateless_uniform(tf.shape(weights), seed=[seed, 0], dtype=weights.dtype)
        attended = attended * tf.cast(draw >= dropout, weights.dtype) / (1.0 - dropout)
        record("dropout", attended)
    context = tf.matmul(attended, v)  # (B, H, Lq, Dv)
    record("context", context)
    return context, weights


def rotate_half(x: tf.Tensor) -> tf.Tensor:
    """`(x1, x2) → (−x2, x1)` over the two halves of the last axis: each pair (i, i + D/2) turned by 90°."""
    x1, x2 = tf.split(x, 2, axis=-1)
    return tf.concat([-x2, x1], axis=-1)


def rotary(length, width: int, base: float, like: tf.Tensor, start=0) -> tuple[tf.Tensor, tf.Tensor]:
    """`cos`, `sin` of the rotary angles of positions `start … start + length − 1`, each
    `(length, width)`, in `like`'s dtype.

    Position p turns pair (i, i + width/2) by p · base^(−2i/width); both halves
    of a row hold the same angles (transformers' `LlamaRotaryEmbedding`). A length
    known in Python (eager runs) reads a table computed once per size: every layer
    of a model shares it.
    """
    if isinstance(length, int) and isinstance(start, int):
        cos, sin = _rotary_table(start + length, width, float(base), like.dtype.name)
        return cos[start:], sin[start:]
    cos, sin = _rotary_angles(start + length, width, base, like.dtype)
    return cos[start:], sin[start:]


@functools.lru_cache(maxsize=64)
def _rotary_table(length: int, width: int, base: float, dtype: str) -> tuple[tf.Tensor, tf.Tensor]:
    return _rotary_angles(length, width, base, tf.as_dtype(dtype))


def _rotary_angles(length, width: int, base: float, dtype) -> tuple[tf.Tensor, tf.Tensor]:
    inv_freq = 1.0 / base ** (tf.range(0, width, 2, dtype=dtype) / width)  # (width/2,)
    angle = tf.range(length, dtype=dtype)[:, None] * inv_freq  # (length, width/2)
    angle = tf.concat([angle, angle], axis=-1)  # (length, width)
    return tf.cos(angle), tf.sin(angle)


def rms_norm(x: tf.Tensor, gamma: tf.Tensor, eps: float) -> tf.Tensor:
    """RMSNorm over the last axis (Zhang & Sennrich, 2019): x / √(mean(x²) + eps) · gamma."""
    return x * tf.math.rsqrt(tf.reduce_mean(tf.square(x), -1, keepdims=True) + eps) * gamma


def position_mask(mask: tf.Tensor | None, Lq, Lk, start, first, *, causal: bool, window: int | None):
    """`mask` (None: every key) narrowed by position: queries at `start …`, keys at `first …`;
    `causal`: query i sees key j ≤ i; a `window`: only i − window < j ≤ i (Mistral). `(B|1, 1, Lq, Lk)`."""
    if not causal and window is None:
        return mask
    offset = (start - first) + tf.range(Lq)[:, None] - tf.range(Lk)[None, :]  # (Lq, Lk): i − j
    near = offset >= 0 if window is None else (offset >= 0) & (offset < window)
    return near[None, None] if mask is None else mask & near


def joined(past: LayerKV | None, k: tf.Tensor | None, v: tf.Tensor | None, start):
    """The keys and values a call attends over: `past`'s cached ones, then the new `k (B, Hkv, n, Dk)`,
    `v (B, Hkv, n, Dv)` (kept in `past`), and the position of key 0 (the cached keys end just before
    `start`). `k` None: the cached ones alone. Lengths may be tensors (`tf.function`)."""
    if past is None or past.k is None:
        if past is not None:
            past.keep(k, v)
        return k, v, start
    Lp = past.k.shape[2] if past.k.shape[2] is not None else tf.shape(past.k)[2]
    if k is None:
        return past.k, past.v, start - Lp
    B = k.shape[0] or tf.shape(k)[0]
    k = tf.concat([tf.tile(past.k, (B // past.k.shape[0], 1, 1, 1)), k], axis=2)  # (B, Hkv, Lp + n, Dk)
    v = tf.concat([tf.tile(past.v, (B // past.v.shape[0], 1, 1, 1)), v], axis=2)  # (B, Hkv, Lp + n, Dv)
    past.keep(k, v)
    return k, v, start - Lp


def head_mask(mask: tf.Tensor | None, B: int, Lq: int, Lk: int) -> tf.Tensor | None:
    """A bool mask `(Lq, Lk)` (every batch item) or `(B, Lq, Lk)` → `(B|1, 1, Lq, Lk)`, the same for every head."""
    if mask is None:
        return None
    shape = tuple(mask.shape)
    if mask.dtype != tf.bool or shape not in ((Lq, Lk), (B, Lq, Lk)):
        raise SpecError(
            "mask",
            None,
            f"a bool tensor of shape ({Lq}, {Lk}) or ({B}, {Lq}, {Lk}), True = may attend",
            value_text=f"a {mask.dtype.name} tensor of shape {shape}",
        )
    return mask[None, None] if len(shape) == 2 else mask[:, None]


def linear(x: tf.Tensor, dense: keras.layers.Dense) -> tf.Tensor:
    """`x @ kernel + bias` with a Dense layer's weights.

    The Dense layer's own `__call__` adds about 0.5 ms of eager bookkeeping
    per call on CPU; four of them made the eager layer ~20 % slower than
    Keras's MultiHeadAttention at length 512 (docs/benchmarks.md).
    """
    y = tf.matmul(x, dense.kernel)
    return y + dense.bias if dense.use_bias else y


class LayerNorm(keras.layers.Layer):
    """LayerNorm over the last axis, variance as the mean of squared deviations.

    Keras's own `LayerNormalization` is less exact in float32 at small widths
    (relative error 7e-4 against float64 at width 1, where PyTorch's is 0),
    which would show as a spurious PyTorch/TensorFlow disagreement.
    """

    def __init__(self, width: int, epsilon: float = 1e-6, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = epsilon
        self.gamma = self.add_weight(shape=(width,), initializer="ones", name="gamma")
        self.beta = self.add_weight(shape=(width,), initializer="zeros", name="beta")

    def call(self, x):
        mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
        return (x - mean) * tf.math.rsqrt(var + self.epsilon) * self.gamma + self.beta


class MultiHeadAttention(keras.layers.Layer):
    """Multi-head attention with sublayers `query`, `key`, `value`, `output_proj`
    (and `norm` for residual + LayerNorm), named as in the PyTorch twin.

    `n_kv_heads` (None: `n_heads`) K/V heads, each serving `n_heads / n_kv_heads`
    query heads; `rope_base` (None: off) turns q and k by position; `window`
    (None: off) lets query i see only keys i − window < j ≤ i. All three enter
    in `after_split_heads` and `call`'s mask, the rest is the 2017 layer.
    `qk_norm_eps` (None: off) RMS-normalises each head's q and k before RoPE, scaled by the
    weights `q_norm`, `k_norm` `(Dk,)` (Gemma 3's QK-norm).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_k: int,
        d_v: int,
        *,
        d_kv_in: int | None = None,
        n_kv_heads: int | None = None,
        rope_base: float | None = None,
        window: int | None = None,
        bias: bool = True,
        dropout: float = 0.0,
        scale: float | None = None,
        residual_norm: bool = False,
        qk_norm_eps: float | None = None,
        seed: int = 0,
        **kwargs,
    ):
        super().__init__(**kwargs)  # the TensorFlow tutorial's layer forgets this line
        n_kv_heads, rope_base, window = check_variants(n_heads, d_k, n_kv_heads, rope_base, window)
        self.n_heads, self.n_kv_heads, self.d_k, self.d_v = n_heads, n_kv_heads, d_k, d_v
        self.rope_base, self.window = rope_base, window
        self.dropout, self.scale, self.seed = dropout, scale, seed
        self.widths = {"query": d_model, "key": d_kv_in or d_model, "value": d_kv_in or d_model}
        self.widths["output_proj"] = n_heads * d_v
        dense = lambda units, name: keras.layers.Dense(  # noqa: E731
            units, use_bias=bias, name=name, dtype=self.dtype_policy
        )
        self.query = dense(n_heads * d_k, "query")
        self.key = dense(n_kv_heads * d_k, "key")
        self.value = dense(n_kv_heads * d_v, "value")
        self.output_proj = dense(d_model, "output_proj")
        self.norm = LayerNorm(d_model, 1e-6, name="norm", dtype=self.dtype_policy) if residual_norm else None
        self.qk_norm_eps = qk_norm_eps
        qk = lambda name: self.add_weight(shape=(d_k,), initializer="ones", name=name)  # noqa: E731
        self.q_norm, self.k_norm = (qk("q_norm"), qk("k_norm")) if qk_norm_eps is not None else (None, None)

    @classmethod
    def from_spec(cls, spec) -> MultiHeadAttention:
        return cls(
            spec.d_model,
            spec.n_heads,
            spec.d_k,
            spec.d_v,
            d_kv_in=spec.d_kv_in,
            n_kv_heads=spec.n_kv_heads,
            rope_base=spec.rope_base,
            window=spec.window,
            bias=spec.bias,
            dropout=spec.dropout,
            scale=spec.scale,
            residual_norm=spec.residual_norm,
            seed=spec.seed,
            dtype=spec.dtype,
        )

    def build(self, input_shape=None) -> None:
        for name, width in self.widths.items():
            getattr(self, name).build((None, width))
        self.built = True

    def load_params(self, params: dict[str, np.ndarray]) -> MultiHeadAttention:
        """Assign attnviz's `x @ W` arrays; Dense kernels share that layout."""
        if not self.built:
            self.build()
        for key, layer in (("q", self.query), ("k", self.key), ("v", self.value), ("o", self.output_proj)):
            layer.kernel.assign(params[f"W_{key}"])
            if layer.use_bias:
                layer.bias.assign(params[f"b_{key}"])
        if self.norm is not None:
            self.norm.gamma.assign(params["ln_gamma"])
            self.norm.beta.assign(params["ln_beta"])
        if self.qk_norm_eps is not None:
            self.q_norm.assign(params["q_norm"])
            self.k_norm.assign(params["k_norm"])
        return self

    def __call__(self, x_q, x_kv, attention_mask=None, **kwargs):
        # Check the mask before Keras wraps the call: Keras re-raises errors from `call` as
        # RuntimeError, which would hide the SpecError (and its `.field`) from the caller.
        if attention_mask is not None:
            past = kwargs.get("past")
            Lk = (0 if x_kv is None else x_kv.shape[1]) + (0 if past is None else past.length)
            head_mask(tf.convert_to_tensor(attention_mask), x_q.shape[0], x_q.shape[1], Lk)
        return super().__call__(x_q, x_kv, attention_mask, **kwargs)

    def call(
        self,
        x_q,
        x_kv,
        attention_mask=None,
        training=False,
        *,
        past: LayerKV | None = None,
        start=0,
        causal: bool = False,
        record: Recorder = _SKIP,
        after_weights: Callable | None = None,
    ):
        """Attend from `x_q (B, Lq, D)` over `x_kv (B, Lk, Dkv)` and whatever `past` holds.

        Args:
            x_kv: None with a `past`: the keys and values already cached alone (cross-attention's
                memory, computed once).
            attention_mask: bool `(Lq, Lk)` or `(B, Lq, Lk)` over every key (cached, then new),
                True = may attend; shared by all heads.
            past: a `LayerKV` read before `x_kv`'s keys and values and extended with them (the KV
                cache); None: nothing cached.
            start: the position of the first query and of `x_kv`'s first key (RoPE and the
                window read it); cached keys sit just before it. A tensor in a `tf.function`.
            causal: query i sees keys at positions ≤ i only.
            after_weights: fills the `after_weights` hook for this call only (a layer shared by
                every session runs one edited pass); None: the method.

        Returns:
            `output (B, Lq, D)` and `weights (B, H, Lq, Lk)`.
        """
        B, Lq = x_q.shape[0] or tf.shape(x_q)[0], x_q.shape[1] or tf.shape(x_q)[1]
        H, Hkv, Dk, Dv = self.n_heads, self.n_kv_heads, self.d_k, self.d_v
        q = linear(x_q, self.query)  # (B, Lq, H*Dk)
        record("q_proj", q)
        k = v = None
        if x_kv is not None:
            k = linear(x_kv, self.key)  # (B, Lk, Hkv*Dk)
            record("k_proj", k)
            v = linear(x_kv, self.value)  # (B, Lk, Hkv*Dv)
            record("v_proj", v)
        q = tf.transpose(tf.reshape(q, (B, Lq, H, Dk)), (0, 2, 1, 3))  # (B, H, Lq, Dk)
        record("q_heads", q)
        if x_kv is not None:
            k = tf.transpose(tf.reshape(k, (B, -1, Hkv, Dk)), (0, 2, 1, 3))  # (B, Hkv, Lk, Dk)
            record("k_heads", k)
            v = tf.transpose(tf.reshape(v, (B, -1, Hkv, Dv)), (0, 2, 1, 3))  # (B, Hkv, Lk, Dv)
            record("v_heads", v)
        q, k, v = self.after_split_heads(q, k, v, start=start, record=record)
        k, v, first = joined(past, k, v, start)  # (B|1, Hkv, Lk, Dk|Dv), Lk = cached + new
        Lk = k.shape[2] or tf.shape(k)[2]
        mask = head_mask(attention_mask, x_q.shape[0], x_q.shape[1], k.shape[2])  # (B|1, 1, Lq, Lk)
        mask = position_mask(mask, Lq, Lk, start, first, causal=causal, window=self.window)
        k, v = self.grouped(k, v, record=record)  # (B|1, H, Lk, Dk|Dv)
        context, weights = scaled_dot_product_attention(
            q,
            k,
            v,
            mask,
            scale=self.scale,
            dropout=self.dropout,
            training=training,
            seed=self.seed,
            record=record,
            after_weights=self.after_weights if after_weights is None else after_weights,
        )
        merged = tf.reshape(tf.transpose(context, (0, 2, 1, 3)), (B, Lq, H * Dv))  # (B, Lq, H*Dv)
        record("merged", merged)
        out = linear(merged, self.output_proj)  # (B, Lq, D)
        record("output_proj", out)
        if self.norm is not None:
            out = self.norm(x_q + out)
            record("residual_norm", out)
        return out, weights

    def after_split_heads(
        self, q: tf.Tensor, k: tf.Tensor | None, v: tf.Tensor | None, *, start=0, record: Recorder = _SKIP
    ) -> tuple[tf.Tensor, tf.Tensor | None, tf.Tensor | None]:
        """The override point between splitting heads and the scores, as Keras's
        `MultiHeadAttention._compute_attention` is the place to change its attention.

        Here QK-norm scales each head's q and k to RMS 1 (`qk_norm_eps`) and rotary positions
        turn q and k (`rope_base`), each at its own position from `start`. A subclass adds another
        position encoding or a change to q, k or v by overriding this method, not by forking
        `call`; record each new tensor under a `STEP_DOCS` name. Only the new keys pass here:
        what it returns is what the KV cache keeps, so a full pass, a cached decoding step and a
        patching sweep's shared prefix all see the variant.

        Args:
            q: `(B, H, Lq, Dk)`; k: `(B, Hkv, Lk, Dk)`; v: `(B, Hkv, Lk, Dv)` — k and v None when
                the call reads cached keys and values alone.
            start: the position of the first query and of the first new key.

        Returns:
            `q`, `k`, `v` in the same shapes.
        """
        Dk = self.d_k
        if self.qk_norm_eps is not None:
            q = rms_norm(q, self.q_norm, self.qk_norm_eps)  # (B, H, Lq, Dk): each head's q at RMS 1, scaled
            record("q_norm", q)
            if k is not None:
                k = rms_norm(k, self.k_norm, self.qk_norm_eps)  # (B, Hkv, Lk, Dk)
                record("k_norm", k)
        if self.rope_base is not None:
            cos, sin = rotary(
                q.shape[2] or tf.shape(q)[2], Dk, self.rope_base, q, start
            )  # (Lq, Dk): position · base^(−2i/Dk)
            q = q * cos + rotate_half(q) * sin  # (B, H, Lq, Dk): pair (i, i + Dk/2) turned
            record("q_rope", q)
            if k is not None:
                cos, sin = rotary(k.shape[2] or tf.shape(k)[2], Dk, self.rope_base, k, start)  # (Lk, Dk)
                k = k * cos + rotate_half(k) * sin  # (B, Hkv, Lk, Dk)
                record("k_rope", k)
        return q, k, v

    def grouped(self, k: tf.Tensor, v: tf.Tensor, *, record: Recorder = _SKIP) -> tuple[tf.Tensor, tf.Tensor]:
        """Each K/V head repeated for the query heads it serves (`n_kv_heads`):
        `k (B, Hkv, Lk, Dk)`, `v (B, Hkv, Lk, Dv)` → `(B, H, Lk, Dk|Dv)`."""
        H, Hkv = self.n_heads, self.n_kv_heads
        if Hkv != H:
            k = tf.gather(k, tf.range(H) // (H // Hkv), axis=1)  # (B, H, Lk, Dk): h reads K/V head h // r
            record("k_repeated", k)
            v = tf.gather(v, tf.range(H) // (H // Hkv), axis=1)  # (B, H, Lk, Dv)
            record("v_repeated", v)
        return k, v

    def after_weights(self, weights):
        """The override point between the weights and the values: returns the weights that multiply V.

        `weights (B, H, Lq, Lk)`, after the softmax (before dropout). Unchanged here; a
        subclass reweights, ablates or patches attention by overriding it. The weights
        the layer returns are the softmax's, before this hook.
        """
        return weights
