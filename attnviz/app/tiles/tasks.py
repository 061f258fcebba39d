"""The FlashAttention tiles screen's work as a task, run in a worker (`attnviz.exec.submit` through
`attnviz.app.frame.door`): the tiled replay of one head, reporting to its monitor.

No Streamlit here, nor anything of `attnviz.app`: a worker imports this module by name.
"""

from __future__ import annotations

from attnviz.exec.monitor import Monitor, Stop, watch
from attnviz.frameworks import prepare
from attnviz.kernels import tiled_attention


def tiled(
    q,
    k,
    v,
    block_q: int,
    block_k: int,
    causal: bool,
    framework: str = "torch",
    *,
    monitor: Monitor | None = None,
):
    """`kernels.tiled_attention` on one head's captured `q, k, v` `(1, 1, L, d)`, every tile recorded
    (up to 1,024 tiles of a 128-token prompt: seconds of small framework calls); progress in tiles,
    every 16th reported, a stop seen between any two (`Stop`)."""
    monitor = watch(monitor)
    with monitor.loading():
        prepare(framework)

    def progress(done: int, total: int) -> None:
        if done % 16 == 0 or done == total:
            monitor.report(done, total)
        if monitor.stopped():
            raise Stop

    progress(0, 1)
    return tiled_attention(
        q, k, v, block_q=block_q, block_k=block_k, causal=causal, framework=framework, progress=progress
    )
