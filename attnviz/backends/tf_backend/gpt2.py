"""A GPT-2-family decoder in TensorFlow whose causal self-attention is attnviz's `MultiHeadAttention`.

Follows Radford et al., 2019 ("Language Models are Unsupervised Multitask
Learners") as Hugging Face's `modeling_gpt2.py` implements it: token +
learned position embeddings, then per layer the pre-LayerNorm block
`x + attn(ln_1(x))`, `x + mlp(ln_2(x))`, a final `ln_f`, and logits through
the (tied) token embedding. Conv1D weights are `(in, out)`: `x @ W + b`.
Shapes: T tokens, D hidden size, H heads, L layers, V vocabulary. Mirrors
`torch_backend.gpt2` name for name.
"""

from __future__ import annotations

import numpy as np

from attnviz.backends.tf_backend.attention import MultiHeadAttention, tf
from attnviz.backends.tf_backend.bert import ACTIVATIONS, attend, layer_norm, to_numpy
from attnviz.code import step_code
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
        return layer_norm(x, self.w, name, self.cfg.layer_norm_eps)

    def _conv1d(self, x: tf.Tensor, name: str) -> tf.Tensor:
        return tf.matmul(x, self.w[f"{name}.weight"]) + self.w[f"{name}.bias"]  # x @ W + b

    def __call__(
        self,
        input_ids: list[int],
        token_type_ids: list[int] | None = None,
        *,
        ablate: dict[int, dict[int, str]] | None = None,
        capture_layer: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
        """Returns `last_hidden_state (T, D)` (after `ln_f`), `attentions (L, H, T, T)`,
        `logits (T, V)` and the captured layer's steps."""
        T = len(input_ids)
        x = (tf.gather(self.w["wte.weight"], input_ids) + self.w["wpe.weight"][:T])[None]  # (1, T, D)
        causal = tf.cast(tf.linalg.band_part(tf.ones((T, T)), -1, 0), tf.bool)[
            None
        ]  # (1, T, T): key j ≤ query i
        keep = Recorder(True, to_numpy, step_code("tensorflow"))
        attentions = []
        for i, attention in enumerate(self.attention):
            p = f"h.{i}."
            record = keep if i == capture_layer else None
            a, weights = attend(
                attention, self._norm(x, p + "ln_1"), causal, (ablate or {}).get(i, {}), record
            )
            x = x + a  # (1, T, D)
            h = self.act(self._conv1d(self._norm(x, p + "ln_2"), p + "mlp.c_fc"))  # (1, T, 4D)
            x = x + self._conv1d(h, p + "mlp.c_proj")
            attentions.append(weights[0])
        x = self._norm(x, "ln_f")[0]  # (T, D)
        logits = tf.matmul(x, self.unembed, transpose_b=True)  # (T, V)
        return x.numpy(), tf.stack(attentions).numpy(), logits.numpy(), keep.steps
