"""What every pretrained model class shares, whatever its framework: written once.

The models (`bert.BertEncoder`, `gpt2.GPT2Decoder`, `lab.LabModel`, and a new
family's) are called as

    model(ids, type_ids, *, replace={layer: {head: "zero" | "mean" | z}},
          capture_layer=None, head_outputs=False) -> Forward

and have `lens(hidden (N, T, D)) -> logits (N, T, V)` (the final norm and the
unembedding; decoders only). `Tap` is the recorder their attention layers
write to; `Trace` collects what one forward pass hands back.
Shapes: T tokens, D hidden size, H heads, Dh head width, L layers, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnviz.result import Recorder

ABLATIONS = ("zero", "mean")
# What may replace one head's output: an ablation mode, or a patch `z (T, Dh)`.
Replacement = str | np.ndarray


def to_numpy(t: Any) -> np.ndarray:
    """A framework tensor (or array) as a NumPy array."""
    return np.asarray(t.detach().cpu() if hasattr(t, "detach") else t)


class Tap:
    """A recorder for `MultiHeadAttention`: keeps the per-head `context` (for ablation, patching
    and head outputs) and passes every step on to `keep` (the captured layer's `Recorder`), if any."""

    def __init__(self, keep: Recorder | None = None):
        self.keep, self.context = keep, None

    @property
    def enabled(self) -> bool:
        """Every step wanted only when a layer is captured; otherwise PyTorch's attention takes its
        in-place fast path, which still hands on the `context`."""
        return self.keep is not None

    def __call__(self, name: str, tensor, *code: str) -> None:  # (code: the backend's older signature)
        if name == "context":
            self.context = tensor  # (1, H, T, Dh); not written in place afterwards
        if self.keep is not None:
            self.keep(name, tensor, *code)

    def checked_context(self, needed: bool):
        """The recorded context, or a RuntimeError when it is `needed` and the backend stopped
        recording it (never skip an ablation silently)."""
        if needed and self.context is None:
            raise RuntimeError("MultiHeadAttention recorded no 'context' step; head ablation needs it.")
        return self.context


@dataclass
class Trace:
    """What one forward pass collects, layer by layer, as NumPy.

    Attributes:
        hidden: L + 1 × `(T, D)`: the residual stream entering each block, then the last
            block's output (before any final norm).
        attentions: L × `(H, T, T)`.
        heads: L × `(H, T, Dh)`, each head's attention-weighted values as the output
            projection receives them (after any replacement), when asked for.
    """

    want_heads: bool = False
    hidden: list = field(default_factory=list)
    attentions: list = field(default_factory=list)
    heads: list = field(default_factory=list)

    def block(self, x: Any, weights: Any, context: Any) -> None:
        """Record one block: its input `x (1, T, D)`, `weights (1, H, T, T)`, `context (1, H, T, Dh)`."""
        self.hidden.append(to_numpy(x)[0])
        self.attentions.append(to_numpy(weights)[0])
        if self.want_heads:
            self.heads.append(to_numpy(context)[0])

    def finish(self, last: Any, logits: Any, steps: list, final: Any = None) -> Forward:
        """The `Forward` of a pass whose last block produced `last (1, T, D)`; `final (T, D)` is
        what the model calls its last hidden state (after a final norm), default `last`."""
        self.hidden.append(to_numpy(last)[0])
        return Forward(
            last_hidden_state=self.hidden[-1] if final is None else to_numpy(final),
            attentions=np.stack(self.attentions),
            logits=None if logits is None else to_numpy(logits),
            steps=steps,
            hidden_states=np.stack(self.hidden),
            head_outputs=np.stack(self.heads) if self.want_heads else None,
        )


@dataclass(frozen=True)
class Forward:
    """What a model class returns (see the module docstring)."""

    last_hidden_state: np.ndarray  # (T, D)
    attentions: np.ndarray  # (L, H, T, T)
    logits: np.ndarray | None  # (T, V), decoders
    steps: list
    hidden_states: np.ndarray  # (L + 1, T, D)
    head_outputs: np.ndarray | None  # (L, H, T, Dh)
