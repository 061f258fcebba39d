"""A BERT-style encoder in TensorFlow whose self-attention is attnviz's `MultiHeadAttention`.

Shapes: T tokens, D hidden size. Mirrors `torch_bert` name for name.
"""

from __future__ import annotations

import numpy as np

from attnviz.backends.tf_backend import MultiHeadAttention, tf

ACTIVATIONS = {
    "gelu": lambda x: tf.nn.gelu(x, approximate=False),
    "gelu_new": lambda x: tf.nn.gelu(x, approximate=True),
    "gelu_pytorch_tanh": lambda x: tf.nn.gelu(x, approximate=True),
    "relu": tf.nn.relu,
}


class BertEncoder:
    """Embeddings, then per layer: attnviz attention, Add & Norm, feed-forward, Add & Norm."""

    def __init__(self, checkpoint):
        cfg, w = checkpoint.config, checkpoint.weights
        self.cfg = cfg
        with tf.device("/CPU:0"):
            self.w = {k: tf.constant(v) for k, v in w.items()}
        d_head = cfg.hidden_size // cfg.num_attention_heads
        self.attention = [
            MultiHeadAttention(cfg.hidden_size, cfg.num_attention_heads, d_head, d_head).load_params(
                checkpoint.layer_params(i)
            )
            for i in range(cfg.num_hidden_layers)
        ]
        self.act = ACTIVATIONS[cfg.hidden_act]

    def _norm(self, x: tf.Tensor, name: str) -> tf.Tensor:
        mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
        normed = (x - mean) * tf.math.rsqrt(var + self.cfg.layer_norm_eps)
        return normed * self.w[f"{name}.weight"] + self.w[f"{name}.bias"]

    def _dense(self, x: tf.Tensor, name: str) -> tf.Tensor:
        return tf.matmul(x, self.w[f"{name}.weight"], transpose_b=True) + self.w[f"{name}.bias"]

    def __call__(self, input_ids: list[int], token_type_ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Returns `last_hidden_state (T, D)` and `attentions (layers, heads, T, T)`."""
        e = "embeddings."
        x = (
            tf.gather(self.w[e + "word_embeddings.weight"], input_ids)
            + self.w[e + "position_embeddings.weight"][: len(input_ids)]
            + tf.gather(self.w[e + "token_type_embeddings.weight"], token_type_ids)
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
        return x[0].numpy(), tf.stack(attentions).numpy()
