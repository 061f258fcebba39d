"""The Decoding page's streaming run, as a task for a worker (no Streamlit here): the bundled long
text read under the full cache, a sliding window, and the window with 1, 2 and 4 sinks
(`attnviz.kernels.streaming`), with each layer's and head's weight on the first token.

    handle = exec.submit(sinks_task.policy_curves, "SmolLM2-135M-Instruct", "torch", 512, 128)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnviz.exec.monitor import Monitor, watch
from attnviz.kernels import streaming
from attnviz.pretrained.tasks import checkpoint

SINKS = (1, 2, 4)


@dataclass(frozen=True)
class Curves:
    """One model's run: `nll[label] (T − 1,)` per policy (full cache, window, window + S sinks) and
    `first (T − 1, L, H)` each head's weight on the first token under the full cache; `ended` is
    "done" or "stopped" (the policies run so far are kept)."""

    tokens: int
    window: int
    nll: dict[str, np.ndarray]
    first: np.ndarray | None
    local_window: int | None
    ended: str = "done"


def policy_curves(
    source: str, framework: str, tokens: int, window: int, *, monitor: Monitor | None = None
) -> Curves:
    """Read the first `tokens` tokens of `streaming.bundled_text()` under each policy; progress per
    token over all policies; a Stop keeps the policies finished."""
    monitor = watch(monitor)
    ckpt = checkpoint(source, framework, monitor=monitor)
    ids = streaming.text_ids(ckpt, streaming.bundled_text(), tokens)
    policies = [(None, 0), (window, 0), *((window, s) for s in SINKS)]
    total, nll, first = len(policies) * (len(ids) - 1), {}, None
    for n, (w, s) in enumerate(policies):
        part = monitor.share(n * (len(ids) - 1), total)  # tokens counted over all policies
        got = streaming.score_ids(ckpt, ids, framework, window=w, sinks=s, first=w is None, monitor=part)
        if got.ended == "stopped":
            break
        nll[got.policy.label], first = got.nll, got.first if w is None else first
    local = [h.window for h in (layer.heads for layer in ckpt.model(framework).layout.layers) if h.window]
    ended = "done" if len(nll) == len(policies) else "stopped"
    return Curves(len(ids), window, nll, first, local[0] if local else None, ended)
