"""Modern attention, the logit lens: at which layer does SmolLM2 first put its answer in the top 5?

The logit lens (nostalgebraist, 2020) reads the residual stream after every layer through the final
norm and the unembedding (`attnviz.interp.lens`, the Interpretability page's tab). The student
predicts where the model's own next token first enters the lens's top 5, in one of four bands
of layers, then sees the lens.
"""

from __future__ import annotations

import numpy as np

from attnviz.interp import lens as logit_lens
from attnviz.lessons import checkpoints
from attnviz.lessons.core import CHOICE, Exercise, Link, Part, rng

LESSON = "modern"
TOP = 5  # the logit lens's top k
# Prompts SmolLM2 completes with one clear token (the answer is the model's own top token).
PROMPTS = (
    "The capital of France is",
    "The opposite of hot is",
    "Monday, Tuesday,",
    "One, two, three,",
    "The Eiffel Tower is in the city of",
    "The sun rises in the",
)


@checkpoints.kept
def lens_reading(ckpt, prompt: str) -> dict:
    """The lens on `prompt`'s last token: the table (top `TOP` per layer and position), the tokens, the
    answer (the model's own top token) and its rank after each layer, `(L + 1,)`."""
    out = ckpt.run(prompt, checkpoints.framework())
    table = logit_lens.read(ckpt, out, TOP)
    T = len(out.ids)
    last = ckpt.logit_lens(out, positions=slice(T - 1, T))[:, 0, : ckpt.n_tokens]  # (L + 1, V)
    answer = int(table.ids[-1, -1, 0])
    ranks = (last > last[:, answer : answer + 1]).sum(-1)  # (L + 1,) 0 = top
    return {"table": table, "tokens": ckpt.labels(out.ids), "answer": answer, "ranks": ranks}


def row_name(row: int) -> str:
    """A lens row: 0 the embeddings, r the residual stream after layer r − 1."""
    return "the embeddings" if row == 0 else f"after L{row - 1}"


def bands(layers: int) -> list[range]:
    """The lens's rows 0 … L in four bands: three thirds of the rows before the last, and the last."""
    thirds = np.array_split(np.arange(layers), 3)
    return [range(int(t[0]), int(t[-1]) + 1) for t in thirds if len(t)] + [range(layers, layers + 1)]


def band_text(band: range, layers: int) -> str:
    if band.start == layers:
        return f"only after the last layer, L{layers - 1} (the output)"
    return f"from {row_name(band.start)} to {row_name(band.stop - 1)}"


def lens(seed: int, step: int = 5, *, ckpt=None) -> Exercise:
    """At which layer does the logit lens first put the model's answer among its top 5?"""
    ckpt = ckpt or checkpoints.load()
    prompt = PROMPTS[int(rng(seed, step, LESSON).integers(len(PROMPTS)))]
    reading = lens_reading(ckpt, prompt)
    table, answer_id = reading["table"], reading["answer"]
    L = table.ids.shape[0] - 1
    tops = table.ids[:, -1]  # (L + 1, TOP): the last token's top tokens after each layer
    first = int(np.flatnonzero((tops == answer_id).any(-1))[0])
    word = table.labels[-1, -1, 0]
    groups = bands(L)
    options = tuple(band_text(b, L) for b in groups)
    answer = next(i for i, b in enumerate(groups) if first in b)
    p_first = float(table.probs[first, -1][list(tops[first]).index(answer_id)])
    p_out = float(table.probs[-1, -1, 0])

    def top_text(row: int) -> str:
        return ", ".join(f"“{t}”" for t in table.labels[row, -1])

    def check(choice: int) -> tuple[bool, str]:
        if choice == answer:
            return True, (
                f"Right: “{word}” first enters the top {TOP} {row_name(first)} (p = {p_first:.3f}); at the "
                f"output it is the top token with p = {p_out:.2f}. Before that the lens reads {top_text(0)} "
                "and the like: the later layers write the answer into the residual stream."
            )
        end = groups[choice].stop - 1
        if end < first:
            return False, (
                f"{row_name(end).capitalize()}, the lens's top {TOP} at the last token are {top_text(end)}: "
                f"“{word}” is not among them yet."
            )
        return False, f"“{word}” is already among the lens's top {TOP} before that."

    return Exercise(
        step=step,
        key="lens",
        title="The logit lens",
        seed=seed,
        intro=(
            "A decoder writes its prediction into the **residual stream**, layer by layer. The **logit lens** reads "
            "that stream early: apply the final norm and the unembedding after any layer, as if the model stopped "
            "there. When does the answer appear?"
        ),
        given=(
            f"**{ckpt.name}** ({L} layers) reads *{prompt}* and continues with **“{word}”**. The lens reads the "
            "last token's stream after every layer."
        ),
        parts=(
            Part(
                f"Where does “{word}” first appear among the lens's **top {TOP}**? Predict, then look.",
                CHOICE,
                answer,
                check,
                options[answer],
                options,
            ),
        ),
        hint="Which layers would you expect to turn a sentence into a fact: the first ones, or the last ones?",
        explanation=(
            f"“{word}” first enters the top {TOP} **{row_name(first)}** (its rank after each layer is in the "
            f"second figure); at the output p = {p_out:.2f}. Early layers' streams read as generic tokens "
            f"({top_text(1)}): what the token *is* comes first, what comes *next* late."
        ),
        data={
            "probs": table.probs,
            "labels": table.labels,
            "tokens": reading["tokens"],
            "ranks": reading["ranks"],
            "word": word,
            "first": first,
        },
        link=Link(
            "interpret",
            "Open this on the Interpretability page (the logit lens)",
            {},
            {"interp.checkpoint": ckpt.name, "interp.text": prompt, "interp.tab": "Logit lens"},
        ),
        lesson=LESSON,
    )
