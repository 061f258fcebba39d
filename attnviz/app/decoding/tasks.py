"""The Decoding screen's work as tasks, run in a worker (`attnviz.exec.submit` through
`attnviz.app.frame.door`): the traced generation and the time per token, on the checkpoint a
`source` names (`attnviz.pretrained.tasks.checkpoint`), reporting to their monitor.

No Streamlit here, nor anything of `attnviz.app`: a worker imports this module by name.
"""

from __future__ import annotations

from attnviz.exec.monitor import Monitor, watch
from attnviz.kernels import decoding
from attnviz.pretrained.tasks import checkpoint


def decoding_trace(
    source: str,
    text: str,
    framework: str = "torch",
    new_tokens: int = 8,
    layers: list[int] | None = None,
    heads: list[int] | None = None,
    temperature: float = 0.0,
    top_k: int | None = None,
    seed: int = 0,
    *,
    device: str = "cpu",
    monitor: Monitor | None = None,
) -> decoding.Decoding:
    """`decoding.trace` of the checkpoint `source` names: the generation traced step by step, its
    cache's bytes and the model's own probability of each token, from one run; progress per token."""
    monitor = watch(monitor)
    ckpt = checkpoint(source, framework, monitor=monitor)
    monitor.step(0, new_tokens)  # loaded: a stop asked meanwhile ends it here
    return decoding.trace(
        ckpt, text, framework, new_tokens, layers=layers, heads=heads, temperature=temperature,
        top_k=top_k, seed=seed, device=device, monitor=monitor,
    )  # fmt: skip


def time_per_token(
    source: str,
    text: str,
    framework: str = "torch",
    new_tokens: int = 16,
    repeats: int = 3,
    *,
    device: str = "cpu",
    monitor: Monitor | None = None,
) -> decoding.TokenTimes:
    """`decoding.time_per_token`: one cached step against one full pass at each position (one unit)."""
    monitor = watch(monitor)
    ckpt = checkpoint(source, framework, monitor=monitor)
    monitor.step(0, 1)
    times = decoding.time_per_token(ckpt, text, framework, new_tokens, repeats, device=device)
    monitor.report(1, 1)
    return times
