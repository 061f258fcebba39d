"""A Llama-family decoder in PyTorch whose attention is attnviz's `MultiHeadAttention`.

Follows Touvron et al., 2023 ("LLaMA: Open and Efficient Foundation Language Models") as
transformers' `modeling_llama.py` implements it: token embeddings (no position embeddings —
RoPE turns q and k inside the attention), then per layer `x + attn(rms_norm(x))` with grouped
K/V heads and no biases, `x + mlp(rms_norm(x))` with the SwiGLU MLP
`down(silu(gate(x)) · up(x))`, a final RMSNorm, and logits through the (tied or own) unembedding.
Weights are `(out, in)`: `x @ Wᵀ`. Shapes: T tokens, D hidden size, H query heads, Hkv K/V
heads, Dh head width, I MLP width, L layers, V vocabulary. Mirrors `tf_backend.llama` name for name.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from attnviz.backends.common import Forward, Replacement, Trace
from attnviz.backends.torch_backend.attention import MultiHeadAttention, recorded_code, to_numpy
from attnviz.backends.torch_backend.blocks import attend, causal_mask
from attnviz.result import Recorder


def rms_norm(x: torch.Tensor, gamma: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last axis (Zhang & Sennrich, 2019): x / √(mean(x²) + eps) · gamma."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gamma


class LlamaDecoder:
    """Embeddings, then per layer: RMSNorm, attnviz causal attention (RoPE, GQA), residual;
    RMSNorm, SwiGLU MLP, residual; a final RMSNorm and the unembedding."""

    def __init__(self, checkpoint):
        cfg = self.cfg = checkpoint.config
        self.w = {k: torch.from_numpy(v) for k, v in checkpoint.weights.items()}
        self.attention = [
            MultiHeadAttention(
                cfg.hidden_size,
                cfg.num_attention_heads,
                cfg.head_dim,
                cfg.head_dim,
                n_kv_heads=cfg.num_key_value_heads,
                rope_base=cfg.rope_theta,
                bias=False,
                scale=cfg.attention_scale(i),
            )
            .load_params(checkpoint.layer_params(i))
            .eval()
            for i in range(cfg.num_hidden_layers)
        ]
        self.unembed = self.w[
            "embed_tokens.weight" if cfg.tie_word_embeddings else "lm_head.weight"
        ]  # (V, D)

    def _norm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return rms_norm(x, self.w[f"{name}.weight"], self.cfg.rms_norm_eps)

    def _linear(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return F.linear(x, self.w[f"{name}.weight"])  # x @ Wᵀ, no bias

    def _mlp(self, x: torch.Tensor, p: str) -> torch.Tensor:
        """SwiGLU: `down(silu(gate(x)) · up(x))`, `(1, T, D) → (1, T, I) → (1, T, D)`."""
        return self._linear(
            F.silu(self._linear(x, p + "gate_proj")) * self._linear(x, p + "up_proj"), p + "down_proj"
        )

    @torch.inference_mode()
    def lens(self, hidden: np.ndarray) -> np.ndarray:
        """The final RMSNorm and the unembedding on any residual stream `(…, T, D)` → `(…, T, V)`."""
        return (self._norm(torch.from_numpy(hidden), "norm") @ self.unembed.T).numpy()

    @torch.inference_mode()
    def __call__(
        self,
        input_ids: list[int],
        token_type_ids: list[int] | None = None,
        *,
        replace: dict[int, dict[int, Replacement]] | None = None,
        capture_layer: int | None = None,
        head_outputs: bool = False,
    ) -> Forward:
        """One forward pass over `input_ids`; see `attnviz.backends.common` for what it returns
        (`last_hidden_state (T, D)` is after the final RMSNorm)."""
        ids = torch.tensor(input_ids)
        x = self.w["embed_tokens.weight"][ids][None]  # (1, T, D): positions enter as RoPE, in attention
        causal = causal_mask(len(input_ids))  # (1, T, T): key j ≤ query i
        keep = Recorder(True, to_numpy, recorded_code())
        trace = Trace(head_outputs)
        for i, attention in enumerate(self.attention):
            p = f"layers.{i}."
            record = keep if i == capture_layer else None
            a, weights, context = attend(
                attention, self._norm(x, p + "input_layernorm"), causal, (replace or {}).get(i, {}), record
            )  # (1, T, D), (1, H, T, T), (1, H, T, Dh)
            trace.block(x, weights, context)
            x = x + a  # (1, T, D)
            x = x + self._mlp(self._norm(x, p + "post_attention_layernorm"), p + "mlp.")
        final = self._norm(x, "norm")[0]  # (T, D)
        logits = final @ self.unembed.T  # (T, V)
        return trace.finish(x, logits, keep.steps, final)
