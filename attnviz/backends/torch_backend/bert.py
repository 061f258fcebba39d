"""A BERT-style encoder in PyTorch whose self-attention is attnviz's `MultiHeadAttention`.

Devlin et al., 2019, as Hugging Face's `modeling_bert.py` implements it (post-LayerNorm blocks).
Shapes: T tokens, D hidden size, H heads, Dh head width, L layers. Mirrors `tf_backend.bert`
name for name; the call follows `attnviz.backends.common`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnviz.backends.common import Forward, Replacement, Trace
from attnviz.backends.torch_backend.attention import MultiHeadAttention
from attnviz.backends.torch_backend.blocks import ACTIVATIONS, attend, layer_norm
from attnviz.backends.torch_backend.device import recorded_code, to_numpy
from attnviz.result import Recorder


class BertEncoder:
    """Embeddings, then per layer: attnviz attention, Add & Norm, feed-forward, Add & Norm."""

    def __init__(self, checkpoint):
        cfg = self.cfg = checkpoint.config
        self.w = {k: torch.from_numpy(v) for k, v in checkpoint.weights.items()}
        self.attention = [
            MultiHeadAttention(cfg.hidden_size, cfg.num_attention_heads, cfg.head_dim, cfg.head_dim)
            .load_params(checkpoint.layer_params(i))
            .eval()
            for i in range(cfg.num_hidden_layers)
        ]
        self.act = ACTIVATIONS[cfg.hidden_act]

    def _norm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return layer_norm(x, self.w[f"{name}.weight"], self.w[f"{name}.bias"], self.cfg.layer_norm_eps)

    def _dense(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return F.linear(x, self.w[f"{name}.weight"], self.w[f"{name}.bias"])

    @torch.inference_mode()
    def __call__(
        self,
        input_ids: list[int],
        token_type_ids: list[int],
        *,
        replace: dict[int, dict[int, Replacement]] | None = None,
        capture_layer: int | None = None,
        head_outputs: bool = False,
    ) -> Forward:
        """No logits; `last_hidden_state` is the last block's output."""
        ids, types = torch.tensor(input_ids), torch.tensor(token_type_ids)
        e = "embeddings."
        x = (
            self.w[e + "word_embeddings.weight"][ids]
            + self.w[e + "position_embeddings.weight"][: len(input_ids)]
            + self.w[e + "token_type_embeddings.weight"][types]
        )  # (T, D)
        x = self._norm(x, e + "LayerNorm")[None]  # (1, T, D)
        keep, trace = Recorder(True, to_numpy, recorded_code()), Trace(head_outputs)
        for i, attention in enumerate(self.attention):
            p = f"encoder.layer.{i}."
            record = keep if i == capture_layer else None
            a, weights, context = attend(attention, x, None, (replace or {}).get(i, {}), record)
            trace.block(x, weights, context)
            x = self._norm(x + a, p + "attention.output.LayerNorm")  # (1, T, D)
            h = self.act(self._dense(x, p + "intermediate.dense"))  # (1, T, 4D)
            x = self._norm(x + self._dense(h, p + "output.dense"), p + "output.LayerNorm")
        return trace.finish(x, None, keep.steps)
