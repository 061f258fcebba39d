"""PyTorch attention, written the textbook way so every step can be shown.

Follows "Attention Is All You Need" (Vaswani et al., 2017), §3.2.
Shapes: B batch, H heads, Lq/Lk query/key lengths, Dk/Dv head widths,
D d_model, Dkv key/value input width.

Implements `attnviz.backends.Backend`. Importing this module changes no
process-wide setting; `configure()` (called where a run starts) turns TF32
off so float32 results are exact.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch
from torch import nn

from attnviz.errors import SpecError
from attnviz.result import Recorder

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
        dropout). Rows with no allowed key get zero weights, zero context
        and zero gradients. Differentiable; without autograd the
        `(B, H, Lq, Lk)` passes are written in place (one grid, not four).
    """
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    in_place = not (torch.is_grad_enabled() and (q.requires_grad or k.requires_grad))
    scores = q @ k.transpose(-2, -1)  # (B, H, Lq, Lk)
    record("scores", scores)
    logits = scores.mul_(scale) if in_place else scores * scale
    record("scaled", logits)
    if mask is not None:
        logits = logits.masked_fill_(~mask, -torch.inf) if in_place else logits.masked_fill(~mask, -torch.inf)
        record("masked", logits)
        live = mask.any(dim=-1, keepdim=True)  # (B|1, 1, Lq, 1): rows with an allowed key
        logits = logits.masked_fill_(~live, 0.0) if in_place else logits.masked_fill(~live, 0.0)
    weights = torch.softmax(logits, dim=-1, out=logits) if in_place else torch.softmax(logits, dim=-1)
    if mask is not None:
        weights = weights.mul_(live) if in_place else weights * live  # a row with no allowed key: 0
    record("softmax", weights)
    attended = weights
    if training and dropout > 0:
        keep = torch.rand(weights.shape, generator=generator, device=weights.device) >= dropout
        attended = weights * keep / (1.0 - dropout)
        record("dropout", attended)
    context = attended @ v  # (B, H, Lq, Dv)
    record("context", context)
    return context, weights


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
            layer.weight.copy_(torch.from_numpy(params[f"W_{key}"]).T)
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
            mask: bool `(Lq, Lk)` or `(B, Lq, Lk)`, True = may attend; shared by all heads.

        Returns:
            `output (B, Lq, D)` and `weights (B, H, Lq, Lk)`.
        """
        B, Lq, _ = x_q.shape
        Lk = x_kv.shape[1]
        H, Dk, Dv = self.n_heads, self.d_k, self.d_v
        mask = head_mask(mask, B, Lq, Lk)  # (B|1, 1, Lq, Lk)
        q = self.query(x_q)  # (B, Lq, H*Dk)
        record("q_proj", q)
        k = self.key(x_kv)  # (B, Lk, H*Dk)
        record("k_proj", k)
        v = self.value(x_kv)  # (B, Lk, H*Dv)
        record("v_proj", v)
        q = q.view(B, Lq, H, Dk).transpose(1, 2)  # (B, H, Lq, Dk)
        record("q_heads", q)
        k = k.view(B, Lk, H, Dk).transpose(1, 2)  # (B, H, Lk, Dk)
        record("k_heads", k)
        v = v.view(B, Lk, H, Dv).transpose(1, 2)  # (B, H, Lk, Dv)
        record("v_heads", v)
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
        )
        merged = context.transpose(1, 2).reshape(B, Lq, H * Dv)  # (B, Lq, H*Dv)
        record("merged", merged)
        out = self.output_proj(merged)  # (B, Lq, D)
        record("output_proj", out)
        if self.norm is not None:
            out = self.norm(x_q + out)
            record("residual_norm", out)
        return out, weights


# -- the Backend protocol (attnviz.backends.Backend) ------------------------------------------


def version() -> str:
    return torch.__version__


def configure() -> None:
    torch.backends.cuda.matmul.allow_tf32 = False  # full float32 for the proofs
    torch.backends.cudnn.allow_tf32 = False


def gpu_available() -> bool:
    return torch.cuda.is_available()


def resolve_device(device: str) -> torch.device:
    """'cpu' | 'gpu' | 'auto' → a torch device; 'gpu' without CUDA is an error."""
    has_gpu = torch.cuda.is_available()
    if device == "gpu" and not has_gpu:
        raise SpecError(
            "device",
            device,
            "'cpu' or 'auto' here: PyTorch sees no CUDA GPU "
            f"(torch {torch.__version__}, torch.cuda.is_available() is False)",
        )
    return torch.device("cuda" if device != "cpu" and has_gpu else "cpu")


def device_kind(dev: torch.device) -> str:
    return "gpu" if dev.type == "cuda" else "cpu"


def device_name(dev: torch.device) -> str:
    return f"{dev} ({torch.cuda.get_device_name(dev)})" if dev.type == "cuda" else "cpu"


def to_tensor(array: np.ndarray, dev: torch.device) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array)).to(dev)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b


def set_threads(threads: int) -> None:
    torch.set_num_threads(threads)


def get_threads() -> int:
    return torch.get_num_threads()


def inference() -> contextlib.AbstractContextManager:
    return torch.inference_mode()


def build_layer(spec, dev: torch.device) -> MultiHeadAttention:
    return MultiHeadAttention.from_spec(spec, dev)


def forward(layer: MultiHeadAttention, x_q, x_kv, mask, *, spec, record: Recorder):
    layer.train(spec.training)
    generator = None
    if spec.training and spec.dropout > 0:
        generator = torch.Generator(device=x_q.device).manual_seed(spec.seed)
    return layer(x_q, x_kv, mask, generator=generator, record=record)
