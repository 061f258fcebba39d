"""The training lab's tiny transformer in PyTorch, the twin of `tf_backend.train`, line for line.

Token + position embeddings; per layer attnviz's `MultiHeadAttention`, residual
+ LayerNorm, optional ReLU MLP with residual + LayerNorm (post-LN); unembedding.
Plain SGD or Adam written out by hand (the frameworks' own Adams place epsilon
differently), so both frameworks take the same steps. See `attnviz.training`, which passes its
`TrainConfig` and `Batch` in (`attnviz.backends.TrainSettings`, `TrainBatch`).
Shapes: B batch, T sequence length, D d_model, V vocab, L layers, H heads.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from attnviz.backends import TrainBatch, TrainSettings
from attnviz.backends.torch_backend.attention import MultiHeadAttention

BETAS, EPS = (0.9, 0.999), 1e-8
_ATTN = {"W_q": "query", "W_k": "key", "W_v": "value", "W_o": "output_proj"}


@contextlib.contextmanager
def thread_limit(threads: int):
    """Use at most `threads` intra-op threads in the calling thread while the block runs.

    PyTorch's OpenMP thread count is per calling thread, so this changes nothing
    for other threads. Tiny models train several times faster on one thread
    (no waiting on a second core that another process holds).
    """
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def layer_norm(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """LayerNorm over the last axis (biased variance), written as in `tf_backend.train`."""
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) * torch.rsqrt(var + eps) * gamma + beta


class NativeAttention(nn.Module):
    """PyTorch's own `nn.MultiheadAttention` behind attnviz's call: `(x, x, mask) → (out, None)`."""

    def __init__(self, config: TrainSettings, dtype: torch.dtype):
        super().__init__()
        self.layer = nn.MultiheadAttention(config.d_model, config.n_heads, batch_first=True, dtype=dtype)

    def forward(self, x_q, x_kv, mask=None):
        blocked = None if mask is None else ~mask[0]  # (T, T); PyTorch: True = may NOT attend
        out, _ = self.layer(x_q, x_kv, x_kv, attn_mask=blocked, need_weights=False)
        return out, None


class Model:
    """The transformer of `config` with weights `params` (numpy, `init_params` layout)."""

    def __init__(self, config: TrainSettings, params: dict[str, np.ndarray], *, native: bool = False):
        self.config = config
        dtype = getattr(torch, config.dtype)
        D, H, (Dk, Dv) = config.d_model, config.n_heads, config.head_dims
        self.tensors: dict[str, torch.Tensor] = {}  # name → the tensor training updates
        self.attn: list[nn.Module] = []
        for i in range(config.n_layers):
            if native:
                self.attn.append(NativeAttention(config, dtype))
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
                self.tensors[name] = layer.weight if last.startswith("W") else layer.bias  # weight: (out, in)
            else:
                self.tensors[name] = torch.tensor(value, dtype=dtype)
        self.trainable = [t for t in self.tensors.values()]
        for layer in self.attn:
            self.trainable += [p for p in layer.parameters() if not any(p is t for t in self.trainable)]
        for t in self.trainable:
            t.requires_grad_(True)
        self.m = [torch.zeros_like(t) for t in self.trainable]
        self.v = [torch.zeros_like(t) for t in self.trainable]
        self.t = 0

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, list]:
        """`tokens (B, T)` → `logits (B, T, V)`, `hidden (B, T, D)`, L × `weights (B, H, T, T)`."""
        p, (B, T) = self.tensors, tokens.shape
        x = p["embed.token"][tokens] + p["embed.position"][:T]  # (B, T, D)
        mask = None
        if self.config.causal:
            mask = torch.ones(T, T, dtype=torch.bool).tril().expand(B, T, T)  # (B, T, T)
        weights = []
        for i, attn in enumerate(self.attn):
            a, w = attn(x, x, mask)  # (B, T, D), (B, H, T, T)
            weights.append(w)
            x = layer_norm(x + a, p[f"layers.{i}.ln1.gamma"], p[f"layers.{i}.ln1.beta"])
            if self.config.mlp:
                h = F.relu(x @ p[f"layers.{i}.mlp.W_in"] + p[f"layers.{i}.mlp.b_in"])  # (B, T, 4D)
                h = h @ p[f"layers.{i}.mlp.W_out"] + p[f"layers.{i}.mlp.b_out"]  # (B, T, D)
                x = layer_norm(x + h, p[f"layers.{i}.ln2.gamma"], p[f"layers.{i}.ln2.beta"])
        logits = x @ p["unembed.W"] + p["unembed.b"]  # (B, T, V)
        return logits, x, weights

    def train_step(self, batch: TrainBatch) -> tuple[float, float]:
        """One step; the loss and the accuracy (before the step) over the batch's weighted positions."""
        target = torch.from_numpy(batch.y)
        lw, aw = (
            torch.from_numpy(w).to(self.trainable[0].dtype) for w in (batch.loss_w, batch.acc_w)
        )  # (B, T)
        logits, _, _ = self.forward(torch.from_numpy(batch.x))
        nll = -torch.log_softmax(logits, -1).gather(-1, target[..., None])[..., 0]  # (B, T)
        loss = (nll * lw).sum() / lw.sum()
        grads = torch.autograd.grad(loss, self.trainable)
        with torch.no_grad():
            self._update(grads)
            accuracy = ((logits.argmax(-1) == target) * aw).sum() / aw.sum()
        return loss.item(), accuracy.item()

    @torch.no_grad()
    def _update(self, grads) -> None:
        lr = self.config.lr
        if self.config.optimizer == "sgd":
            for p, g in zip(self.trainable, grads, strict=True):
                p.sub_(lr * g)
            return
        (b1, b2), self.t = BETAS, self.t + 1
        for p, g, m, v in zip(self.trainable, grads, self.m, self.v, strict=True):
            m.mul_(b1).add_((1 - b1) * g)
            v.mul_(b2).add_((1 - b2) * g * g)
            p.sub_(lr * (m / (1 - b1**self.t)) / (torch.sqrt(v / (1 - b2**self.t)) + EPS))

    @torch.no_grad()
    def forward_numpy(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`logits (B, T, V)`, `hidden (B, T, D)`, `attentions (B, L, H, T, T)` as numpy."""
        logits, hidden, weights = self.forward(torch.from_numpy(x))
        return logits.numpy(), hidden.numpy(), torch.stack(weights, 1).numpy()

    def attentions(self, x: np.ndarray) -> np.ndarray:
        return self.forward_numpy(x)[2]

    def accuracy(self, batch: TrainBatch) -> float:
        """Token accuracy over `batch.acc_w`'s positions."""
        hits = self.forward_numpy(batch.x)[0].argmax(-1) == batch.y
        return float((hits * batch.acc_w).sum() / batch.acc_w.sum())

    @torch.no_grad()
    def params(self) -> dict[str, np.ndarray]:
        """The current weights in `init_params` layout."""
        out = {}
        for name, t in self.tensors.items():
            value = t.detach().numpy()
            out[name] = np.ascontiguousarray(value.T if ".attn.W_" in name else value)
        return out
