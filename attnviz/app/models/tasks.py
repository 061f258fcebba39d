"""The Compare-models screen's work as a task, run in a worker (`attnviz.exec.submit` through
`attnviz.app.frame.door`): two checkpoints' role scans side by side, reporting to its monitor.

No Streamlit here, nor anything of `attnviz.app`: a worker imports this module by name.
"""

from __future__ import annotations

from attnviz.exec.monitor import Monitor, watch
from attnviz.interp import side_by_side
from attnviz.pretrained.tasks import checkpoint


def compare_models(
    first: str,
    second: str,
    text: str,
    framework: str = "torch",
    half: int = 16,
    n: int = 4,
    seed: int = 0,
    *,
    device: str = "cpu",
    monitor: Monitor | None = None,
) -> tuple[side_by_side.ModelSummary, side_by_side.ModelSummary]:
    """`side_by_side.summary` of two decoders on `text` (as `side_by_side.side_by_side`), reporting each scanned sequence of
    both role scans as one count (`2·n` in all), on `device`."""
    monitor = watch(monitor)
    a, b = checkpoint(first, framework, monitor=monitor), checkpoint(second, framework, monitor=monitor)
    monitor.step(0, 2 * n)
    scan = {"half": half, "n": n, "seed": seed, "device": device}
    return (
        side_by_side.summary(a, text, framework, **scan, monitor=monitor.share(0, 2 * n)),
        side_by_side.summary(b, text, framework, **scan, monitor=monitor.share(n, 2 * n)),
    )
