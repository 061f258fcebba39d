"""PyTorch attention, written the textbook way so every step can be shown.

Follows "Attention Is All You Need" (Vaswani et al., 2017), §3.2. The variants
of Llama, Mistral and Gemma 3 enter at one override point, `MultiHeadAttention.after_split_heads`:
QK-norm (each head's q and k RMS-normed, Gemma 3) and rotary position embeddings (Su et al., 2021,
in transformers' `rotate_half` layout); grouped K/V heads (Ainslie et al., 2023; one K/V head
is multi-query attention) are repeated after the KV cache is joined; the causal sliding window
narrows the mask by position. One body serves a full pass, a cached decoding step and
cross-attention over a memory computed once.
Shapes: B batch, H query heads, Hkv key/value heads, Lq/Lk query/key lengths,
Dk/Dv head widths, D d_model, Dkv key/value input width.

The math alone: the rest of `attnviz.backends.Backend` (devices, threads, tensors to and from
NumPy, the step code) is `device.py`. Importing this module changes no process-wide setting.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from attnviz.backends.common import LayerKV
from attnviz.errors import SpecError
from attnviz.result import Recorder
from attnviz.spec import check_variants

_SKIP = Recorder(enabled=False)


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    scale: float | None = None,
    dropout: float = 0.0,
    training: bool = False,
    generator: torch.Generator | None = None,
    record: Recorder = _SKIP,
    after_weights: Callable | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q·kᵀ·scale) · v.

    Args:
        q: `(B, H, Lq, Dk)`; k: `(B, H, Lk, Dk)`; v: `(B, H, Lk, Dv)`.
        mask: bool, broadcastable to `(B, H, Lq, Lk)`, True = may attend.
        scale: None → `1 / sqrt(Dk)`.
        dropout: rate applied to the weights when `training`.
        generator: seeds the dropout draw.
        record: receives each intermediate.
        after_weights: `weights → weights` applied between the weights and the
            values (`MultiHeadAttention.after_weights`); None: nothing.

    Returns:
        `context (B, H, Lq, Dv)` and `weights (B, H, Lq, Lk)` (before
        dropout). Rows with no allowed key get zero weights, zero context
        and zero gradients. Differentiable. (With nothing recorded and no
        autograd, `MultiHeadAttention` runs `attention_in_place` instead.)
    """
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    # Each (B, H, Lq, Lk) step is a fresh tensor nothing here writes to again: the record keeps it
    # without a copy (`owned`). The weights are handed over only when no hook can edit them in place.
    scores = q @ k.transpose(-2, -1)  # (B, H, Lq, Lk)
    record("scores", scores, owned=True)
    logits = scores * scale
    record("scaled", logits, owned=True)
    if mask is not None:
        logits = logits.masked_fill(~mask, -torch.inf)
        record("masked", logits, owned=True)
        live = mask.any(dim=-1, keepdim=True)  # (B|1, 1, Lq, 1): rows with an allowed key
        logits = logits.masked_fill(~live, 0.0)
    weights = torch.softmax(logits, dim=-1)
    if mask is not None:
        weights = weights * live  # a row with no allowed key: 0
    record("softmax", weights, owned=after_weights is None or _unchanged(after_weights))
    attended = weights if after_weights is None else after_weights(weights)
    if training and dropout > 0:
        keep = torch.rand(weights.shape, generator=generator, device=weights.device) >= dropout
        attended = attended * keep / (1.0 - dropout)
        record("dropout", attended)
    context = attended @ v  # (B, H, Lq, Dv)
    record("context", context)
    return context, weights


def _unchanged(hook: Callable) -> bool:
    """Whether `hook` is `MultiHeadAttention.after_weights` itself (it returns the weights untouched)."""
    return getattr(hook, "__func__", None) is MultiHeadAttention.after_weights


