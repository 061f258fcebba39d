"""The training lab's tiny transformer in TensorFlow, the twin of `torch_backend.train`, line for line.

Token + position embeddings; per layer attnviz's `MultiHeadAttention`, residual
+ LayerNorm, optional ReLU MLP with residual + LayerNorm (post-LN); unembedding.
Plain SGD or Adam written out by hand (the frameworks' own Adams place epsilon
differently), so both frameworks take the same steps. The step runs as one
`tf.function` graph. See `attnviz.training`, which passes its
`TrainConfig` and `Batch` in (`attnviz.backends.TrainSettings`, `TrainBatch`).
Shapes: B batch, T sequence length, D d_model, V vocab, L layers, H heads.
"""

from __future__ import annotations

import contextlib

import keras
import numpy as np
import tensorflow as tf

from attnviz.backends import TrainBatch, TrainSettings
from attnviz.backends.tf_backend.attention import MultiHeadAttention

BETAS, EPS = (0.9, 0.999), 1e-8
_ATTN = {"W_q": "query", "W_k": "key", "W_v": "value", "W_o": "output_proj"}


@contextlib.contextmanager
def thread_limit(threads: int):
    """The twin of `torch_backend.train.thread_limit`, which TensorFlow cannot honour.

    TensorFlow fixes its thread pools for the whole process when it starts
    (`tf.config.threading`), so the block runs with the process's setting.
    """
    yield


def layer_norm(x: tf.Tensor, gamma: tf.Variable, beta: tf.Variable, eps: float = 1e-6) -> tf.Tensor:
    """LayerNorm over the last axis (biased variance), written as in `torch_backend.train`."""
    mean = tf.reduce_mean(x, -1, keepdims=True)
    var = tf.reduce_mean((x - mean) ** 2, -1, keepdims=True)
    return (x - mean) * tf.math.rsqrt(var + eps) * gamma + beta


class NativeAttention(keras.layers.Layer):
    """Keras's own `MultiHeadAttention` behind attnviz's call: `(x, x, mask) → (out, None)`."""

    def __init__(self, config: TrainSettings, **kwargs):
        super().__init__(**kwargs)
        Dk, Dv = config.head_dims
        self.layer = keras.layers.MultiHeadAttention(config.n_heads, Dk, Dv, dtype=config.dtype)

    def call(self, x_q, x_kv, attention_mask=None):
        return self.layer(x_q, x_kv, attention_mask=attention_mask), None


