"""Two decoders side by side on the same prompt (issue 31 §3): how much each layer's heads rest on the
first token (the attention sink, Xiao et al., 2024), how far back they read, what roles their heads
take at the same relative depth, what their KV cache costs and where their parameters sit.

SmolLM2-135M (30 layers, every one global, 9 query heads on 3 K/V heads) and Gemma 3 270M (18 layers,
five local 512-token-window layers per global one, 4 query heads on 1 K/V head, 168 M of its 268 M
parameters in the embedding) are the pair the app offers; any two decoder checkpoints work.

Shapes: L layers, H heads, T tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from attnviz.errors import SpecError
from attnviz.exec.monitor import Monitor
from attnviz.interp import roles
from attnviz.interp.scores import first_token_score
from attnviz.kernels.kv_cache import KVCacheSize, kv_cache_size

PARTS = ("embedding", "attention", "mlp", "norms", "unembedding")  # where parameters sit


def sink_strength(attentions: np.ndarray) -> np.ndarray:
    """`(L, H, T, T)` → `(L,)`: the mean weight queries 1 … T − 1 put on key 0, over heads and queries
    (query 0 can only read key 0, so it says nothing)."""
    return first_token_score(np.asarray(attentions, np.float64)[:, :, None]).mean(axis=1)


def attention_span(attentions: np.ndarray) -> np.ndarray:
    """`(L, H, T, T)` → `(L,)`: the mean distance attended, Σ_j a[i, j]·(i − j), averaged over heads
    and queries (0 for a head that reads only itself, i for one that reads only key 0)."""
    a = np.asarray(attentions, np.float64)
    T = a.shape[-1]
    distance = np.arange(T)[:, None] - np.arange(T)[None, :]  # (T, T): i − j
    return (a * distance).sum(-1).mean(axis=(1, 2))


def relative_depth(layers: int) -> np.ndarray:
    """`(L,)`: layer / (L − 1), so the first layer of any model is 0 and its last 1 (one layer: 0)."""
    return np.arange(layers) / max(layers - 1, 1)


def layer_types(config: Any) -> tuple[str, ...] | None:
    """ "local" (sliding window) or "global" per layer, for a family that has both (Gemma 3); else None."""
    if not hasattr(config, "is_local"):
        return None
    return tuple("local" if config.is_local(i) else "global" for i in range(config.num_hidden_layers))


def parameter_counts(ckpt: Any) -> dict[str, int]:
    """Parameters by where they sit (`PARTS`), read from the checkpoint's own tensors through its
    family's layout: token (and position) embeddings, attention projections, MLP, norms (QK-norm
    included), the unembedding when it is not tied to the embedding (0 when tied). "other" is added
    for any tensor the layout does not name (none in attnviz's families)."""
    layout = ckpt.family.layout(ckpt.config)
    size = lambda name: 0 if name is None else int(ckpt.weights[name].size)  # noqa: E731
    linear = lambda lin: size(lin.weight) + size(lin.bias)  # noqa: E731
    norm = lambda n: 0 if n is None else size(n.weight) + size(n.bias)  # noqa: E731
    counts = dict.fromkeys(PARTS, 0)
    counts["embedding"] = size(layout.embed) + size(layout.position)
    if layout.unembed.weight != layout.embed:
        counts["unembedding"] = linear(layout.unembed)
    counts["norms"] = norm(layout.final_norm)
    for i, layer in enumerate(layout.layers):
        attn = ckpt.layer_params(i)  # W_q … W_o (and biases, QK-norm scales), the layer's own tensors
        qk_norm = sum(int(attn.pop(k).size) for k in ("q_norm", "k_norm") if k in attn)
        counts["attention"] += sum(int(w.size) for w in attn.values())
        counts["norms"] += qk_norm + sum(
            norm(n)
            for part in (layer.attention, layer.mlp_norms)
            for n in (part.before, part.after, part.outside)
        )
        if layer.mlp is not None:
            counts["mlp"] += sum(linear(lin) for lin in (layer.mlp.up, layer.mlp.down, layer.mlp.gate) if lin)
    other = sum(int(w.size) for w in ckpt.weights.values()) - sum(counts.values())
    return counts | ({"other": other} if other else {})


@dataclass(frozen=True)
class ModelSummary:
    """One decoder on the prompt.

    Attributes:
        name: the checkpoint's name; `tokens` the prompt's tokens as that model splits them.
        depth: `(L,)` layer / (L − 1).
        layer_types: "local" / "global" per layer, or None for a family without the distinction.
        sink: `(L,)` `sink_strength` on the prompt.
        span: `(L,)` `attention_span` on the prompt, in tokens.
        roles: the head-role scan (`attnviz.interp.roles.scan`): `roles.scores[role]` is `(L, H)`.
        kv: the KV cache's size (`kv.per_token`, `kv.per_token_mha`, `kv.at(tokens)`), float32.
        parameters: `parameter_counts`; `total` their sum.
    """

    name: str
    tokens: list[str]
    depth: np.ndarray
    layer_types: tuple[str, ...] | None
    sink: np.ndarray
    span: np.ndarray
    roles: roles.RoleScan
    kv: KVCacheSize
    parameters: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.parameters.values())

    def role_peak(self, role: str) -> np.ndarray:
        """`(L,)`: the strongest head's score for `role` in each layer (plot it against `depth`)."""
        return self.roles.scores[role].max(axis=1)


def summary(
    ckpt: Any,
    text: str,
    framework: str = "torch",
    *,
    half: int = 16,
    n: int = 4,
    seed: int = 0,
    monitor: Monitor | None = None,
    device: str = "cpu",
) -> ModelSummary:
    """`ckpt` on `text` (sink, span) and on the role scan's `n` repeated random sequences of `2·half`
    tokens (`roles.scan`); `monitor` is the scan's; `device` ("cpu" | "gpu" | "auto") where both compute.

    Raises:
        SpecError: `ckpt` is not a decoder, `text` has fewer than 2 tokens, or a bad scan setting.
    """
    if ckpt.kind != "decoder":
        raise SpecError("checkpoint", ckpt.name, "a decoder checkpoint", value_text="an encoder")
    out = ckpt.run(text, framework, device=device)
    if len(out.ids) < 2:
        raise SpecError("text", text, "a text of at least 2 tokens (the sink is read from query 1 on)")
    scan = roles.scan(ckpt, framework, half=half, n=n, seed=seed, monitor=monitor, device=device)
    L = ckpt.config.num_hidden_layers
    return ModelSummary(
        ckpt.name, ckpt.labels(out.ids), relative_depth(L), layer_types(ckpt.config),
        sink_strength(out.attentions), attention_span(out.attentions), scan, kv_cache_size(ckpt.config),
        parameter_counts(ckpt),
    )  # fmt: skip


def side_by_side(
    first: Any, second: Any, text: str, framework: str = "torch", **scan: Any
) -> tuple[ModelSummary, ModelSummary]:
    """`summary` of both decoders on the same `text` (each with its own tokenizer), the role scan with
    the same settings (`half`, `n`, `seed`, `monitor`)."""
    return summary(first, text, framework, **scan), summary(second, text, framework, **scan)
