"""The app's heavy work as tasks: thin module-level wrappers over the library, run in a worker.

Each takes a `Context` first and plain values after (a checkpoint by its name, never the model),
loads what it needs inside the worker — frameworks once per worker, checkpoints through
`attnviz.pretrained`'s bounded cache, so a worker keeps the model it used last — and reports
progress through the context: per token, layer, head, sequence, snapshot or measured row.

    handle = exec.submit(tasks.logit_lens, "SmolLM2-135M-Instruct", text, "torch")

A `source` is a name from `pretrained.choices()` (checked here by `load_choice`, as a visitor's
pick is) or the absolute path of a checkpoint folder the caller has already allowed (a session's
own saved Training-lab run: `attnviz.ui.checkpoints.open_checkpoint` decides which).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field

import numpy as np

from attnviz import bench, pretrained
from attnviz.exec.context import Context, StopRequested
from attnviz.exec.worker import prepare_framework
from attnviz.interp import attribution_patching, circuits, dla, lens, patching, qkov, roles, side_by_side
from attnviz.kernels import decoding
from attnviz.training import TrainConfig, Trainer, TrainingRun, init_params, trainer_module


def checkpoint(ctx: Context, source: str, framework: str):
    """The checkpoint and its `framework` model, loaded outside the task's memory budget (the
    checkpoint cache, `ATTNVIZ_CHECKPOINT_CACHE_MB`, bounds what a worker keeps)."""
    with ctx.unbudgeted():
        prepare_framework(framework)
        ckpt = _open(source)
        ckpt.model(framework)
    return ckpt


def weights_of(ctx: Context, source: str):
    """The checkpoint, for work on its weights alone (NumPy: no framework), loaded outside the budget."""
    with ctx.unbudgeted():
        return _open(source)


def _open(source: str):
    return pretrained.load(source) if os.path.isabs(source) else pretrained.load_choice(source)


# -- the pretrained and interpretability pages -----------------------------------------------


def generate(
    ctx: Context,
    source: str,
    text: str,
    framework: str = "torch",
    max_new_tokens: int = 20,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int = 0,
    *,
    end: bool = False,
) -> pretrained.Generation:
    """`Checkpoint.generate`, reporting each new token as it is drawn: `(done, max_new_tokens)` and
    the partial `(token id, probability)`, so a page can show the text as it grows. A stop ends it
    with the tokens so far (`Generation.ended == "stopped"`); `end`: an end token ends it too
    (`Checkpoint.end_tokens`, `ended == "end token"`)."""
    ckpt = checkpoint(ctx, source, framework)
    drawn = [0]

    def on_token(token: int, probability: float) -> None:
        drawn[0] += 1
        ctx.report(drawn[0], max_new_tokens, (token, probability))

    return ckpt.generate(
        text, framework, max_new_tokens, temperature=temperature, top_k=top_k, seed=seed,
        stop_at=ckpt.end_tokens() if end else (), stop=ctx.stopped, on_token=on_token,
    )  # fmt: skip


def forward(
    ctx: Context,
    source: str,
    text: str,
    framework: str = "torch",
    pair: str | None = None,
    *,
    ablate: tuple = (),
    capture_layer: int | None = None,
    edit: tuple = (),
    window: int | None = None,
) -> pretrained.ModelOutput:
    """`Checkpoint.run` on `text` (and `pair`), its options written as tuples (a page's cache key):

    Args:
        ablate: `((layer, head, "zero" | "mean"), …)`.
        edit: `((layer, head, query, row), …)`, `row` the T weights that replace that attention
            row (`Checkpoint.run`'s `edit`, checked there).
        capture_layer, window: as `Checkpoint.run`'s.
    """
    ckpt = checkpoint(ctx, source, framework)
    edits: dict = {}
    for layer, head, query, row in edit:
        edits.setdefault((layer, head), {})[query] = np.asarray(row, np.float64)
    ctx.step(0, 1)
    out = ckpt.run(
        text, framework, text_pair=pair, ablate={(a, b): mode for a, b, mode in ablate} or None,
        capture_layer=capture_layer, edit=edits or None, window=window,
    )  # fmt: skip
    ctx.report(1, 1)
    return out


def logit_lens(
    ctx: Context, source: str, text: str, framework: str = "torch", k: int = 5
) -> tuple[lens.LensTable, list[str]]:
    """The lens's top `k` tokens at every layer and position (`lens.read`, per layer), and the tokens."""
    ckpt = checkpoint(ctx, source, framework)
    out = ckpt.run(text, framework)
    return lens.read(ckpt, out, k, progress=ctx.step), ckpt.labels(out.ids)


def head_importance(ctx: Context, source: str, text: str, framework: str = "torch", mode: str = "zero"):
    """`(L, H)` `Checkpoint.head_importance`, reporting after each head's ablated run."""
    ckpt = checkpoint(ctx, source, framework)
    return ckpt.head_importance(text, framework, mode=mode, progress=ctx.step)


def role_scan(
    ctx: Context, source: str, framework: str = "torch", half: int = 16, n: int = 4, seed: int = 0
) -> roles.RoleScan:
    """`roles.scan`, reporting after each repeated sequence."""
    ckpt = checkpoint(ctx, source, framework)
    return roles.scan(ckpt, framework, half=half, n=n, seed=seed, progress=ctx.step)


def patching_sweep(
    ctx: Context, source: str, clean: str, corrupted: str, answer, wrong, framework: str = "torch"
) -> patching.PatchingResult:
    """`patching.sweep`, reporting per layer; stopped, it returns the layers done (`result.done`)."""
    ckpt = checkpoint(ctx, source, framework)
    return patching.sweep(
        ckpt, clean, corrupted, answer, wrong, framework, progress=ctx.report, stop=ctx.stopped
    )


def attribution(
    ctx: Context, source: str, clean: str, corrupted: str, answer, wrong, framework: str = "torch"
) -> patching.PatchingResult:
    """Attribution patching (`interp.attribution`): two forward passes and one backward, one unit."""
    ckpt = checkpoint(ctx, source, framework)
    ctx.step(0, 1)
    result = attribution_patching.attribution(ckpt, clean, corrupted, answer, wrong, framework)
    ctx.report(1, 1)
    return result


def induction_ablation(
    ctx: Context, source: str, framework: str, half: int, n: int, seed: int, k: int
) -> circuits.AblationComparison:
    """The role scan, then `circuits.induction_ablation` of its top `k` induction heads against
    random sets of `k`; reporting each sequence scanned, then each ablated run."""
    ckpt = checkpoint(ctx, source, framework)
    scan = roles.scan(ckpt, framework, half=half, n=n, seed=seed, progress=ctx.step)
    return circuits.induction_ablation(ckpt, scan, k, framework, seed=seed, progress=ctx.step)


def logit_attribution(
    ctx: Context, source: str, text: str, answer, wrong, framework: str = "torch"
) -> dla.LogitAttribution:
    """`dla.decompose`: the logit difference split into embeddings, heads, MLPs and biases."""
    ckpt = checkpoint(ctx, source, framework)
    ctx.step(0, 1)
    parts = dla.decompose(ckpt, text, answer, wrong, framework)
    ctx.report(1, 1)
    return parts


def copying_scores(ctx: Context, source: str) -> np.ndarray:
    """`(L, H)` `qkov.copying_scores`, read from the weights (NumPy: no framework)."""
    ckpt = weights_of(ctx, source)
    ctx.step(0, 1)
    scores = qkov.copying_scores(ckpt)
    ctx.report(1, 1)
    return scores


def circuit_tables(
    ctx: Context, source: str, layer: int, head: int, tokens: list[int], offset: int = 0
) -> tuple[qkov.TokenTable, qkov.TokenTable]:
    """One head's QK table (`qkov.qk_table`, the query `offset` after the key) and OV table
    (`qkov.ov_table`, which reads the whole vocabulary) over `tokens`, from the weights."""
    ckpt = weights_of(ctx, source)
    ctx.step(0, 1)
    tables = qkov.qk_table(ckpt, layer, head, tokens, offset), qkov.ov_table(ckpt, layer, head, tokens)
    ctx.report(1, 1)
    return tables


def composition(ctx: Context, source: str, kind: str) -> qkov.Composition:
    """`qkov.composition_scores` for `kind` ("q", "k" or "v"), read from the weights."""
    ckpt = weights_of(ctx, source)
    ctx.step(0, 1)
    comp = qkov.composition_scores(ckpt, kind)
    ctx.report(1, 1)
    return comp


# -- the Decoding and Compare-models pages ------------------------------------------------


@dataclass(frozen=True)
class Traced:
    """A generation traced step by step, and the real cache of the same generation.

    Attributes:
        decoding: `decoding.trace`'s value.
        cache_bytes: `Generation.cache_bytes` of `Checkpoint.generate` with the same settings: what
            its `KVCache` object held at the end.
        cached_positions: the positions that cache held (the last new token is drawn, never run).
        model_probabilities: each new token's probability under the model at temperature 1 (the
            softmax of the logits it was drawn from), whatever the temperature it was drawn at.
    """

    decoding: decoding.Decoding
    cache_bytes: int
    cached_positions: int
    model_probabilities: tuple[float, ...]


def decoding_trace(
    ctx: Context,
    source: str,
    text: str,
    framework: str = "torch",
    new_tokens: int = 8,
    layers: list[int] | None = None,
    heads: list[int] | None = None,
    temperature: float = 0.0,
    top_k: int | None = None,
    seed: int = 0,
) -> Traced:
    """`decoding.trace`: the generation, its cache's bytes and the model's own probability of each
    token, from one run."""
    ckpt = checkpoint(ctx, source, framework)
    ctx.step(0, 1)
    traced = decoding.trace(
        ckpt, text, framework, new_tokens, layers=layers, heads=heads, temperature=temperature,
        top_k=top_k, seed=seed,
    )  # fmt: skip
    ctx.report(1, 1)
    return Traced(traced, traced.cache_bytes, len(traced.ids) - 1, traced.model_probabilities)


def time_per_token(
    ctx: Context, source: str, text: str, framework: str = "torch", new_tokens: int = 16, repeats: int = 3
) -> decoding.TokenTimes:
    """`decoding.time_per_token`: one cached step against one full pass at each position (one unit)."""
    ckpt = checkpoint(ctx, source, framework)
    ctx.step(0, 1)
    times = decoding.time_per_token(ckpt, text, framework, new_tokens, repeats)
    ctx.report(1, 1)
    return times


def compare_models(
    ctx: Context,
    first: str,
    second: str,
    text: str,
    framework: str = "torch",
    half: int = 16,
    n: int = 4,
    seed: int = 0,
) -> tuple[side_by_side.ModelSummary, side_by_side.ModelSummary]:
    """`side_by_side.side_by_side` of two decoders on `text`, reporting each scanned sequence of
    both role scans as one count (`2·n` in all)."""
    a, b = checkpoint(ctx, first, framework), checkpoint(ctx, second, framework)
    counted = {"before": 0, "last": 0}  # sequences of the scans already done; the last count seen

    def progress(done: int, total: int) -> None:
        if done <= counted["last"]:  # the second scan began (each counts 1 … n)
            counted["before"] += total
        counted["last"] = done
        ctx.step(counted["before"] + done, 2 * total)

    ctx.step(0, 2 * n)

    return side_by_side.side_by_side(a, b, text, framework, half=half, n=n, seed=seed, progress=progress)


# -- the FlashAttention page -------------------------------------------------------------


def tiled(ctx: Context, q, k, v, block_q: int, block_k: int, causal: bool, framework: str = "torch"):
    """`kernels.tiled_attention` on one head's captured `q, k, v` `(1, 1, L, d)`, every tile recorded
    (up to 1,024 tiles of a 128-token prompt: seconds of small framework calls); progress in tiles,
    every 16th reported, a stop seen between any two."""
    from attnviz.kernels import tiled_attention

    with ctx.unbudgeted():
        prepare_framework(framework)

    def progress(done: int, total: int) -> None:
        if done % 16 == 0 or done == total:
            ctx.report(done, total)
        if ctx.stopped():
            raise StopRequested

    progress(0, 1)
    return tiled_attention(
        q, k, v, block_q=block_q, block_k=block_k, causal=causal, framework=framework, progress=progress
    )


# -- the Timing page ---------------------------------------------------------------------


def timing_sweep(
    ctx: Context,
    cases: list[bench.Case],
    implementations: list[str],
    device: str = "cpu",
    repeats: int = 7,
    threads: int = 1,
    **options,
) -> dict:
    """`bench.iter_sweep` (`options`: its `warmup`, `ceiling_sizes`, `ceiling_repeats`): each
    measured row is a partial result; stopped, the rows so far (the sweep reads `ctx.stopped` before
    every timed call, so a closed tab's sweep ends within one call).

    Returns:
        `{"meta": …, "rows": [...]}` as `bench.run_sweep`.
    """
    with ctx.unbudgeted():
        for framework in sorted({bench.REGISTRY[i].framework for i in implementations}):
            prepare_framework(framework)
    result: dict = {"meta": {}, "rows": []}
    sweep = bench.iter_sweep(
        cases, implementations, device, repeats=repeats, threads=threads, stop=ctx.stopped, **options
    )
    with contextlib.closing(sweep):  # a stop closes it: the frameworks get their thread counts back
        for meta, row, done, total in sweep:
            result["meta"] = meta
            if row is not None:
                result["rows"].append(row)
            ctx.report(done, total, row)
            if ctx.stopped():
                break
    return result


# -- the Training lab --------------------------------------------------------------------


@dataclass
class Trained:
    """A training task's value.

    Attributes:
        runs: framework → its finished (or stopped) `TrainingRun`, with the final weights.
        ended: why it ended before its last step ("stopped", "time limit (…)"), else None.
        error: the run's own error (a diverged loss), what was trained being kept; else None.
    """

    runs: dict[str, TrainingRun] = field(default_factory=dict)
    ended: str | None = None
    error: str | None = None


def train(
    ctx: Context, config: TrainConfig | dict, frameworks: list[str], max_seconds: float | None = None
) -> Trained:
    """Train `config` in each of `frameworks` from the same start, the frameworks taking turns
    `snapshot_every` steps each (their runs grow side by side), one thread each.

    After each turn it reports `(steps done, steps in all)` and a partial `{framework: TrainingRun}`
    holding what is new since the last report (history rows, snapshots, scores): `training_runs`
    joins a handle's partials into the runs so far, for a page to draw live.

    Args:
        max_seconds: wall time after which it ends, keeping what it learned (the server's
            `ATTNVIZ_TRAIN_MAX_SECONDS`); a stop ends it the same way.
    """
    config = config if isinstance(config, TrainConfig) else TrainConfig.from_dict(config)
    with ctx.unbudgeted():
        for framework in frameworks:
            prepare_framework(framework)
    start = init_params(config)
    trainers = {fw: Trainer(config, fw, start) for fw in frameworks}
    sent = {fw: (0, 0, 0) for fw in frameworks}
    _report_training(ctx, trainers, sent)
    ended, error, began = None, None, time.monotonic()
    with contextlib.ExitStack() as threads:
        for fw in frameworks:
            threads.enter_context(trainer_module(fw).thread_limit(1))  # tiny models are fastest on one
        try:
            while ended is None and any(t.run.steps_done < config.steps for t in trainers.values()):
                for trainer in trainers.values():
                    ended = ended or _turn(ctx, trainer, began, max_seconds)
                _report_training(ctx, trainers, sent)
        except ValueError as diverged:  # keep what was trained, say why it ended
            error = str(diverged)
        stopped = ended is not None or error is not None
        runs = {fw: trainer.finish(stopped=stopped) for fw, trainer in trainers.items()}
    _report_training(ctx, trainers, sent)  # the last snapshot, which `finish` takes
    return Trained(runs, ended, error)


def _turn(ctx: Context, trainer: Trainer, began: float, max_seconds: float | None) -> str | None:
    """Up to `snapshot_every` steps; why the run must end, if it must."""
    for _ in range(trainer.config.snapshot_every):
        if ctx.stopped():
            return "stopped"
        if max_seconds is not None and time.monotonic() - began > max_seconds:
            return f"time limit ({max_seconds:g} s per run on this server)"
        if trainer.run.steps_done >= trainer.config.steps:
            return None
        trainer.step()
    return None


def _report_training(ctx: Context, trainers: dict[str, Trainer], sent: dict) -> None:
    """Report the steps done and, per framework, what is new since the last report."""
    news = {}
    for fw, trainer in trainers.items():
        run, (h, s, c) = trainer.run, sent[fw]
        news[fw] = TrainingRun(
            run.config, fw, run.probe, run.history[h:], run.snapshots[s:], run.scores[c:],
            elapsed_s=run.elapsed_s,
        )  # fmt: skip
        sent[fw] = (len(run.history), len(run.snapshots), len(run.scores))
    done = sum(t.run.steps_done for t in trainers.values())
    ctx.report(done, sum(t.config.steps for t in trainers.values()), news)


def training_runs(partials) -> dict[str, TrainingRun]:
    """The runs so far from a training handle's partials (`train`'s reports), joined in order."""
    runs: dict[str, TrainingRun] = {}
    for news in partials:
        for fw, new in news.items():
            run = runs.setdefault(fw, TrainingRun(new.config, fw, new.probe))
            run.history += new.history
            run.snapshots += new.snapshots
            run.scores += new.scores
            run.elapsed_s = new.elapsed_s
    return runs


# -- the Lesson and Teacher pages ----------------------------------------------------------------


def lesson_exercise(ctx: Context, lesson_id: str, step: str, seed: int) -> bytes:
    """Step `step` (its key) of lesson `lesson_id` for `seed`, built in the worker: the runs it reads
    (SmolLM2's captures, the role scan, the ablations, the patching sweep, the lens; MiniLM's
    sentences) are kept by this worker for the next seed. Returned as cloudpickle bytes, because an
    `Exercise`'s checks are closures, which plain pickle cannot carry; `pickle.loads` reads them back.

    Outside the memory budget: the library fixes every size a lesson runs (the seed only picks among
    a few prompts and sequences), and the checkpoints it needs load inside the build."""
    import cloudpickle

    from attnviz import lessons
    from attnviz.lessons import checkpoints

    chosen = lessons.lesson(lesson_id)
    ctx.step(0, 1)
    with ctx.unbudgeted():
        prepare_framework(checkpoints.framework())
        exercise = chosen.exercise(step, seed)
    ctx.report(1, 1)
    return cloudpickle.dumps(exercise)


def problem_set(ctx: Context, seeds, lesson_ids, links=None) -> tuple[str, str]:
    """A class's problem set, `(Markdown, print-ready HTML)` (`attnviz.lessons.problem_set`), reporting
    each student's lesson built; outside the memory budget as `lesson_exercise` is. `links`: each
    sheet's address as a mapping or as `((lesson id, seed), address)` pairs (a page's cache key)."""
    from attnviz.lessons import checkpoints
    from attnviz.lessons import problem_set as sheets

    with ctx.unbudgeted():
        prepare_framework(checkpoints.framework())
        md = sheets.markdown(seeds, lesson_ids, dict(links) if links else None, progress=ctx.step)
    return md, sheets.to_html(md)