class Model:
    """The transformer of `config` with weights `params` (numpy, `init_params` layout)."""

    def __init__(self, config: TrainSettings, params: dict[str, np.ndarray], *, native: bool = False):
        self.config = config
        dtype = config.dtype
        D, H, (Dk, Dv) = config.d_model, config.n_heads, config.head_dims
        self.tensors: dict[str, tf.Variable] = {}  # name → the variable training updates
        self.attn: list[keras.layers.Layer] = []
        for i in range(config.n_layers):
            if native:
                layer = NativeAttention(config, dtype=dtype)
                layer(
                    tf.zeros((1, config.seq_len, D), dtype), tf.zeros((1, config.seq_len, D), dtype)
                )  # build
                self.attn.append(layer)
                continue
            layer = MultiHeadAttention(D, H, Dk, Dv, dtype=dtype)
            layer.load_params(
                {k.split(".")[-1]: v for k, v in params.items() if k.startswith(f"layers.{i}.attn.")}
            )
            self.attn.append(layer)
        for name, value in params.items():
            group, last = name.rsplit(".", 1)
            if group.endswith(".attn"):
                if native:
                    continue
                layer = getattr(self.attn[int(name.split(".")[1])], _ATTN.get(last) or _ATTN["W" + last[1:]])
                self.tensors[name] = layer.kernel if last.startswith("W") else layer.bias  # kernel: (in, out)
            else:
                self.tensors[name] = tf.Variable(value, dtype=dtype, name=name.replace(".", "_"))
        self.trainable = list(self.tensors.values())
        for layer in self.attn:
            self.trainable += [w for w in layer.trainable_weights if not any(w is t for t in self.trainable)]
        self.m = [tf.Variable(tf.zeros_like(t)) for t in self.trainable]
        self.v = [tf.Variable(tf.zeros_like(t)) for t in self.trainable]
        self.t = tf.Variable(0.0, dtype=dtype)
        self._train_step = tf.function(self._step, reduce_retracing=True)
        self._forward = tf.function(self.forward, reduce_retracing=True)

    def forward(self, tokens: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, list]:
        """`tokens (B, T)` → `logits (B, T, V)`, `hidden (B, T, D)`, L × `weights (B, H, T, T)`."""
        p, B, T = self.tensors, tf.shape(tokens)[0], tf.shape(tokens)[1]
        x = tf.gather(p["embed.token"], tokens) + p["embed.position"][:T]  # (B, T, D)
        mask = None
        if self.config.causal:
            mask = tf.broadcast_to(
                tf.linalg.band_part(tf.ones((T, T), tf.bool), -1, 0), (B, T, T)
            )  # (B, T, T)
        weights = []
        for i, attn in enumerate(self.attn):
            a, w = attn(x, x, attention_mask=mask)  # (B, T, D), (B, H, T, T)
            weights.append(w)
            x = layer_norm(x + a, p[f"layers.{i}.ln1.gamma"], p[f"layers.{i}.ln1.beta"])
            if self.config.mlp:
                h = tf.nn.relu(x @ p[f"layers.{i}.mlp.W_in"] + p[f"layers.{i}.mlp.b_in"])  # (B, T, 4D)
                h = h @ p[f"layers.{i}.mlp.W_out"] + p[f"layers.{i}.mlp.b_out"]  # (B, T, D)
                x = layer_norm(x + h, p[f"layers.{i}.ln2.gamma"], p[f"layers.{i}.ln2.beta"])
        logits = x @ p["unembed.W"] + p["unembed.b"]  # (B, T, V)
        return logits, x, weights

    def train_step(self, batch: TrainBatch) -> tuple[float, float]:
        """One step; the loss and the accuracy (before the step) over the batch's weighted positions."""
        loss, accuracy = self._train_step(batch.x, batch.y, batch.loss_w, batch.acc_w)
        return float(loss), float(accuracy)

    def _step(self, x, y, loss_w, acc_w):
        lw, aw = tf.cast(loss_w, self.trainable[0].dtype), tf.cast(acc_w, self.trainable[0].dtype)  # (B, T)
        with tf.GradientTape() as tape:
            logits, _, _ = self.forward(x)
            nll = -tf.gather(tf.nn.log_softmax(logits, -1), y, batch_dims=2)  # (B, T)
            loss = tf.reduce_sum(nll * lw) / tf.reduce_sum(lw)
        grads = [tf.convert_to_tensor(g) for g in tape.gradient(loss, self.trainable)]  # gathers → dense
        self._update(grads)
        hits = tf.cast(tf.argmax(logits, -1) == tf.cast(y, tf.int64), aw.dtype)
        return loss, tf.reduce_sum(hits * aw) / tf.reduce_sum(aw)

    def _update(self, grads) -> None:
        lr = self.config.lr
        if self.config.optimizer == "sgd":
            for p, g in zip(self.trainable, grads, strict=True):
                p.assign_sub(lr * g)
            return
        (b1, b2), t = BETAS, self.t.assign_add(1.0)
        for p, g, m, v in zip(self.trainable, grads, self.m, self.v, strict=True):
            m.assign(b1 * m + (1 - b1) * g)
            v.assign(b2 * v + (1 - b2) * g * g)
            p.assign_sub(lr * (m / (1 - b1**t)) / (tf.sqrt(v / (1 - b2**t)) + EPS))

    def forward_numpy(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`logits (B, T, V)`, `hidden (B, T, D)`, `attentions (B, L, H, T, T)` as numpy."""
        logits, hidden, weights = self._forward(tf.constant(x))
        return logits.numpy(), hidden.numpy(), np.stack([w.numpy() for w in weights], 1)

    def attentions(self, x: np.ndarray) -> np.ndarray:
        return self.forward_numpy(x)[2]

    def accuracy(self, batch: TrainBatch) -> float:
        """Token accuracy over `batch.acc_w`'s positions."""
        hits = self.forward_numpy(batch.x)[0].argmax(-1) == batch.y
        return float((hits * batch.acc_w).sum() / batch.acc_w.sum())

    def params(self) -> dict[str, np.ndarray]:
        """The current weights in `init_params` layout."""
        return {name: np.array(t.numpy()) for name, t in self.tensors.items()}
