"""Peak memory of each heavy door of the Pretrained and Interpretability pages at the largest input the
page accepts, measured in a fresh process on SmolLM2-135M (run by tests/exec/test_door_budgets.py).

For each door: the largest input its budget check accepts (one token or random half more is refused),
then the door itself, the process's peak resident memory (`VmHWM`, reset through
`/proc/self/clear_refs` after handing freed pages back) measured against its resident memory before.
Doors that repeat one piece of work of the same size stop after `REPEATS` of them (through their
progress callback): a run per head (patching, importance, ablation), a layer of the logit lens (every
layer's chunks are the same size, each freed before the next), a sequence of the role scan (one
sequence's attention held at a time; the accumulated scores do not grow with their number). Each
piece frees the last, so the first ones reach the peak, and the door costs a fraction of the whole
(the lens read in full was 85 of the script's 210 CPU seconds). Prints one JSON object.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from pathlib import Path

from attnviz import pretrained
from attnviz.cache import trim_heap
from attnviz.errors import BudgetError
from attnviz.exec.monitor import Monitor, Stop
from attnviz.interp import circuits, lens, patching, roles
from attnviz.pretrained import budget, tasks
from attnviz.settings import APP_MEMORY_BUDGET

REPEATS = 3  # pieces of a repeating door run before it is stopped (the peak is reached by then)
NAME = "SmolLM2-135M-Instruct"
INTERP_MAX_HALF, INTERP_MAX_N, PAGE_NEW_TOKENS = 64, 8, 20  # the Interpretability / Pretrained pages' limits


def stop_after(runs: int) -> Monitor:
    """A monitor that asks the work to stop once `runs` units are done."""
    monitor = Monitor(lambda done, _total, _partial: done >= runs and monitor.stop())
    return monitor


def status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1]) * 1024
    raise RuntimeError(field)


def peak_of(work) -> int:
    """Bytes the process's resident memory rose to, above where it was, while `work()` ran."""
    trim_heap()
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    before = status("VmRSS:")
    with contextlib.suppress(Stop):
        work()
    return status("VmHWM:") - before


def forward_peak(
    source: str, text: str, framework: str, *, monitor: Monitor | None = None
) -> tuple[int, int]:
    """A worker's task: the Pretrained page's forward pass (`tasks.forward`) on `text`, its model loaded
    first; its tokens and its peak (bytes the worker's resident memory rose to above the loaded model)."""
    tasks.checkpoint(source, framework, monitor=monitor)
    found = []
    peak = peak_of(lambda: found.append(tasks.forward(source, text, framework, monitor=monitor)))
    return len(found[0].ids), peak


def speech_peak(
    source: str, wav: bytes, framework: str, *, monitor: Monitor | None = None
) -> tuple[int, int]:
    """A worker's task: the Speech page's transcription with the encoder's view (`transcribe`), the
    model loaded first; the positions the view kept and the peak above the loaded model."""
    from attnviz.app.speech.tasks import transcribe

    tasks.checkpoint(source, framework, monitor=monitor)
    found = []
    peak = peak_of(lambda: found.append(transcribe(source, wav, framework, True, monitor=monitor)))
    return found[0].transcript.encoder_attentions.shape[-1], peak


def text_of(ckpt, n: int) -> str:
    """A text of exactly `n` tokens."""
    text = "cat" + " cat" * (n - 1)
    assert len(ckpt.encode(text)[0]) == n
    return text


def accepted(need, unit: str = "tokens") -> int:
    """The largest input the check accepts (and one more is refused)."""
    n = budget.largest(need, APP_MEMORY_BUDGET, 100_000)
    budget.check("door", need, n, APP_MEMORY_BUDGET, unit)
    try:
        budget.check("door", need, n + 1, APP_MEMORY_BUDGET, unit)
    except BudgetError:
        return n
    raise AssertionError("one more was accepted")


def main() -> None:
    ckpt = pretrained.load_choice(NAME)
    cfg, fw = ckpt.config, "torch"
    ckpt.run("warm up", fw)  # the model built once, outside every measurement
    found = {}

    T = accepted(functools.partial(budget.lens_bytes, cfg))
    text = text_of(ckpt, T)
    work = lambda: lens.read(ckpt, ckpt.run(text, fw), monitor=stop_after(REPEATS))  # noqa: E731
    found["lens"] = (T, budget.lens_bytes(cfg, T), peak_of(work))

    T = accepted(functools.partial(budget.generation_bytes, cfg, new_tokens=PAGE_NEW_TOKENS))
    text = text_of(ckpt, T)
    work = lambda: ckpt.generate(text, fw, PAGE_NEW_TOKENS, temperature=0.0)  # noqa: E731
    found["generation"] = (T, budget.generation_bytes(cfg, T, PAGE_NEW_TOKENS), peak_of(work))

    T = accepted(functools.partial(budget.sweep_bytes, cfg))
    clean, corrupted = text_of(ckpt, T - 1) + " dog", text_of(ckpt, T - 1) + " cow"
    work = lambda: patching.sweep(ckpt, clean, corrupted, " cat", " dog", fw, monitor=stop_after(REPEATS))  # noqa: E731
    found["patching"] = (T, budget.sweep_bytes(cfg, T), peak_of(work))

    T = accepted(functools.partial(budget.importance_bytes, cfg))
    text = text_of(ckpt, T)
    work = lambda: ckpt.head_importance(text, fw, monitor=stop_after(REPEATS))  # noqa: E731
    found["importance"] = (T, budget.importance_bytes(cfg, T), peak_of(work))

    half = min(INTERP_MAX_HALF, accepted(functools.partial(budget.scan_bytes, cfg), "random tokens per half"))
    work = lambda: roles.scan(ckpt, fw, half=half, n=INTERP_MAX_N, monitor=stop_after(REPEATS))  # noqa: E731
    found["role scan"] = (half, budget.scan_bytes(cfg, half), peak_of(work))

    def toy_to_real() -> None:
        scan = roles.scan(ckpt, fw, half=half, n=2)
        circuits.induction_ablation(ckpt, scan, 16, fw, monitor=stop_after(REPEATS))

    found["toy to real"] = (half, budget.scan_bytes(cfg, half), peak_of(toy_to_real))
    json.dump(
        {door: dict(zip(("n", "estimate", "peak"), v, strict=True)) for door, v in found.items()}, sys.stdout
    )


if __name__ == "__main__":
    main()
