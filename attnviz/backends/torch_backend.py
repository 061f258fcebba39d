"""PyTorch attention, written the textbook way so every step can be shown.

Follows "Attention Is All You Need" (Vaswani et al., 2017), §3.2.
Shapes: B batch, H heads, Lq/Lk query/key lengths, Dk/Dv head widths,
D d_model, Dkv key/value input width.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from torch import nn

from attnviz.result import Recorder

torch.backends.cuda.matmul.allow_tf32 = False  # full float32 for the proofs
torch.backends.cudnn.allow_tf32 = False

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
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q·kᵀ·scale) · v.

    Args:
        q: `(B, H, Lq, Dk)`; k: `(B, H, Lk, Dk)`; v: `(B, H, Lk, Dv)`.
        mask: bool, broadcastable to `(B, H, Lq, Lk)`, True = may attend.
        scale: None → `1 / sqrt(Dk)`.
        dropout: rate applied to the weights when `training`.
        generator: seeds the dropout draw.
        record: receives each intermediate.

    Returns:
        `context (B, H, Lq, Dv)` and `weights (B, H, Lq, Lk)` (before
        dropout). Rows with no allowed key get zero weights and context.
    """
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = q @ k.transpose(-2, -1)  # (B, H, Lq, Lk)
    record("scores", scores, "scores = q @ k.transpose(-2, -1)")
    # In place from here on: each (B, H, Lq, Lk) pass writes over the scores
    # instead of allocating a new grid (the recorder has copied what it shows).
    logits = scores.mul_(scale)
    record("scaled", logits, "logits = scores.mul_(scale)")
    if mask is not None:
        logits.masked_fill_(~mask, float("-inf"))
        record("masked", logits, "logits.masked_fill_(~mask, float('-inf'))")
    weights = torch.softmax(logits, dim=-1, out=logits)
    if mask is not None:
        weights.nan_to_num_(0.0)  # a row with no allowed key: 0/0 → 0
    record("softmax", weights, "weights = torch.softmax(logits, dim=-1, out=logits)")
    attended = weights
    if training and dropout > 0:
        keep = torch.rand(weights.shape, generator=generator, device=weights.device) >= dropout
        attended = weights * keep / (1.0 - dropout)
        record("dropout", attended, "attended = weights * keep / (1.0 - dropout)")
    context = attended @ v  # (B, H, Lq, Dv)
    record("context", context, "context = attended @ v")
    return context, weights


