"""A BERT-style encoder in PyTorch whose self-attention is attnviz's `MultiHeadAttention`.

Shapes: T tokens, D hidden size. Mirrors `tf_bert` name for name.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from attnviz.backends.torch_backend import MultiHeadAttention

ACTIVATIONS = {
    "gelu": F.gelu,
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
}


class BertEncoder:
    """Embeddings, then per layer: attnviz attention, Add & Norm, feed-forward, Add & Norm."""

    def __init__(self, checkpoint):
        cfg, w = checkpoint.config, checkpoint.weights
        self.cfg = cfg
        self.w = {k: torch.from_numpy(v) for k, v in w.items()}
        d_head = cfg.hidden_size // cfg.num_attention_heads
        self.attention = [
            MultiHeadAttention(cfg.hidden_size, cfg.num_attention_heads, d_head, d_head)
            .load_params(checkpoint.layer_params(i))
            .eval()
            for i in range(cfg.num_hidden_layers)
        ]
        self.act = ACTIVATIONS[cfg.hidden_act]

    def _norm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return F.layer_norm(
            x,
            (self.cfg.hidden_size,),
            self.w[f"{name}.weight"],
            self.w[f"{name}.bias"],
            self.cfg.layer_norm_eps,
        )

    def _dense(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return F.linear(x, self.w[f"{name}.weight"], self.w[f"{name}.bias"])

    @torch.inference_mode()
    def __call__(self, input_ids: list[int], token_type_ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Returns `last_hidden_state (T, D)` and `attentions (layers, heads, T, T)`."""
        ids, types = torch.tensor(input_ids), torch.tensor(token_type_ids)
        e = "embeddings."
        x = (
            self.w[e + "word_embeddings.weight"][ids]
            + self.w[e + "position_embeddings.weight"][: len(input_ids)]
            + self.w[e + "token_type_embeddings.weight"][types]
        )  # (T, D)
        x = self._norm(x, e + "LayerNorm")[None]  # (1, T, D)
        attentions = []
        for i, attention in enumerate(self.attention):
            p = f"encoder.layer.{i}."
            a, weights = attention(x, x)  # (1, T, D), (1, H, T, T)
            x = self._norm(x + a, p + "attention.output.LayerNorm")
            h = self.act(self._dense(x, p + "intermediate.dense"))  # (1, T, 4D)
            x = self._norm(x + self._dense(h, p + "output.dense"), p + "output.LayerNorm")
            attentions.append(weights[0])
        return x[0].numpy(), torch.stack(attentions).numpy()
