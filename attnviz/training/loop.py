"""The training loop: `Trainer` steps one framework's model, `train` drives it, `steps_per_second` times it.

The model itself lives in the framework's backend (`backend(fw).train.Model`,
twins line for line), reached through `attnviz.frameworks.backend`.
"""

from __future__ import annotations

import math
import time

import numpy as np

from attnviz.errors import SpecError
from attnviz.exec.monitor import Monitor, watch
from attnviz.frameworks import backend, check_framework
from attnviz.interp.scores import pattern_scores
from attnviz.pretrained.families.lab import TrainConfig, check_params, init_params
from attnviz.training.config import PROBE_SIZE, check_budget, check_threads
from attnviz.training.data import Batches, held_out, induction_probe, probe
from attnviz.training.history import TrainingRun


def trainer_module(framework: str):
    """The framework's `train` module (`attnviz.backends.torch_backend.train` or its TensorFlow twin)."""
    check_framework(framework)
    module = backend(framework)
    if hasattr(module, "configure"):
        module.configure()
    return module.train


class Trainer:
    """Steps a model one at a time; `train` drives it, and the app interleaves two of them."""

    def __init__(
        self, config: TrainConfig, framework: str = "torch", params: dict[str, np.ndarray] | None = None
    ):
        if not isinstance(config, TrainConfig):
            raise SpecError("config", config, "a TrainConfig (TrainConfig.from_dict for a dict)")
        check_budget(config)
        start = check_params(config, params) if params is not None else init_params(config)
        self.model = trainer_module(framework).Model(config, start)
        self.config, self.batches = config, Batches(config)
        self.run = TrainingRun(config, framework, probe(config))
        self._induction_probe = induction_probe(config)
        self._held_out = held_out(config)
        self._elapsed = 0.0
        self._snapshot()
        if not np.isfinite(self.run.snapshots[0][1]).all() or not math.isfinite(
            self.run.scores[0]["entropy"].sum()
        ):
            raise SpecError(
                "params",
                "starting weights",
                "weights whose forward pass is finite (these overflow before any step)",
            )

    @property
    def done(self) -> bool:
        return self.run.finished

    def held_out_accuracy(self) -> float:
        """Token accuracy on the held-out batch, `PROBE_SIZE` sequences at a time (bounded memory)."""
        batch, hits = self._held_out, 0.0
        for i in range(0, len(batch.x), PROBE_SIZE):
            logits = self.model.forward_numpy(batch.x[i : i + PROBE_SIZE])[0]  # (n, T, V)
            hits += float(
                ((logits.argmax(-1) == batch.y[i : i + PROBE_SIZE]) * batch.acc_w[i : i + PROBE_SIZE]).sum()
            )
        return hits / float(batch.acc_w.sum())

    def _snapshot(self) -> None:
        attn = self.model.attentions(self.run.probe)  # (N, L, H, T, T)
        scores = pattern_scores(attn, self.model.attentions(self._induction_probe))
        step = self.run.steps_done
        self.run.snapshots.append((step, attn[0].astype(np.float32)))
        self.run.scores.append(
            {
                "step": step,
                "elapsed_s": self._elapsed,
                "held_out_accuracy": self.held_out_accuracy(),
                **scores,
            }
        )

    def step(self) -> None:
        """One optimisation step (and a snapshot when one is due)."""
        start = time.perf_counter()
        loss, accuracy = self.model.train_step(next(self.batches))
        self._elapsed += time.perf_counter() - start
        if not math.isfinite(loss):
            raise ValueError(
                f"lr: training diverged at step {self.run.steps_done + 1} (loss {loss}); allowed: a smaller lr."
            )
        self.run.history.append({"step": self.run.steps_done + 1, "loss": loss, "accuracy": accuracy})
        self.run.elapsed_s = self._elapsed
        if self.run.steps_done % self.config.snapshot_every == 0 and self.run.steps_done < self.config.steps:
            self._snapshot()

    def finish(self, stopped: bool = False) -> TrainingRun:
        """End the run: a last snapshot, the final weights and the held-out accuracy."""
        if not self.done:
            if self.run.snapshots[-1][0] != self.run.steps_done:
                self._snapshot()
            self.run.stopped = stopped
            self.run.final_accuracy = self.run.scores[-1]["held_out_accuracy"]
            self.run.params = self.model.params()
        return self.run


def train(
    config: TrainConfig,
    framework: str = "torch",
    *,
    monitor: Monitor | None = None,
    params: dict[str, np.ndarray] | None = None,
    threads: int = 1,
) -> TrainingRun:
    """Train `config` in `framework` with attnviz's own `MultiHeadAttention`.

    Args:
        monitor: told `(steps done, steps)` with the run so far as the partial after each snapshot
            (step 0 included) and at the end; asked before every step whether to stop, which ends
            training keeping what was done.
        params: starting weights (default `init_params(config)`).
        threads: PyTorch intra-op threads for this call, in this thread only
            (restored after); tiny models are fastest on one. TensorFlow keeps
            the process's setting (its pools are fixed at start-up).

    Returns:
        The finished (or stopped) `TrainingRun`; `elapsed_s` counts the steps only.

    Raises:
        SpecError: a bad framework, `threads` outside 1 … the machine's cores, or starting
            `params` that are missing, misshapen, not numbers, not finite or too large;
        BudgetError: too many snapshots (`check_budget`);
        ValueError: the loss diverged (lower `lr`).
    """
    check_threads(threads)
    trainer, monitor = Trainer(config, framework, params), watch(monitor)
    monitor.report(0, config.steps, trainer.run)
    stopped = False
    with trainer_module(framework).thread_limit(threads):
        while trainer.run.steps_done < config.steps:
            if monitor.stopped():
                stopped = True
                break
            before = len(trainer.run.snapshots)
            trainer.step()
            if len(trainer.run.snapshots) > before:
                monitor.report(trainer.run.steps_done, config.steps, trainer.run)
        run = trainer.finish(stopped)
    monitor.report(run.steps_done, config.steps, run)
    return run


def steps_per_second(
    config: TrainConfig,
    framework: str = "torch",
    impl: str = "attnviz",
    *,
    steps: int = 100,
    warmup: int = 10,
    threads: int = 1,
) -> float:
    """Training steps per second of `config`'s model, data excluded (batches made beforehand).

    `impl` "attnviz" uses attnviz's `MultiHeadAttention`; "native" the same model
    with the framework's own layer (`nn.MultiheadAttention(need_weights=False)` /
    `keras.layers.MultiHeadAttention`), everything else identical. `threads` as in `train`.
    """
    if impl not in ("attnviz", "native"):
        raise SpecError("impl", impl, "'attnviz' | 'native'")
    check_threads(threads)
    for name, value, lo in (("steps", steps, 1), ("warmup", warmup, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= value <= 100_000:
            raise SpecError(name, value, f"an integer from {lo} to 100000")
    model = trainer_module(framework).Model(config, init_params(config), native=impl == "native")
    batches = Batches(config)
    data = [next(batches) for _ in range(warmup + steps)]
    with trainer_module(framework).thread_limit(threads):
        for batch in data[:warmup]:
            model.train_step(batch)
        start = time.perf_counter()
        for batch in data[warmup:]:
            model.train_step(batch)
        return steps / (time.perf_counter() - start)