@torch.no_grad()
def attention_in_place(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    scale: float | None,
    after_weights: Callable | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`scaled_dot_product_attention` without dropout, recording or autograd: the fast path.

    The same operations in the same order (so the same numbers), but each
    `(B, H, Lq, Lk)` pass is written into one grid instead of four new ones.
    """
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    logits = (q @ k.transpose(-2, -1)).mul_(scale)  # (B, H, Lq, Lk)
    if mask is not None:
        live = mask.any(dim=-1, keepdim=True)  # (B|1, 1, Lq, 1)
        logits.masked_fill_(~mask, -torch.inf).masked_fill_(~live, 0.0)
    weights = torch.softmax(logits, dim=-1, out=logits)
    if mask is not None:
        weights.mul_(live)
    attended = weights if after_weights is None else after_weights(weights)
    return attended @ v, weights


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """`(x1, x2) → (−x2, x1)` over the two halves of the last axis: each pair (i, i + D/2) turned by 90°."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rotary(
    length: int, width: int, base: float, like: torch.Tensor, start: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """`cos`, `sin` of the rotary angles of positions `start … start + length − 1`, each
    `(length, width)`, in `like`'s dtype and device.

    Position p turns pair (i, i + width/2) by p · base^(−2i/width); both halves
    of a row hold the same angles (transformers' `LlamaRotaryEmbedding`).
    """
    inv_freq = 1.0 / base ** (torch.arange(0, width, 2, dtype=like.dtype, device=like.device) / width)
    position = torch.arange(start, start + length, dtype=like.dtype, device=like.device)  # (length,)
    angle = position[:, None] * inv_freq  # (length, width/2)
    angle = torch.cat((angle, angle), dim=-1)  # (length, width)
    return angle.cos(), angle.sin()


def rms_norm(x: torch.Tensor, gamma: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last axis (Zhang & Sennrich, 2019): x / √(mean(x²) + eps) · gamma."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gamma


def position_mask(
    mask: torch.Tensor | None, Lq: int, Lk: int, start: int, first: int, *, causal: bool, window: int | None
) -> torch.Tensor | None:
    """`mask` (None: every key) narrowed by position: queries at `start …`, keys at `first …`;
    `causal`: query i sees key j ≤ i; a `window`: only i − window < j ≤ i (Mistral). `(B|1, 1, Lq, Lk)`."""
    if not causal and window is None:
        return mask
    offset = (start - first) + torch.arange(Lq)[:, None] - torch.arange(Lk)  # (Lq, Lk): i − j
    near = offset >= 0 if window is None else (offset >= 0) & (offset < window)
    return near[None, None] if mask is None else mask & near


def head_mask(mask: torch.Tensor | None, B: int, Lq: int, Lk: int) -> torch.Tensor | None:
    """A bool mask `(Lq, Lk)` (every batch item) or `(B, Lq, Lk)` → `(B|1, 1, Lq, Lk)`, the same for every head."""
    if mask is None:
        return None
    shape = tuple(mask.shape)
    if mask.dtype != torch.bool or shape not in ((Lq, Lk), (B, Lq, Lk)):
        raise SpecError(
            "mask",
            f"<{mask.dtype} tensor of shape {shape}>",
            f"a bool tensor of shape ({Lq}, {Lk}) or ({B}, {Lq}, {Lk}), True = may attend",
            value_text=f"a {mask.dtype} tensor of shape {shape}",
        )
    return mask[None, None] if mask.dim() == 2 else mask[:, None]


def joined(
    past: LayerKV | None, k: torch.Tensor | None, v: torch.Tensor | None, start: int
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """The keys and values a call attends over: `past`'s cached ones, then the new `k (B, Hkv, n, Dk)`,
    `v (B, Hkv, n, Dv)` (kept in `past`), and the position of key 0 (the cached keys end just before
    `start`). `k` None: the cached ones alone."""
    if past is None or past.k is None:
        if past is not None:
            past.keep(k, v)
        return k, v, start
    if k is None:
        return past.k, past.v, start - past.length
    first = start - past.length
    B = k.shape[0]
    k = torch.cat([past.k.expand(B, -1, -1, -1), k], dim=2)  # (B, Hkv, Lp + n, Dk)
    v = torch.cat([past.v.expand(B, -1, -1, -1), v], dim=2)  # (B, Hkv, Lp + n, Dv)
    past.keep(k, v)
    return k, v, first


class MultiHeadAttention(nn.Module):
    """Multi-head attention with sublayers `query`, `key`, `value`, `output_proj`
    (and `norm` for residual + LayerNorm), named as in the TensorFlow twin.

    `n_kv_heads` (None: `n_heads`) K/V heads, each serving `n_heads / n_kv_heads`
    query heads; `rope_base` (None: off) turns q and k by position; `window`
    (None: off) lets query i see only keys i − window < j ≤ i. All three enter
    in `after_split_heads` and `forward`'s mask, the rest is the 2017 layer.
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
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
    ):
        super().__init__()
        n_kv_heads, rope_base, window = check_variants(n_heads, d_k, n_kv_heads, rope_base, window)
        self.n_heads, self.n_kv_heads, self.d_k, self.d_v = n_heads, n_kv_heads, d_k, d_v
        self.rope_base, self.window = rope_base, window
        self.dropout, self.scale = dropout, scale
        kw = {"bias": bias, "dtype": dtype, "device": device}
        d_kv_in = d_model if d_kv_in is None else d_kv_in
        self.query = nn.Linear(d_model, n_heads * d_k, **kw)
        self.key = nn.Linear(d_kv_in, n_kv_heads * d_k, **kw)
        self.value = nn.Linear(d_kv_in, n_kv_heads * d_v, **kw)
        self.output_proj = nn.Linear(n_heads * d_v, d_model, **kw)
        self.norm = nn.LayerNorm(d_model, eps=1e-6, dtype=dtype, device=device) if residual_norm else None
        self.qk_norm_eps = qk_norm_eps
        qk = lambda: nn.Parameter(torch.ones(d_k, dtype=dtype, device=device))  # noqa: E731
        self.q_norm, self.k_norm = (qk(), qk()) if qk_norm_eps is not None else (None, None)

    @classmethod
    def from_spec(cls, spec, device: str | torch.device = "cpu") -> MultiHeadAttention:
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
            dtype=getattr(torch, spec.dtype),
            device=device,
        )

    @torch.no_grad()
    def load_params(self, params: dict[str, np.ndarray]) -> MultiHeadAttention:
        """Copy attnviz's `x @ W` arrays into the `nn.Linear` (out, in) layout."""
        for key, layer in (("q", self.query), ("k", self.key), ("v", self.value), ("o", self.output_proj)):
            layer.weight.copy_(torch.from_numpy(params[f"W_{key}"]).T)
            if layer.bias is not None:
                layer.bias.copy_(torch.from_numpy(params[f"b_{key}"]))
        if self.norm is not None:
            self.norm.weight.copy_(torch.from_numpy(params["ln_gamma"]))
            self.norm.bias.copy_(torch.from_numpy(params["ln_beta"]))
        if self.qk_norm_eps is not None:
            self.q_norm.copy_(torch.from_numpy(params["q_norm"]))
            self.k_norm.copy_(torch.from_numpy(params["k_norm"]))
        return self

    def forward(
        self,
        x_q: torch.Tensor,
        x_kv: torch.Tensor | None,
        mask: torch.Tensor | None = None,
        *,
        past: LayerKV | None = None,
        start: int = 0,
        causal: bool = False,
        generator: torch.Generator | None = None,
        record: Recorder = _SKIP,
        after_weights: Callable | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend from `x_q (B, Lq, D)` over `x_kv (B, Lk, Dkv)` and whatever `past` holds.

        Args:
            x_kv: None with a `past`: the keys and values already cached alone (cross-attention's
                memory, computed once).
            mask: bool `(Lq, Lk)` or `(B, Lq, Lk)` over every key (cached, then new), True = may
                attend; shared by all heads.
            past: a `LayerKV` read before `x_kv`'s keys and values and extended with them (the KV
                cache); None: nothing cached.
            start: the position of the first query and of `x_kv`'s first key (RoPE and the
                window read it); cached keys sit just before it.
            causal: query i sees keys at positions ≤ i only.
            after_weights: fills the `after_weights` hook for this call only (a layer shared by
                every session runs one edited pass); None: the method.

        Returns:
            `output (B, Lq, D)` and `weights (B, H, Lq, Lk)`.
        """
        B, Lq, _ = x_q.shape
        H, Hkv, Dk, Dv = self.n_heads, self.n_kv_heads, self.d_k, self.d_v
        q = self.query(x_q)  # (B, Lq, H*Dk)
        record("q_proj", q)
        k = v = None
        if x_kv is not None:
            k = self.key(x_kv)  # (B, Lk, Hkv*Dk)
            record("k_proj", k)
            v = self.value(x_kv)  # (B, Lk, Hkv*Dv)
            record("v_proj", v)
        q = q.view(B, Lq, H, Dk).transpose(1, 2)  # (B, H, Lq, Dk)
        record("q_heads", q)
        if x_kv is not None:
            k = k.view(B, -1, Hkv, Dk).transpose(1, 2)  # (B, Hkv, Lk, Dk)
            record("k_heads", k)
            v = v.view(B, -1, Hkv, Dv).transpose(1, 2)  # (B, Hkv, Lk, Dv)
            record("v_heads", v)
        q, k, v = self.after_split_heads(q, k, v, start=start, record=record)
        k, v, first = joined(past, k, v, start)  # (B|1, Hkv, Lk, Dk|Dv), Lk = cached + new
        Lk = k.shape[2]
        mask = head_mask(mask, B, Lq, Lk)  # (B|1, 1, Lq, Lk)
        mask = position_mask(mask, Lq, Lk, start, first, causal=causal, window=self.window)
        k, v = self.grouped(k, v, record=record)  # (B|1, H, Lk, Dk|Dv)
        after_weights = self.after_weights if after_weights is None else after_weights
        if record.enabled or torch.is_grad_enabled() or (self.training and self.dropout > 0):
            context, weights = scaled_dot_product_attention(
                q,
                k,
                v,
                mask,
                scale=self.scale,
                dropout=self.dropout,
                training=self.training,
                generator=generator,
                record=record,
                after_weights=after_weights,
            )
        else:  # nothing to show or differentiate: the same math, one grid instead of four
            context, weights = attention_in_place(q, k, v, mask, self.scale, after_weights)
            record("context", context)  # a tap that keeps only the context (ablation) still gets it
        merged = context.transpose(1, 2).reshape(B, Lq, H * Dv)  # (B, Lq, H*Dv)
        record("merged", merged)
        out = self.output_proj(merged)  # (B, Lq, D)
        record("output_proj", out)
        if self.norm is not None:
            out = self.norm(x_q + out)
            record("residual_norm", out)
        return out, weights

    def after_split_heads(
        self,
        q: torch.Tensor,
        k: torch.Tensor | None,
        v: torch.Tensor | None,
        *,
        start: int = 0,
        record: Recorder = _SKIP,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """The override point between splitting heads and the scores, as Keras's
        `MultiHeadAttention._compute_attention` is the place to change its attention.

        Here QK-norm scales each head's q and k to RMS 1 (`qk_norm_eps`) and rotary positions
        turn q and k (`rope_base`), each at its own position from `start`. A subclass adds another
        position encoding or a change to q, k or v by overriding this method, not by forking
        `forward`; record each new tensor under a `STEP_DOCS` name. Only the new keys pass here:
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
            cos, sin = rotary(q.shape[2], Dk, self.rope_base, q, start)  # (Lq, Dk): position · base^(−2i/Dk)
            q = q * cos + rotate_half(q) * sin  # (B, H, Lq, Dk): pair (i, i + Dk/2) turned
            record("q_rope", q)
            if k is not None:
                cos, sin = rotary(k.shape[2], Dk, self.rope_base, k, start)  # (Lk, Dk)
                k = k * cos + rotate_half(k) * sin  # (B, Hkv, Lk, Dk)
                record("k_rope", k)
        return q, k, v

    def grouped(
        self, k: torch.Tensor, v: torch.Tensor, *, record: Recorder = _SKIP
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Each K/V head repeated for the query heads it serves (`n_kv_heads`):
        `k (B, Hkv, Lk, Dk)`, `v (B, Hkv, Lk, Dv)` → `(B, H, Lk, Dk|Dv)`."""
        H, Hkv = self.n_heads, self.n_kv_heads
        if Hkv != H:
            k = k.repeat_interleave(H // Hkv, dim=1)  # (B, H, Lk, Dk): head g serves g·r … g·r+r−1
            record("k_repeated", k)
            v = v.repeat_interleave(H // Hkv, dim=1)  # (B, H, Lk, Dv)
            record("v_repeated", v)
        return k, v

    def after_weights(self, weights):
        """The override point between the weights and the values: returns the weights that multiply V.

        `weights (B, H, Lq, Lk)`, after the softmax (before dropout). Unchanged here; a
        subclass reweights, ablates or patches attention by overriding it. The weights
        the layer returns are the softmax's, before this hook.
        """
        return weights
