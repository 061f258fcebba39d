"""A checkpoint's work as tasks: run in a worker by `attnviz.exec.submit`, or called directly.

Each takes a checkpoint by its `source` (never the model) and plain values, loads what it needs
where it runs — the framework once per process, the checkpoint through the bounded cache of
`attnviz.pretrained`, so a worker keeps the model it used last — and reports to its `monitor`
(`attnviz.exec.monitor`): per token, or one unit for one pass.

A `source` is a name from `pretrained.choices()` (checked by `load_choice`, as a visitor's pick
is) or the absolute path of a checkpoint folder the caller has already allowed (a session's own
saved Training-lab run: `attnviz.app.frame.checkpoints` decides which).
"""

from __future__ import annotations

import os

import numpy as np

from attnviz.exec.monitor import Monitor, watch
from attnviz.frameworks import prepare
from attnviz.pretrained.model import Checkpoint, ModelOutput
from attnviz.pretrained.sampling import Generation
from attnviz.pretrained.sources import load, load_choice


def checkpoint(source: str, framework: str | None = None, *, monitor: Monitor | None = None) -> Checkpoint:
    """The checkpoint `source` names, with its `framework` model built (None: its weights alone,
    NumPy work needs no framework); loaded inside `monitor.loading()` (a worker's memory budget
    does not count it: the checkpoint cache, `ATTNVIZ_CHECKPOINT_CACHE_MB`, bounds what it keeps)."""
    with watch(monitor).loading():
        if framework is not None:
            prepare(framework)
        ckpt = load(source) if os.path.isabs(source) else load_choice(source)
        if framework is not None:
            ckpt.model(framework)
    return ckpt


def card_files(name: str, *, monitor: Monitor | None = None) -> None:
    """The card files (configuration, tokenizer) of the packaged GGUF checkpoint `name` converted on
    disk, nothing else read (`gguf.converted(..., weights=False)`): a server's first open of its card,
    done here because reading a 262,144-token vocabulary from the file (Gemma 3) peaks over 1 GB.
    Inside `monitor.loading()`, as any checkpoint load: the memory budget is a run's, not a load's."""
    from attnviz.pretrained import gguf
    from attnviz.pretrained.sources import local_checkpoints, packaged_path

    with watch(monitor).loading():
        path = packaged_path(name, local_checkpoints()[name])
        gguf.converted(path, weights=False)


def generate(
    source: str,
    text: str,
    framework: str = "torch",
    max_new_tokens: int = 20,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int = 0,
    device: str = "cpu",
    *,
    end: bool = False,
    monitor: Monitor | None = None,
) -> Generation:
    """`Checkpoint.generate`, reporting each new token as it is drawn: `(done, max_new_tokens)` and
    the partial `(token id, probability)`, so a page can show the text as it grows. A stop ends it
    with the tokens so far (`Generation.ended == "stopped"`); `end`: an end token ends it too
    (`Checkpoint.end_tokens`, `ended == "end token"`). `device`: "cpu" | "gpu" | "auto", where it computes."""
    ckpt = checkpoint(source, framework, monitor=monitor)
    return ckpt.generate(
        text, framework, max_new_tokens, temperature=temperature, top_k=top_k, seed=seed,
        stop_at=ckpt.end_tokens() if end else (), monitor=monitor, device=device,
    )  # fmt: skip


def forward(
    source: str,
    text: str,
    framework: str = "torch",
    pair: str | None = None,
    *,
    ablate: tuple = (),
    capture_layer: int | None = None,
    edit: tuple = (),
    window: int | None = None,
    device: str = "cpu",
    monitor: Monitor | None = None,
) -> ModelOutput:
    """`Checkpoint.run` on `text` (and `pair`), its options written as tuples (a page's cache key):

    Args:
        ablate: `((layer, head, "zero" | "mean"), …)`.
        edit: `((layer, head, query, row), …)`, `row` the T weights that replace that attention
            row (`Checkpoint.run`'s `edit`, checked there).
        capture_layer, window, device: as `Checkpoint.run`'s.
    """
    monitor = watch(monitor)
    ckpt = checkpoint(source, framework, monitor=monitor)
    edits: dict = {}
    for layer, head, query, row in edit:
        edits.setdefault((layer, head), {})[query] = np.asarray(row, np.float64)
    monitor.step(0, 1)
    out = ckpt.run(
        text, framework, text_pair=pair, ablate={(a, b): mode for a, b, mode in ablate} or None,
        capture_layer=capture_layer, edit=edits or None, window=window, device=device,
    )  # fmt: skip
    monitor.report(1, 1)
    return out


def head_importance(
    source: str,
    text: str,
    framework: str = "torch",
    mode: str = "zero",
    *,
    device: str = "cpu",
    monitor: Monitor | None = None,
):
    """`(L, H)` `Checkpoint.head_importance` on `device`, reporting after each head's ablated run."""
    ckpt = checkpoint(source, framework, monitor=monitor)
    return ckpt.head_importance(text, framework, mode=mode, monitor=monitor, device=device)
