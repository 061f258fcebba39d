"""A GPT-2-family decoder in TensorFlow whose causal self-attention is attnviz's `MultiHeadAttention`.

Follows Radford et al., 2019 ("Language Models are Unsupervised Multitask
Learners") as Hugging Face's `modeling_gpt2.py` implements it: token +
learned position embeddings, then per layer the pre-LayerNorm block
`x + attn(ln_1(x))`, `x + mlp(ln_2(x))`, a final `ln_f`, and logits through
the (tied) token embedding. Conv1D weights are `(in, out)`: `x @ W + b`.
Shapes: T tokens, D hidden size, H heads, L layers, V vocabulary. Mirrors
`torch_backend.gpt2` name for name; the call follows `attnviz.backends.common`.
"""

from __future__ import annotations

import numpy as np

from attnviz.backends.common import Forward, Replacement, Trace
from attnviz.backends.tf_backend.attention import MultiHeadAttention, recorded_code, tf, to_numpy
from attnviz.backends.tf_backend.blocks import ACTIVATIONS, attend, causal_mask, layer_norm
from attnviz.result import Recorder


class GPT2Decoder:
    """Embeddings, then per layer: LayerNorm, attnviz causal attention, residual; LayerNorm, MLP, residual."""

    def __init__(self, checkpoint):
        cfg = self.cfg = checkpoint.config
        with tf.device("/CPU:0"):
            self.w = {k: tf.constant(v) for k, v in checkpoint.weights.items()}
        self.attention = [
            MultiHeadAttention(
                cfg.hidden_size,
                cfg.num_attention_heads,
                cfg.head_dim,
                cfg.head_dim,
                scale=cfg.attention_scale(i),
            ).load_params(checkpoint.layer_params(i))
            for i in range(cfg.num_hidden_layers)
        ]
        self.act = ACTIVATIONS[cfg.hidden_act]
        self.unembed = self.w["wte.weight" if cfg.tie_word_embeddings else "lm_head.weight"]  # (V, D)

    def _norm(self, x: tf.Tensor, name: str) -> tf.Tensor:
        return layer_norm(x, self.w[f"{name}.weight"], self.w[f"{name}.bias"], self.cfg.layer_norm_eps)

    def _conv1d(self, x: tf.Tensor, name: str) -> tf.Tensor:
        return tf.matmul(x, self.w[f"{name}.weight"]) + self.w[f"{name}.bias"]  # x @ W + b

    def lens(self, hidden: np.ndarray) -> np.ndarray:
        """`hidden (N, T, D)` → `logits (N, T, V)`: `ln_f`, then the unembedding."""
        return tf.matmul(self._norm(tf.constant(hidden), "ln_f"), self.unembed, transpose_b=True).numpy()

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
        T = len(input_ids)
        x = (tf.gather(self.w["wte.weight"], input_ids) + self.w["wpe.weight"][:T])[None]  # (1, T, D)
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
        return trace.finish(x, tf.matmul(final, self.unembed, transpose_b=True), keep.steps, final)
