"""Activation patching: which heads carry the information that decides an answer.

Run a clean prompt and a corrupted one of the same token length; for every head, run
the corrupted prompt again with that one head's output replaced by its output on the
clean prompt, and measure how much of the clean − corrupted logit difference
(answer − wrong token, at the last position) comes back (Meng et al., 2022; Wang et
al., 2022). 1 = the head alone restores the clean answer; 0 = it carries nothing.

Shapes: L layers, H heads, T tokens, Dh head width.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attnviz.errors import SpecError
from attnviz.exec.monitor import Monitor, watch


@dataclass(frozen=True)
class PromptRun:
    """One prompt's unpatched run, as a sweep computed it.

    Attributes:
        attentions: `(L, H, T, T)` every head's attention weights.
        logits: `(V,)` the next-token logits at the last position (where the difference is read).
    """

    attentions: np.ndarray
    logits: np.ndarray


@dataclass(frozen=True)
class PatchingResult:
    """A sweep's result.

    Attributes:
        restored: `(L, H)` fraction of the logit difference restored by patching each head;
            NaN where the sweep stopped before that head (`done` is False there).
        done: `(L, H)` which heads were run.
        clean_diff, corrupted_diff: the logit difference (answer − wrong) of each prompt.
        tokens_clean, tokens_corrupted: the two prompts' tokens as text.
        answer, wrong: the two tokens compared, as text.
        clean, corrupted: the two prompts' own runs (`sweep`: a page draws their attention without
            running them again); None where they were not kept (attribution patching).
    """

    restored: np.ndarray
    done: np.ndarray
    clean_diff: float
    corrupted_diff: float
    tokens_clean: list[str]
    tokens_corrupted: list[str]
    answer: str
    wrong: str
    clean: PromptRun | None = None
    corrupted: PromptRun | None = None

    @property
    def complete(self) -> bool:
        return bool(self.done.all())


def token_id(ckpt, token: str | int, field: str) -> int:
    """An id from an id or from a text that the tokenizer turns into exactly one token."""
    if isinstance(token, int | np.integer) and not isinstance(token, bool):
        if 0 <= token < ckpt.n_tokens:
            return int(token)
        raise SpecError(field, token, f"a token id 0 … {ckpt.n_tokens - 1} or a one-token text")
    if isinstance(token, str) and token:
        ids = ckpt.tokenizer.encode(token, add_special_tokens=False).ids
        if len(ids) == 1:
            return ids[0]
        raise SpecError(
            field, token, "a text the tokenizer reads as one token", value_text=f"{len(ids)} tokens"
        )
    raise SpecError(field, token, f"a token id 0 … {ckpt.n_tokens - 1} or a one-token text")


def check_prompts(ckpt, clean: str, corrupted: str, answer: str | int, wrong: str | int):
    """`(answer id, wrong id, clean ids, corrupted ids)`, or a `SpecError` naming the field."""
    if ckpt.kind != "decoder":
        raise SpecError("checkpoint", ckpt.name, "a decoder (patching compares next-token logits)")
    a, w = token_id(ckpt, answer, "answer"), token_id(ckpt, wrong, "wrong")
    if a == w:
        raise SpecError("wrong", wrong, "a token other than the answer")
    clean_ids, corrupted_ids = ckpt.encode(clean)[0], ckpt.encode(corrupted)[0]
    if len(clean_ids) != len(corrupted_ids):
        raise SpecError(
            "corrupted",
            corrupted,
            f"a prompt of {len(clean_ids)} tokens, as many as the clean one",
            value_text=f"{len(corrupted_ids)} tokens",
        )
    return a, w, clean_ids, corrupted_ids


def logit_diff(logits: np.ndarray, answer: int, wrong: int) -> float:
    """`logits[-1, answer] − logits[-1, wrong]` from `logits (T, vocab)`."""
    return float(logits[-1, answer]) - float(logits[-1, wrong])


def sweep(
    ckpt,
    clean: str,
    corrupted: str,
    answer: str | int,
    wrong: str | int,
    framework: str = "torch",
    *,
    monitor: Monitor | None = None,
    layers: Sequence[int] | None = None,
    device: str = "cpu",
) -> PatchingResult:
    """Patch every head's clean output into the corrupted run (every head of `layers`, when given).

    Each patched run equals the corrupted run up to the patched layer, so it starts there from
    the corrupted run's stored residual stream; and at every position before the first token
    where the prompts differ (causal attention), so it computes only the positions from there
    on, over the corrupted run's keys and values of that shared prefix. A layer's heads run as
    one batch, keep no attention weights, and compute the answer's and the wrong token's logits
    at the last position only. (The
    numbers are those of one full `run_ids(corrupted, patch={(layer, head): z_clean})` per head,
    to float32 rounding.)

    Args:
        clean, corrupted: two prompts with the same number of tokens.
        answer, wrong: the token the clean prompt should be followed by, and the one the
            corrupted prompt suggests (ids or one-token texts).
        monitor: told `(done, total)` after each layer's heads (total: the swept layers × H);
            asked before each layer whether to stop, which ends the sweep early with the layers
            done (`done` says where).
        layers: sweep only these layers (ascending, each 0 … L − 1); the others stay NaN and not
            `done`. A late layer's patched runs start late, so the last layers cost least: a
            lesson sweeps the last third of a model in a fraction of the whole sweep's time.
        device: "cpu" | "gpu" | "auto": where the runs and the patched resumptions compute (the
            prefix's keys and values stay there).
    """
    a, w, clean_ids, corrupted_ids = check_prompts(ckpt, clean, corrupted, answer, wrong)
    swept, monitor = check_layers(layers, ckpt.config.num_hidden_layers), watch(monitor)
    base = ckpt.run_ids(clean_ids, framework, head_outputs=True, device=device)
    worse = ckpt.run_ids(corrupted_ids, framework, head_outputs=True, device=device)
    clean_diff, corrupted_diff = logit_diff(base.logits, a, w), logit_diff(worse.logits, a, w)
    gap = check_gap(clean_diff, corrupted_diff, corrupted)
    model = ckpt.model(framework, device)
    start = shared_prefix(clean_ids, corrupted_ids)
    cache = model.prefix_cache(worse.hidden_states, start)  # every run's keys and values before `start`
    L, H = base.head_outputs.shape[:2]
    restored, done = np.full((L, H), np.nan), np.zeros((L, H), bool)
    for i, layer in enumerate(swept):
        if monitor.stopped():
            break
        patches = [{head: base.head_outputs[layer, head, start:]} for head in range(H)]
        x, context = worse.hidden_states[layer, start:], worse.head_outputs[layer, :, start:]
        logits = model.resume(x, layer, context, patches, [a, w], cache)  # (H, 2)
        restored[layer] = (logits[:, 0] - logits[:, 1] - corrupted_diff) / gap
        done[layer] = True
        monitor.report((i + 1) * H, len(swept) * H)
    return _result(restored, done, clean_diff, corrupted_diff, base, worse, ckpt, a, w)


def check_layers(layers: Sequence[int] | None, n_layers: int) -> list[int]:
    """The layers a sweep runs: all of them for None, else `layers` checked (integers, ascending, in range)."""
    if layers is None:
        return list(range(n_layers))
    allowed = f"distinct layer numbers 0 … {n_layers - 1} in ascending order, at least one"
    if isinstance(layers, str | bytes) or not isinstance(layers, Sequence) or not len(layers):
        raise SpecError("layers", layers, allowed)
    swept = []
    for layer in layers:
        if isinstance(layer, bool) or not isinstance(layer, int | np.integer) or not 0 <= layer < n_layers:
            raise SpecError("layers", layers, allowed)
        if swept and layer <= swept[-1]:
            raise SpecError("layers", layers, allowed)
        swept.append(int(layer))
    return swept


def shared_prefix(clean_ids: list[int], corrupted_ids: list[int]) -> int:
    """How many leading positions every patched run shares with the corrupted run: those before
    the first token where the prompts differ (causal attention: nothing later reaches them)."""
    differ = [i for i, (c, d) in enumerate(zip(clean_ids, corrupted_ids, strict=True)) if c != d]
    return differ[0] if differ else 0


def check_gap(clean_diff: float, corrupted_diff: float, corrupted: str) -> float:
    """`clean_diff − corrupted_diff`, or a `SpecError` when the prompts give the same difference."""
    gap = clean_diff - corrupted_diff
    if not abs(gap) > 1e-6:
        raise SpecError(
            "corrupted",
            corrupted,
            "a prompt that changes the logit difference between answer and wrong token "
            f"(both give {clean_diff:.4g})",
        )
    return gap


def _result(restored, done, clean_diff, corrupted_diff, base, worse, ckpt, a, w) -> PatchingResult:
    labels = ckpt.labels
    runs = [PromptRun(out.attentions, out.logits[-1]) for out in (base, worse)]
    return PatchingResult(
        restored,
        done,
        clean_diff,
        corrupted_diff,
        labels(base.ids),
        labels(worse.ids),
        *labels([a, w]),
        *runs,
    )
