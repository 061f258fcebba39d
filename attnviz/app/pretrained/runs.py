"""The Pretrained page's heavy work, each in a worker through the door (`attnviz.app.frame.door`,
tasks of `attnviz.pretrained.tasks`), its value kept in the server's byte-bounded cache under its
settings — and generation, streamed token by token as the worker draws it, with a Stop.

A generation runs on across reruns of the page (changing the layer does not restart it): its
handle is kept in the session with the settings it answers, stopped by the Stop button, by other
settings, or when the tab closes. An ended one is kept in the server's cache (the same seed gives
the same tokens to every visitor); one stopped by its visitor in that session only.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import numpy as np
import streamlit as st

from attnviz import formats
from attnviz.app.frame import door, results
from attnviz.app.frame.literal import count, escape_markdown, one_line
from attnviz.pretrained import budget, tasks
from attnviz.settings import APP_MEMORY_BUDGET

IMPORTANCE_BUDGET = 200 * 64  # heads × tokens: "Most important heads" runs one model per head
STOP_FINISH_S = 30.0  # a generation stopped by its visitor: the time to finish its last pass


def source(ckpt) -> str:
    """What a worker opens: the checkpoint's folder, which this session was allowed to open
    (`open_checkpoint` decided: a listed name, a Hub id the operator allows, this session's run)."""
    return str(ckpt.path)


def check_forward(ckpt, text: str, pair: str | None) -> int:
    """Refuse a forward pass whose estimated peak is over the per-run budget, before it is submitted
    (issue 46 §23: Gemma's 262,144-row unembedding makes its logits alone ~1 MiB a token)."""
    need = functools.partial(budget.forward_bytes, ckpt.config)
    return budget.check("The model's forward pass", need, len(ckpt.encode(text, pair)[0]), APP_MEMORY_BUDGET)


def encode(
    ckpt, text: str, pair: str | None, framework: str, window: int | None = None, *, device: str = "cpu"
):
    """The model's output on `text` (and `pair`) on `device`; `window` narrows the local layers' window.

    Raises:
        BudgetError: its estimate is over the per-run budget (`check_forward`).
    """
    check_forward(ckpt, text, pair)
    return door.run(
        tasks.forward, source(ckpt), text, framework, pair, window=window, device=device,
        spinner="Running the model", cache="pretrained output",
    )  # fmt: skip


def ablated_run(
    ckpt,
    text: str,
    pair: str | None,
    framework: str,
    heads: tuple,
    mode: str,
    window=None,
    *,
    device: str = "cpu",
):
    ablate = tuple((int(layer), int(head), mode) for layer, head in heads)
    check_forward(ckpt, text, pair)
    return door.run(
        tasks.forward, source(ckpt), text, framework, pair, ablate=ablate, window=window, device=device,
        spinner="Running the model with heads ablated", cache="pretrained ablated",
    )  # fmt: skip


def captured_run(
    ckpt, text: str, pair: str | None, framework: str, layer: int, window=None, *, device: str = "cpu"
):
    check_forward(ckpt, text, pair)
    return door.run(
        tasks.forward, source(ckpt), text, framework, pair, capture_layer=int(layer), window=window,
        device=device, spinner="Recording the layer's steps", cache="pretrained captured",
    )  # fmt: skip


def head_importance(
    ckpt, text: str, framework: str, mode: str, *, run: bool, device: str = "cpu"
) -> np.ndarray | None:
    """`ckpt.head_importance` (the model once per head: the longest work of the page), refused
    before running when its estimated peak is over the per-run budget. Without `run` (no click
    yet) only an answer already in the server's cache."""
    args = (source(ckpt), text, framework, mode)
    if not run:
        return door.cached(IMPORTANCE_CACHE, *args, device=device)[1]
    need = functools.partial(budget.importance_bytes, ckpt.config)
    budget.check("Head importance", need, len(ckpt.encode(text)[0]), APP_MEMORY_BUDGET)
    return door.run(
        tasks.head_importance,
        *args,
        device=device,
        spinner="Ablating each head in turn",
        cache=IMPORTANCE_CACHE,
    )


IMPORTANCE_CACHE = "pretrained importance"


# -- generation: streamed as the worker draws each token, with a Stop ----------------------------

GENERATION_CACHE = "pretrained generation"
_RUNNING, _STOPPED = "pre.generation_running", "pre.generation_stopped"  # (args, handle | Generation)


def check_generation(ckpt, prompt: str, n: int) -> None:
    """Refuse a generation whose estimated peak is over the per-run budget, before it starts."""
    need = functools.partial(budget.generation_bytes, ckpt.config, new_tokens=int(n))
    budget.check(
        f"Generating {n} tokens", need, len(ckpt.encode(prompt)[0]), APP_MEMORY_BUDGET, "prompt tokens"
    )


def generation_args(
    ckpt, prompt: str, framework: str, n: int, temperature: float, seed: int, device: str = "cpu"
) -> tuple:
    """`tasks.generate`'s positional arguments (top_k None, then the device): the cache key of one generation."""
    return (source(ckpt), prompt, framework, int(n), float(temperature), None, int(seed), device)


def finished_generation(args: tuple):
    """This request's generation if it has ended: from the server's cache (shared: the same seed
    gives the same tokens) or, stopped by this visitor, from the session; else None."""
    hit, gen = door.cached(GENERATION_CACHE, *args, end=True)
    if hit:
        return gen
    stopped = st.session_state.get(_STOPPED)
    return stopped[1] if stopped and stopped[0] == args else None


def generation_handle(args: tuple):
    """The running generation of this request: the session's (it survives a rerun: changing the
    layer does not restart it), or a new one. Another request's running generation is stopped."""
    running = st.session_state.get(_RUNNING)
    if running and running[0] == args:
        return running[1]
    if running:
        running[1].stop()
    handle = door.start(tasks.generate, *args, end=True)
    st.session_state[_RUNNING] = (args, handle)
    return handle


def stop_generation() -> None:
    """The Stop button's callback: the worker ends after the token it is drawing, keeping the rest —
    it then runs the whole text once more for the figures (≈ 0.3 s on SmolLM2, several seconds with
    the cores busy), which a Stop's visitor waits for: `STOP_FINISH_S`, not a closed tab's grace."""
    running = st.session_state.get(_RUNNING)
    if running:
        running[1].stop(grace_s=STOP_FINISH_S)


def forget_generation() -> None:
    """The Generate toggle's callback: a generation stopped by this visitor is not shown again."""
    st.session_state.pop(_STOPPED, None)


def streamed(handle, ckpt) -> Iterator[str]:
    """The new text as the worker reports each token (for `st.write_stream`), until it ends."""
    seen, ids, text = 0, [], ""
    while True:
        progress = handle.progress()
        for token, _ in progress.partials[seen:]:
            ids.append(int(token))
            grown = ckpt.tokenizer.decode(ids, skip_special_tokens=False)
            yield one_line(grown[len(text) :])
            text = grown
        seen = len(progress.partials)
        if progress.state == "done":
            return
        handle.wait(door.WAIT_S)


def ended_generation(args: tuple, handle):
    """The handle's Generation once it ended (its `TaskError` raised): kept in the server's cache,
    or — stopped — in this session only (another visitor asking gets the whole generation)."""
    st.session_state.pop(_RUNNING, None)
    gen = handle.result(timeout=handle.grace_s + door.WAIT_S)
    if gen.ended == "stopped":
        st.session_state[_STOPPED] = (args, gen)
    else:
        results.CACHE.put((GENERATION_CACHE, args, (("end", True),)), gen, 600)  # door.cached's key
    return gen


def ending(ckpt, gen, n: int) -> str:
    """Where the generation stopped and why, in one sentence."""
    drawn = len(gen.new_ids)
    tokens = count(drawn, "new token")
    if gen.ended == "end token":
        end = escape_markdown(repr(ckpt.labels(gen.new_ids[-1:])[0]))
        return f"**Stopped at an end token**, {end}, after {tokens}: the model ended its text or turn."
    if gen.ended == "stopped":
        return f"**Stopped by you** (Stop) after {tokens} of {n}."
    return (
        f"**Stopped at the token limit**: {tokens}, as *New tokens* asks — the model had not ended, so "
        "the text may stop mid-word or mid-sentence."
    )


def generated_rows(ckpt, gen) -> tuple[list[str], list[str], list[dict]]:
    """The whole sequence's tokens (visible), the prompt's and new raw pieces, and the new tokens' table."""
    raw = ckpt.labels(gen.output.ids)
    new_raw = raw[gen.prompt_length :]
    table = [
        {"step": i + 1, "token": repr(t), "probability when drawn": f"{p:.2%}"}
        for i, (t, p) in enumerate(zip(new_raw, gen.probabilities, strict=True))
    ]
    return raw, formats.tokens(raw), table
