"""A BERT-style encoder in PyTorch whose self-attention is attnviz's `MultiHeadAttention`.

Shapes: T tokens, D hidden size, H heads, Dh head width, L layers. Mirrors
`tf_backend.bert` name for name; `attend` (attention with head ablation and step
capture) serves the GPT-2 decoder too.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from attnviz.backends.torch_backend.attention import MultiHeadAttention
from attnviz.code import step_code
from attnviz.result import Recorder

ACTIVATIONS = {
    "gelu": F.gelu,
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
}


def to_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


class Tap:
    """A recorder for `MultiHeadAttention`: keeps the per-head `context` (for ablation) and
    passes every step on to `keep` (the captured layer's `Recorder`), if any."""

    enabled = True

    def __init__(self, keep: Recorder | None = None):
        self.keep, self.context = keep, None

    def __call__(self, name: str, tensor, *code: str) -> None:  # (code: the backend's older signature)
        if name == "context":
            self.context = tensor  # (1, H, T, Dh); not written in place afterwards
        if self.keep is not None:
            self.keep(name, tensor, *code)


def attend(
    attention: MultiHeadAttention,
    x: torch.Tensor,
    mask: torch.Tensor | None,
    ablate: dict[int, str],
    keep: Recorder | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Self-attention over `x (1, T, D)` with heads ablated.

    `ablate` maps a head to "zero" (its context, and so its share of the output projection,
    removed) or "mean" (its context replaced by its mean over positions). The output projection
    is linear, so both are exact as `out - (context_h - replacement_h) @ W_o[h]`.

    Returns:
        `output (1, T, D)` and `weights (1, H, T, T)` (the weights are not ablated).
    """
    tap = Tap(keep)
    out, weights = attention(x, x, mask, record=tap)
    if ablate and tap.context is None:  # the backend stopped recording "context": say so, never skip silently
        raise RuntimeError("MultiHeadAttention recorded no 'context' step; head ablation needs it.")
    Dh = attention.d_v
    for h, mode in ablate.items():
        context = tap.context[:, h]  # (1, T, Dh)
        replacement = context.mean(1, keepdim=True) if mode == "mean" else torch.zeros_like(context)
        W_h = attention.output_proj.weight[:, h * Dh : (h + 1) * Dh]  # (D, Dh), nn.Linear (out, in)
        out = out - (context - replacement) @ W_h.T  # (1, T, D)
    return out, weights


def layer_norm(x: torch.Tensor, w: dict[str, torch.Tensor], name: str, eps: float) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), w[f"{name}.weight"], w[f"{name}.bias"], eps)


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
        return layer_norm(x, self.w, name, self.cfg.layer_norm_eps)

    def _dense(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return F.linear(x, self.w[f"{name}.weight"], self.w[f"{name}.bias"])

    @torch.inference_mode()
    def __call__(
        self,
        input_ids: list[int],
        token_type_ids: list[int],
        *,
        ablate: dict[int, dict[int, str]] | None = None,
        capture_layer: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray, None, list]:
        """Returns `last_hidden_state (T, D)`, `attentions (L, H, T, T)`, no logits, and the
        captured layer's steps."""
        ids, types = torch.tensor(input_ids), torch.tensor(token_type_ids)
        e = "embeddings."
        x = (
            self.w[e + "word_embeddings.weight"][ids]
            + self.w[e + "position_embeddings.weight"][: len(input_ids)]
            + self.w[e + "token_type_embeddings.weight"][types]
        )  # (T, D)
        x = self._norm(x, e + "LayerNorm")[None]  # (1, T, D)
        keep = Recorder(True, to_numpy, step_code("torch"))
        attentions = []
        for i, attention in enumerate(self.attention):
            p = f"encoder.layer.{i}."
            record = keep if i == capture_layer else None
            a, weights = attend(
                attention, x, None, (ablate or {}).get(i, {}), record
            )  # (1, T, D), (1, H, T, T)
            x = self._norm(x + a, p + "attention.output.LayerNorm")
            h = self.act(self._dense(x, p + "intermediate.dense"))  # (1, T, 4D)
            x = self._norm(x + self._dense(h, p + "output.dense"), p + "output.LayerNorm")
            attentions.append(weights[0])
        return x[0].numpy(), torch.stack(attentions).numpy(), None, keep.steps
