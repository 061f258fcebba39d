"""Whisper in TensorFlow (Radford et al., 2022; OpenAI's `whisper/model.py`): an encoder over the
log-mel spectrogram and a decoder that reads it through cross-attention, every attention attnviz's
`MultiHeadAttention`. The twin of `torch_backend.whisper`, name for name.

Shapes: M mel bands, N mel frames (3000), S audio positions (1500), D width, H heads, T tokens,
n new tokens, V vocabulary, L layers.
"""

from __future__ import annotations

import numpy as np

from attnviz.backends.common import LayerKV
from attnviz.backends.tf_backend.attention import MultiHeadAttention, tf
from attnviz.backends.tf_backend.blocks import layer_norm


class DecoderState:
    """One transcription's decoding state (a model is shared and holds none): the encoder's
    output `memory (1, S, D)`, the positions decoded so far, and per decoder layer the cache of
    its self-attention (`own`) and of its cross-attention (`cross`: the encoder's keys and values,
    computed at the first step and read by every later one)."""

    def __init__(self, memory: tf.Tensor, layers: int):
        self.memory, self.length = memory, 0
        self.own = [LayerKV() for _ in range(layers)]
        self.cross = [LayerKV() for _ in range(layers)]


def _conv(x: tf.Tensor, weight: tf.Tensor, bias: tf.Tensor, stride: int) -> tf.Tensor:
    """A 1-D convolution of width 3, padded by 1, over `x (1, N, C)` with `weight (out, in, 3)`."""
    x = tf.pad(x, [[0, 0], [1, 1], [0, 0]])  # (1, N + 2, C)
    return tf.nn.conv1d(x, tf.transpose(weight, (2, 1, 0)), stride, "VALID") + bias  # (1, N / stride, out)


class Whisper:
    """`encode(mel)` once per clip, `start(memory)`, then `step(ids, state)` per decoding step.

    `checkpoint.attention_params(name)` gives each attention's weights in attnviz's layout, by its
    CTranslate2 prefix (`attnviz.pretrained.families.whisper.attention_params`)."""

    def __init__(self, checkpoint):
        cfg = self.config = checkpoint.config
        self.eps = cfg.eps
        with tf.device("/CPU:0"):
            self.w = {k: tf.constant(v) for k, v in checkpoint.weights.items()}

        def attention(name: str) -> MultiHeadAttention:
            mha = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.head_dim, cfg.head_dim)
            return mha.load_params(checkpoint.attention_params(name))

        self.encoder_attention = [
            attention(f"encoder/layer_{i}/self_attention") for i in range(cfg.encoder_layers)
        ]
        self.self_attention = [
            attention(f"decoder/layer_{i}/self_attention") for i in range(cfg.decoder_layers)
        ]
        self.cross_attention = [attention(f"decoder/layer_{i}/attention") for i in range(cfg.decoder_layers)]

    def _norm(self, x: tf.Tensor, name: str) -> tf.Tensor:
        return layer_norm(x, self.w[f"{name}/gamma"], self.w[f"{name}/beta"], self.eps)

    def _linear(self, x: tf.Tensor, name: str) -> tf.Tensor:
        return (
            tf.matmul(x, self.w[f"{name}/weight"], transpose_b=True) + self.w[f"{name}/bias"]
        )  # weight (out, in)

    def _mlp(self, x: tf.Tensor, p: str) -> tf.Tensor:
        """`x + fc2(gelu(fc1(LN(x))))`, `(1, ·, D)`."""
        h = tf.nn.gelu(
            self._linear(self._norm(x, p + "ffn/layer_norm"), p + "ffn/linear_0"), approximate=False
        )
        return x + self._linear(h, p + "ffn/linear_1")

    def encode(self, mel: np.ndarray, *, attentions: int = 0) -> tuple[tf.Tensor, np.ndarray | None]:
        """`mel (M, N)` → the encoder's output `(1, S, D)` and, when `attentions` > 0, its
        self-attention weights among the first `attentions` positions, `(L, H, n, n)` (None for 0)."""
        x = tf.constant(mel.T)[None]  # (1, N, M)
        x = tf.nn.gelu(
            _conv(x, self.w["encoder/conv1/weight"], self.w["encoder/conv1/bias"], 1), approximate=False
        )
        x = tf.nn.gelu(
            _conv(x, self.w["encoder/conv2/weight"], self.w["encoder/conv2/bias"], 2), approximate=False
        )
        x = x + self.w["encoder/position_encodings/encodings"]  # (1, S, D)
        kept = []
        for i, attention in enumerate(self.encoder_attention):
            p = f"encoder/layer_{i}/"
            h = self._norm(x, p + "self_attention/layer_norm")
            a, weights = attention(h, h)  # (1, S, D), (1, H, S, S)
            x = self._mlp(x + a, p)
            if attentions:
                kept.append(weights[0, :, :attentions, :attentions].numpy())  # (H, n, n)
        x = self._norm(x, "encoder/layer_norm")  # (1, S, D)
        return x, np.stack(kept) if attentions else None

    def start(self, memory: tf.Tensor) -> DecoderState:
        """A fresh decoding state over the encoder's output `memory (1, S, D)`."""
        return DecoderState(memory, self.config.decoder_layers)

    def step(self, ids: list[int], state: DecoderState) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The decoder on the new tokens `ids` (positions `state.length …`), reading and extending
        `state`.

        Returns:
            the last new position's `logits (V,)`, the new rows' cross-attention `(L, H, n, S)` and
            self-attention `(L, H, n, state.length + n)` weights.
        """
        start, n = state.length, len(ids)
        x = tf.gather(self.w["decoder/embeddings/weight"], ids)  # (n, D)
        x = (x + self.w["decoder/position_encodings/encodings"][start : start + n])[None]  # (1, n, D)
        crosses, selves = [], []
        for i, (own, cross) in enumerate(zip(self.self_attention, self.cross_attention, strict=True)):
            p = f"decoder/layer_{i}/"
            h = self._norm(x, p + "self_attention/layer_norm")
            a, weights = own(h, h, past=state.own[i], start=start, causal=True)  # (1, n, D), (1, H, n, T)
            x = x + a
            selves.append(weights[0])  # (H, n, T)
            memory = state.memory if state.cross[i].k is None else None  # the encoder's K/V: once
            h = self._norm(x, p + "attention/layer_norm")
            a, weights = cross(h, memory, past=state.cross[i])  # (1, n, D), (1, H, n, S)
            x = self._mlp(x + a, p)
            crosses.append(weights[0])  # (H, n, S)
        state.length = start + n
        last = self._norm(x[:, -1], "decoder/layer_norm")  # (1, D)
        logits = tf.matmul(last, self.w["decoder/embeddings/weight"], transpose_b=True)  # (1, V): tied
        return logits[0].numpy(), tf.stack(crosses).numpy(), tf.stack(selves).numpy()