class MultiHeadAttention(nn.Module):
    """Multi-head attention with sublayers `query`, `key`, `value`, `output_proj`
    (and `norm` for residual + LayerNorm), named as in the TensorFlow twin."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_k: int,
        d_v: int,
        *,
        d_kv_in: int | None = None,
        bias: bool = True,
        dropout: float = 0.0,
        scale: float | None = None,
        residual_norm: bool = False,
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
    ):
        super().__init__()
        self.n_heads, self.d_k, self.d_v = n_heads, d_k, d_v
        self.dropout, self.scale = dropout, scale
        kw = {"bias": bias, "dtype": dtype, "device": device}
        d_kv_in = d_model if d_kv_in is None else d_kv_in
        self.query = nn.Linear(d_model, n_heads * d_k, **kw)
        self.key = nn.Linear(d_kv_in, n_heads * d_k, **kw)
        self.value = nn.Linear(d_kv_in, n_heads * d_v, **kw)
        self.output_proj = nn.Linear(n_heads * d_v, d_model, **kw)
        self.norm = nn.LayerNorm(d_model, eps=1e-6, dtype=dtype, device=device) if residual_norm else None

    @classmethod
    def from_spec(cls, spec, device: str | torch.device = "cpu") -> MultiHeadAttention:
        return cls(
            spec.d_model,
            spec.n_heads,
            spec.d_k,
            spec.d_v,
            d_kv_in=spec.d_kv_in,
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
            layer.weight.copy_(torch.from_numpy(params[f"W_{key}"].T))
            if layer.bias is not None:
                layer.bias.copy_(torch.from_numpy(params[f"b_{key}"]))
        if self.norm is not None:
            self.norm.weight.copy_(torch.from_numpy(params["ln_gamma"]))
            self.norm.bias.copy_(torch.from_numpy(params["ln_beta"]))
        return self

    def forward(
        self,
        x_q: torch.Tensor,
        x_kv: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        generator: torch.Generator | None = None,
        record: Recorder = _SKIP,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend from `x_q (B, Lq, D)` over `x_kv (B, Lk, Dkv)`.

        Args:
            mask: bool `(B, Lq, Lk)`, True = may attend; shared by all heads.

        Returns:
            `output (B, Lq, D)` and `weights (B, H, Lq, Lk)`.
        """
        B, Lq, _ = x_q.shape
        Lk = x_kv.shape[1]
        H, Dk, Dv = self.n_heads, self.d_k, self.d_v
        q = self.query(x_q)  # (B, Lq, H*Dk)
        record("q_proj", q, "q = self.query(x_q)")
        k = self.key(x_kv)  # (B, Lk, H*Dk)
        record("k_proj", k, "k = self.key(x_kv)")
        v = self.value(x_kv)  # (B, Lk, H*Dv)
        record("v_proj", v, "v = self.value(x_kv)")
        q = q.view(B, Lq, H, Dk).transpose(1, 2)  # (B, H, Lq, Dk)
        record("q_heads", q, "q = q.view(B, Lq, H, Dk).transpose(1, 2)")
        k = k.view(B, Lk, H, Dk).transpose(1, 2)  # (B, H, Lk, Dk)
        record("k_heads", k, "k = k.view(B, Lk, H, Dk).transpose(1, 2)")
        v = v.view(B, Lk, H, Dv).transpose(1, 2)  # (B, H, Lk, Dv)
        record("v_heads", v, "v = v.view(B, Lk, H, Dv).transpose(1, 2)")
        context, weights = scaled_dot_product_attention(
            q,
            k,
            v,
            None if mask is None else mask[:, None],  # (B, 1, Lq, Lk): same for every head
            scale=self.scale,
            dropout=self.dropout,
            training=self.training,
            generator=generator,
            record=record,
        )
        merged = context.transpose(1, 2).reshape(B, Lq, H * Dv)  # (B, Lq, H*Dv)
        record("merged", merged, "merged = context.transpose(1, 2).reshape(B, Lq, H * Dv)")
        out = self.output_proj(merged)  # (B, Lq, D)
        record("output_proj", out, "out = self.output_proj(merged)")
        if self.norm is not None:
            out = self.norm(x_q + out)
            record("residual_norm", out, "out = self.norm(x_q + out)")
        return out, weights


def resolve_device(device: str) -> torch.device:
    """'cpu' | 'gpu' | 'auto' → a torch device; 'gpu' without CUDA is an error."""
    has_gpu = torch.cuda.is_available()
    if device == "gpu" and not has_gpu:
        raise ValueError(
            "device: got 'gpu', but PyTorch sees no CUDA GPU "
            f"(torch {torch.__version__}, torch.cuda.is_available() is False); "
            "allowed here: 'cpu' or 'auto'."
        )
    return torch.device("cuda" if device != "cpu" and has_gpu else "cpu")


def gpu_available() -> bool:
    return torch.cuda.is_available()


def _to_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def run(spec, params, x_q, x_kv, mask, *, device: str, capture: bool) -> dict:
    """One forward pass of `spec`; numpy in, numpy out (see `run_attention`)."""
    dev = resolve_device(device)
    layer = MultiHeadAttention.from_spec(spec, dev).load_params(params).train(spec.training)
    to_dev = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(dev)  # noqa: E731
    tq, tkv = to_dev(x_q), (None if x_kv is x_q else to_dev(x_kv))
    tmask = None if mask is None else to_dev(mask)
    generator = torch.Generator(device=dev).manual_seed(spec.seed)
    record = Recorder(capture, _to_numpy)
    start = time.perf_counter()
    with torch.no_grad():
        out, weights = layer(tq, tq if tkv is None else tkv, tmask, generator=generator, record=record)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    elapsed = time.perf_counter() - start
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    return {
        "output": _to_numpy(out),
        "weights": _to_numpy(weights),
        "steps": record.steps,
        "device": "gpu" if dev.type == "cuda" else "cpu",
        "device_name": f"{dev} ({name})" if dev.type == "cuda" else "cpu",
        "elapsed_s": elapsed,
    }
