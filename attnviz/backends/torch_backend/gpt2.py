"""A GPT-2-family decoder in PyTorch whose causal self-attention is attnviz's `MultiHeadAttention`.

Follows Radford et al., 2019 ("Language Models are Unsupervised Multitask
Learners") as Hugging Face's `modeling_gpt2.py` implements it: token +
learned position embeddings, then per layer the pre-LayerNorm block
`x + attn(ln_1(x))`, `x + mlp(ln_2(x))`, a final `ln_f`, and logits through
the (tied) token embedding. Conv1D weights are `(in, out)`: `x @ W + b`.
Shapes: T tokens, D hidden size, H heads, L layers, V vocabulary. Mirrors
`tf_backend.gpt2` name for name; the call follows `attnviz.backends.common`.
"""

from __future__ import annotations

import numpy as np
import torch

from attnviz.backends.common import Forward, Replacement, Trace
from attnviz.backends.torch_backend.attention import MultiHeadAttention, recorded_code, to_numpy
from attnviz.backends.torch_backend.blocks import ACTIVATIONS, attend, causal_mask, layer_norm
from attnviz.result import Recorder


class GPT2Decoder:
    """Embeddings, then per layer: LayerNorm, attnviz causal attention, residual; LayerNorm, MLP, residual."""

    def __init__(self, checkpoint):
        cfg = self.cfg = checkpoint.config
        self.w = {k: torch.from_numpy(v) for k, v in checkpoint.weights.items()}
        self.attention = [
            MultiHeadAttention(
                cfg.hidden_size,
                cfg.num_attention_heads,
                cfg.head_dim,
                cfg.head_dim,
                scale=cfg.attention_scale(i),
            )
            .load_params(checkpoint.layer_params(i))
            .eval()
            for i in range(cfg.num_hidden_layers)
        ]
        self.act = ACTIVATIONS[cfg.hidden_act]
        self.unembed = self.w["wte.weight" if cfg.tie_word_embeddings else "lm_head.weight"]  # (V, D)

    def _norm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return layer_norm(x, self.w[f"{name}.weight"], self.w[f"{name}.bias"], self.cfg.layer_norm_eps)

    def _conv1d(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return x @ self.w[f"{name}.weight"] + self.w[f"{name}.bias"]  # x @ W + b

    @torch.inference_mode()
    def lens(self, hidden: np.ndarray) -> np.ndarray:
        """`hidden (N, T, D)` → `logits (N, T, V)`: `ln_f`, then the unembedding."""
        return (self._norm(torch.from_numpy(hidden), "ln_f") @ self.unembed.T).numpy()

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
        """`last_hidden_state` is after `ln_f`; `logits (T, V)`."""
        ids, T = torch.tensor(input_ids), len(input_ids)
        x = (self.w["wte.weight"][ids] + self.w["wpe.weight"][:T])[None]  # (1, T, D)
        causal = causal_mask(T)  # (1, T, T)
        keep, trace = Recorder(True, to_numpy, recorded_code()), Trace(head_outputs)
        for i, attention in enumerate(self.attention):
            p = f"h.{i}."
            record = keep if i == capture_layer else None
            a, weights, context = attend(
                attention, self._norm(x, p + "ln_1"), causal, (replace or {}).get(i, {}), record
            )
            trace.block(x, weights, context)
            x = x + a  # (1, T, D)
            h = self.act(self._conv1d(self._norm(x, p + "ln_2"), p + "mlp.c_fc"))  # (1, T, 4D)
            x = x + self._conv1d(h, p + "mlp.c_proj")
        final = self._norm(x, "ln_f")[0]  # (T, D)
        return trace.finish(x, final @ self.unembed.T, keep.steps, final)
