"""The Interpret screen's work as tasks, run in a worker (`attnviz.exec.submit` through
`attnviz.app.frame.door`): thin wrappers that load the checkpoint `source` names where they run
(`attnviz.pretrained.tasks.checkpoint`) and call `attnviz.interp`, reporting to their monitor.

No Streamlit here, nor anything of `attnviz.app`: a worker imports this module by name.
"""

from __future__ import annotations

import numpy as np

from attnviz.exec.monitor import Monitor, watch
from attnviz.interp import attribution_patching, circuits, dla, lens, patching, qkov, roles, score_table
from attnviz.pretrained.tasks import checkpoint


def logit_lens(
    source: str,
    text: str,
    framework: str = "torch",
    k: int = 5,
    *,
    device: str = "cpu",
    monitor: Monitor | None = None,
) -> tuple[lens.LensTable, list[str]]:
    """The lens's top `k` tokens at every layer and position (`lens.read`, per layer, on the run's
    `device`), and the tokens."""
    monitor = watch(monitor)
    ckpt = checkpoint(source, framework, monitor=monitor)
    out = ckpt.run(text, framework, device=device)
    return lens.read(ckpt, out, k, monitor=monitor), ckpt.labels(out.ids)


def role_scan(
    source: str,
    framework: str = "torch",
    half: int = 16,
    n: int = 4,
    seed: int = 0,
    *,
    device: str = "cpu",
    monitor: Monitor | None = None,
) -> roles.RoleScan:
    """`roles.scan` on `device`, reporting after each repeated sequence."""
    monitor = watch(monitor)
    ckpt = checkpoint(source, framework, monitor=monitor)
    return roles.scan(ckpt, framework, half=half, n=n, seed=seed, monitor=monitor, device=device)


def patching_sweep(
    source: str,
    clean: str,
    corrupted: str,
    answer,
    wrong,
    framework: str = "torch",
    *,
    device: str = "cpu",
    monitor: Monitor | None = None,
) -> patching.PatchingResult:
    """`patching.sweep` on `device`, reporting per layer; stopped, it returns the layers done (`result.done`)."""
    monitor = watch(monitor)
    ckpt = checkpoint(source, framework, monitor=monitor)
    return patching.sweep(ckpt, clean, corrupted, answer, wrong, framework, monitor=monitor, device=device)


def attribution(
    source: str,
    clean: str,
    corrupted: str,
    answer,
    wrong,
    framework: str = "torch",
    *,
    device: str = "cpu",
    monitor: Monitor | None = None,
) -> patching.PatchingResult:
    """Attribution patching (`interp.attribution`) on `device`: two forward passes and one backward, one unit."""
    monitor = watch(monitor)
    ckpt = checkpoint(source, framework, monitor=monitor)
    monitor.step(0, 1)
    result = attribution_patching.attribution(ckpt, clean, corrupted, answer, wrong, framework, device=device)
    monitor.report(1, 1)
    return result


def induction_ablation(
    source: str, framework: str, half: int, n: int, seed: int, k: int, *, monitor: Monitor | None = None
) -> circuits.AblationComparison:
    """The role scan, then `circuits.induction_ablation` of its top `k` induction heads against
    random sets of `k`; reporting each sequence scanned, then each ablated run."""
    monitor = watch(monitor)
    ckpt = checkpoint(source, framework, monitor=monitor)
    scan = roles.scan(ckpt, framework, half=half, n=n, seed=seed, monitor=monitor)
    return circuits.induction_ablation(ckpt, scan, k, framework, seed=seed, monitor=monitor)


def logit_attribution(
    source: str, text: str, answer, wrong, framework: str = "torch", *, monitor: Monitor | None = None
) -> dla.LogitAttribution:
    """`dla.decompose`: the logit difference split into embeddings, heads, MLPs and biases."""
    monitor = watch(monitor)
    ckpt = checkpoint(source, framework, monitor=monitor)
    monitor.step(0, 1)
    parts = dla.decompose(ckpt, text, answer, wrong, framework)
    monitor.report(1, 1)
    return parts


def copying_scores(source: str, *, monitor: Monitor | None = None) -> np.ndarray:
    """`(L, H)` `qkov.copying_scores`, read from the weights (NumPy: no framework), reporting the
    vocabulary's chunks and then each layer."""
    monitor = watch(monitor)
    ckpt = checkpoint(source, monitor=monitor)
    return qkov.copying_scores(ckpt, monitor=monitor)


def circuit_tables(
    source: str, layer: int, head: int, tokens: list[int], offset: int = 0, *, monitor: Monitor | None = None
) -> tuple[qkov.TokenTable, qkov.TokenTable]:
    """One head's QK table (`qkov.qk_table`, the query `offset` after the key) and OV table
    (`qkov.ov_table`, which reads the whole vocabulary) over `tokens`, from the weights."""
    monitor = watch(monitor)
    ckpt = checkpoint(source, monitor=monitor)
    monitor.step(0, 1)
    tables = qkov.qk_table(ckpt, layer, head, tokens, offset), qkov.ov_table(ckpt, layer, head, tokens)
    monitor.report(1, 1)
    return tables


def composition(source: str, kind: str, *, monitor: Monitor | None = None) -> qkov.Composition:
    """`qkov.composition_scores` for `kind` ("q", "k" or "v"), read from the weights: every pair
    of heads, reporting each later layer."""
    monitor = watch(monitor)
    ckpt = checkpoint(source, monitor=monitor)
    return qkov.composition_scores(ckpt, kind, monitor=monitor)


def composition_rows(
    source: str, kind: str, rows: tuple[tuple[int, int, bool], ...], *, monitor: Monitor | None = None
) -> list[qkov.CompositionRow]:
    """`qkov.composition_rows` of `kind` for each `(layer, head, reads)`: what the Composition tab
    draws first (one head's row, and the previous-token head's readers), reporting each row."""
    monitor = watch(monitor)
    ckpt = checkpoint(source, monitor=monitor)
    return qkov.composition_rows(ckpt, kind, rows, monitor=monitor)


def score_row(
    source: str,
    text: str,
    layer: int,
    head: int,
    query: int,
    framework: str = "torch",
    key: int | None = None,
    *,
    monitor: Monitor | None = None,
) -> score_table.RowParts:
    """`score_table.score_row`: one head's row at `query`, the score at `key` split into parts."""
    monitor = watch(monitor)
    ckpt = checkpoint(source, framework, monitor=monitor)
    monitor.step(0, 1)
    row = score_table.score_row(ckpt, text, layer, head, query, framework, key=key)
    monitor.report(1, 1)
    return row
