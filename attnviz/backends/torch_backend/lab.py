"""A Training-lab model in PyTorch, for the Pretrained page: the lab's architecture (see
`attnviz.pretrained.lab`) with attnviz's `MultiHeadAttention`, ablation, patching and step capture.

Same math as `train.Model.forward` (which trains it): token + position embeddings, then per
layer `LN(x + attn(x))` and, with an MLP, `LN(x + W_out·relu(W_in·x))`; logits `x @ W + b`.
Shapes: T tokens, D d_model, H heads, L layers, V vocab. Mirrors `tf_backend.lab` name for name;
the call follows `attnviz.backends.common`.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from attnviz.backends.common import Forward, Replacement, Trace
from attnviz.backends.torch_backend.attention import MultiHeadAttention, recorded_code, to_numpy
from attnviz.backends.torch_backend.blocks import attend, causal_mask, layer_norm
from attnviz.result import Recorder


class LabModel:
    """Embeddings, then per layer: attnviz attention, Add & Norm, (ReLU MLP, Add & Norm); unembedding."""

    def __init__(self, checkpoint):
        cfg = self.cfg = checkpoint.config
        train = cfg.train
        self.w = {k: torch.from_numpy(v) for k, v in checkpoint.weights.items()}
        self.attention = [
            MultiHeadAttention(train.d_model, train.n_heads, *train.head_dims)
            .load_params(checkpoint.layer_params(i))
            .eval()
            for i in range(train.n_layers)
        ]

    def _norm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return layer_norm(x, self.w[f"{name}.gamma"], self.w[f"{name}.beta"], self.cfg.layer_norm_eps)

    @torch.inference_mode()
    def lens(self, hidden: np.ndarray) -> np.ndarray:
        """`hidden (N, T, D)` → `logits (N, T, V)`: the unembedding (the lab has no final norm)."""
        return (torch.from_numpy(hidden) @ self.w["unembed.W"] + self.w["unembed.b"]).numpy()

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
        """`last_hidden_state` is the last block's output; `logits (T, V)`."""
        ids, T = torch.tensor(input_ids), len(input_ids)
        x = (self.w["embed.token"][ids] + self.w["embed.position"][:T])[None]  # (1, T, D)
        mask = causal_mask(T) if self.cfg.train.causal else None  # (1, T, T)
        keep, trace = Recorder(True, to_numpy, recorded_code()), Trace(head_outputs)
        for i, attention in enumerate(self.attention):
            p = f"layers.{i}."
            record = keep if i == capture_layer else None
            a, weights, context = attend(attention, x, mask, (replace or {}).get(i, {}), record)
            trace.block(x, weights, context)
            x = self._norm(x + a, p + "ln1")  # (1, T, D)
            if self.cfg.train.mlp:
                h = F.relu(x @ self.w[p + "mlp.W_in"] + self.w[p + "mlp.b_in"])  # (1, T, 4D)
                x = self._norm(x + h @ self.w[p + "mlp.W_out"] + self.w[p + "mlp.b_out"], p + "ln2")
        logits = x[0] @ self.w["unembed.W"] + self.w["unembed.b"]  # (T, V)
        return trace.finish(x, logits, keep.steps)
