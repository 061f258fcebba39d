"""Circuits: the induction head, what ablating it costs, and which head carries a name — on SmolLM2.

- `induction`: on a random sequence repeated once, which of four heads is the induction head (Olsson et
  al., 2022)? The four are the role scan's best head for each role (`attnviz.interp.roles`).
- `ablation`: zero-ablate that head; does the loss on the repeated half go up, down or stay? And for a
  random head? (`attnviz.interp.circuits.induction_ablation`, the Interpretability page's test.)
- `patching`: on an indirect-object pair (Wang et al., 2022), which of four heads restores most of the
  clean − corrupted logit difference when patched? (`attnviz.interp.patching.sweep`)
- `attribution`: does attribution patching, one backward pass (Nanda, 2023), agree for that head?
  (`attnviz.interp.attribution`)

The seed picks one of `SEQUENCES` scan sequences and one of `PAIRS`, so a class shares a few runs
(kept per process, `checkpoints.kept`). The sweep covers the last third of the layers (`swept_layers`):
on SmolLM2 the heads that move the answer sit there, and a late layer's patched runs are short.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from attnviz import formats, interp
from attnviz.interp import circuits as ablations
from attnviz.interp import patching as patches
from attnviz.interp import roles
from attnviz.lessons import checkpoints
from attnviz.lessons.core import CHOICE, Exercise, Link, Part, rng

LESSON = "circuits"
HALF = 10  # random tokens per half of the scan's sequence
SEQUENCES = 4  # scan sequences the seeds share
SAME = 0.2  # nats per token: a loss change smaller than this is "about the same"
CLOSE = 0.1  # an estimate within this of the exact share "agrees"
ROLE_NAMES = {
    "previous_token": "previous-token",
    "duplicate_token": "duplicate-token",
    "first_token": "first-token (sink)",
    "induction": "induction",
}


class Pair(NamedTuple):
    """A clean prompt, a corrupted one of the same length, and the two tokens compared."""

    clean: str
    corrupted: str
    answer: str | int
    wrong: str | int


# Indirect-object identification: the clean prompt's answer is the name that was not repeated.
PAIRS = (
    Pair(
        "When Mary and John went to the store, John gave a drink to",
        "When Mary and John went to the store, Mary gave a drink to",
        " Mary",
        " John",
    ),
    Pair(
        "When Tom and Anna went to the park, Anna gave a ball to",
        "When Tom and Anna went to the park, Tom gave a ball to",
        " Tom",
        " Anna",
    ),
    Pair(
        "After Lisa and Mark met at the cafe, Mark handed a book to",
        "After Lisa and Mark met at the cafe, Lisa handed a book to",
        " Lisa",
        " Mark",
    ),
)


def name(head) -> str:
    return formats.head(head[0], head[1])


def _shared(seed: int, stream: int, count: int) -> int:
    """Which shared run a seed uses (its own stream, so every step of a seed picks the same one)."""
    return int(rng(seed, stream, LESSON).integers(count))


@checkpoints.kept
def role_scan(ckpt, sequence: int) -> roles.RoleScan:
    """The role scan of one repeated random sequence (`2·HALF` tokens)."""
    return roles.scan(ckpt, checkpoints.framework(), half=HALF, n=1, seed=sequence)


@checkpoints.kept
def ablated(ckpt, sequence: int) -> ablations.AblationComparison:
    """The scan's top induction head ablated, then random single heads (`RANDOM_DRAWS` of them)."""
    return ablations.induction_ablation(
        ckpt, role_scan(ckpt, sequence), 1, checkpoints.framework(), seed=sequence
    )


def swept_layers(layers: int) -> range:
    """The last third of the layers (at least one): what the lesson's sweep patches."""
    return range(layers - max(1, layers // 3), layers)


@checkpoints.kept
def swept(ckpt, pair: Pair) -> patches.PatchingResult:
    """The patching sweep of `pair` over `swept_layers`."""
    layers = swept_layers(ckpt.config.num_hidden_layers)
    return patches.sweep(ckpt, *pair, checkpoints.framework(), layers=layers)


@checkpoints.kept
def estimated(ckpt, pair: Pair) -> patches.PatchingResult:
    """Attribution patching's estimate for every head of `pair`."""
    return interp.attribution(ckpt, *pair, checkpoints.framework())


def _scan_link(sequence: int) -> Link:
    return Link(
        "interpret",
        "Open the role scan on the Interpretability page",
        {},
        {
            "interp.checkpoint": checkpoints.SMOLLM2,
            "interp.half": str(HALF),
            "interp.n": "1",
            "interp.seed": str(sequence),
        },
    )


def induction(seed: int, step: int = 0, *, ckpt=None) -> Exercise:
    """Which of four heads, each the scan's best at one role, is the induction head?"""
    ckpt = ckpt or checkpoints.load()
    sequence = _shared(seed, 90, SEQUENCES)
    found = role_scan(ckpt, sequence)
    L, H = found.scores["induction"].shape
    heads, picked_for = [], []
    for role in ("induction", "previous_token", "duplicate_token", "first_token"):
        best = next((lay, h) for lay, h, _ in found.top(role, L * H) if (lay, h) not in heads)
        heads.append(best)
        picked_for.append(role)
    order = rng(seed, step, LESSON).permutation(len(heads))
    heads, picked_for = [heads[i] for i in order], [picked_for[i] for i in order]
    answer = picked_for.index("induction")
    options = tuple(name(h) for h in heads)
    score = {role: [float(found.scores[role][h]) for h in heads] for role in ROLE_NAMES}
    stripe = HALF - 1
    positions = tuple(str(t) for t in range(2 * HALF))

    def check(choice: int) -> tuple[bool, str]:
        s = score["induction"][choice]
        if choice == answer:
            return True, (
                f"Right: {options[choice]}'s induction score is {s:.2f}: from each token of the second copy, on "
                f"average {s:.0%} of its attention goes to the token that came *after* the earlier copy of itself "
                f"(key t − {stripe}), the token it then predicts."
            )
        role = picked_for[choice]
        return False, (
            f"{options[choice]} is the scan's best **{ROLE_NAMES[role]}** head ({score[role][choice]:.2f}; "
            f"induction only {s:.2f}). An induction head's second half lights up a stripe {stripe} cells left "
            "of the diagonal: the token after the earlier copy."
        )

    return Exercise(
        step=step,
        key="induction",
        title="The induction head",
        seed=seed,
        intro=(
            "Give a model random tokens, then the same tokens again. The first half is unpredictable; the second is "
            "easy *if* the model can look back: find the earlier copy of the current token and predict what came "
            "after it. Heads that do this are **induction heads**, and they appear in every language model."
        ),
        given=(
            f"**{ckpt.name}** reads {HALF} random tokens twice ({2 * HALF} tokens, positions 0 … {2 * HALF - 1}). "
            "Four of its heads, each drawn over the sequence (rows: queries, columns: keys; a printed sheet "
            "lists the second copy's rows):"
        ),
        parts=(
            Part("Which head is the **induction head**?", CHOICE, answer, check, options[answer], options),
        ),
        hint="Look at the second half's rows. Where is the earlier copy of the current token, and where its successor?",
        explanation=(
            "The scan's scores for the four: "
            + "; ".join(
                f"{options[i]} induction {score['induction'][i]:.2f}, previous-token "
                f"{score['previous_token'][i]:.2f}, duplicate-token {score['duplicate_token'][i]:.2f}, first-token "
                f"{score['first_token'][i]:.2f}"
                for i in range(len(heads))
            )
            + f". **{options[answer]}** is the induction head; the figure is the whole scan."
        ),
        data={
            "panels": np.stack([found.attentions[h] for h in heads]),  # (4, T, T)
            "names": options,
            "tokens": found.tokens,
            "scores": found.scores,
        },
        link=_scan_link(sequence),
        tables=tuple(
            (o, found.attentions[h][HALF:], positions[HALF:], positions)
            for o, h in zip(options, heads, strict=True)
        ),
        lesson=LESSON,
    )


def _direction(change: float) -> int:
    """0 up, 1 down, 2 about the same (within `SAME`)."""
    return 0 if change > SAME else 1 if change < -SAME else 2


def ablation(seed: int, step: int = 1, *, ckpt=None) -> Exercise:
    """Zero-ablate the induction head: does the loss on the repeated half go up, down or stay? A random head?"""
    ckpt = ckpt or checkpoints.load()
    sequence = _shared(seed, 90, SEQUENCES)
    found, cmp = role_scan(ckpt, sequence), ablated(ckpt, sequence)
    head = cmp.top_heads[0]
    moves = (
        "It goes up: the model predicts the repeat worse",
        "It goes down: the model predicts the repeat better",
        f"It stays about the same (within ±{SAME} nats)",
    )
    top, random = cmp.top - cmp.baseline, cmp.random_mean - cmp.baseline
    answers = (_direction(top), _direction(random))
    strong = found.scores["induction"] > 0.3
    others = int(strong.sum() - strong[head])  # other heads that also copy on this sequence
    numbers = (
        f"the loss on the repeated half is {cmp.baseline:.2f} nats per token; without {name(head)} "
        f"{cmp.top:.2f} ({top:+.2f}); without one random head {cmp.random_mean:.2f} on average ({random:+.2f}, "
        f"{len(cmp.random)} draws)"
    )

    def induction_check(choice: int) -> tuple[bool, str]:
        if choice == answers[0]:
            return True, f"Right: {numbers}."
        return False, (
            f"Not so. {name(head)} fetches the token after the earlier copy, and {others} other heads score "
            "above 0.3 for induction on this sequence. How much of the repeat's prediction rests on this one head?"
        )

    def random_check(choice: int) -> tuple[bool, str]:
        if choice == answers[1]:
            return True, f"Right: {numbers}. A head picked at random rarely does the copying."
        return (
            False,
            "A random head is rarely part of the copying. How much should the repeat's loss move without it?",
        )

    return Exercise(
        step=step,
        key="ablation",
        title="Ablating it",
        seed=seed,
        intro=(
            "A score says where a head looks, not that the model needs it. Test it: **zero-ablate** the head (remove "
            "its output) and measure the model's loss on the repeated half, the half an induction head can predict. "
            "Then do the same with a random head, to compare."
        ),
        given=(
            f"The same {2 * HALF} tokens. The scan's induction head is **{name(head)}**. With nothing ablated "
            f"the loss on the repeated half is **{cmp.baseline:.2f}** nats per token."
        ),
        parts=(
            Part(
                f"Zero-ablate {name(head)}. The loss on the repeated half…",
                CHOICE,
                answers[0],
                induction_check,
                moves[answers[0]],
                moves,
            ),
            Part(
                "Ablate one random other head instead (the mean of a few draws). The loss…",
                CHOICE,
                answers[1],
                random_check,
                moves[answers[1]],
                moves,
            ),
        ),
        hint="The loss is low on the repeat only while the model can copy. Which head does the copying?",
        explanation=f"{numbers[0].upper()}{numbers[1:]}. The bars are the Interpretability page's *From toy to real* test.",
        data={"baseline": cmp.baseline, "top": cmp.top, "random": cmp.random, "head": name(head)},
        link=_scan_link(sequence),
        lesson=LESSON,
    )


# -- patching -------------------------------------------------------------------------------------------


def _ranked(result: patches.PatchingResult) -> list[tuple[int, int]]:
    """The swept heads, most restoring first."""
    order = np.argsort(-np.nan_to_num(result.restored, nan=-np.inf), axis=None, kind="stable")
    H = result.restored.shape[1]
    return [(int(i // H), int(i % H)) for i in order if result.done.flat[i]]


def _pair_text(result: patches.PatchingResult, pair: Pair) -> str:
    return (
        f"Clean: *{pair.clean}* → logit(“{result.answer}”) − logit(“{result.wrong}”) = "
        f"**{result.clean_diff:.2f}**  \nCorrupted: *{pair.corrupted}* → **{result.corrupted_diff:.2f}**"
    )


def _patch_link(pair: Pair) -> Link:
    answer, wrong = (str(t) for t in (pair.answer, pair.wrong))
    return Link(
        "interpret",
        "Open the full sweep on the Interpretability page",
        {},
        {
            "interp.checkpoint": checkpoints.SMOLLM2,
            "interp.clean": pair.clean,
            "interp.corrupted": pair.corrupted,
            "interp.answer": answer,
            "interp.wrong": wrong,
            "interp.tab": "Patching",
        },
    )


def patching(seed: int, step: int = 2, *, ckpt=None, pairs: tuple[Pair, ...] | None = None) -> Exercise:
    """Which of four heads restores most of the logit difference when patched from clean into corrupted?"""
    ckpt = ckpt or checkpoints.load()
    pairs = pairs or PAIRS
    pair = pairs[_shared(seed, 91, len(pairs))]
    result = swept(ckpt, pair)
    ranked = _ranked(result)
    g = rng(seed, step, LESSON)
    near = [ranked[i] for i in sorted(g.choice(np.arange(1, min(8, len(ranked))), size=2, replace=False))]
    rest = [h for h in ranked[1:] if h not in near]
    heads = [ranked[0], *near, rest[int(g.integers(len(rest)))]]
    heads = [heads[i] for i in g.permutation(len(heads))]
    options = tuple(name(h) for h in heads)
    answer = heads.index(ranked[0])
    gap = result.clean_diff - result.corrupted_diff
    layers = swept_layers(result.restored.shape[0])

    def check(choice: int) -> tuple[bool, str]:
        r = float(result.restored[heads[choice]])
        if choice == answer:
            patched = result.corrupted_diff + r * gap
            return True, (
                f"Right: patched alone, {options[choice]} moves the difference from {result.corrupted_diff:.2f} "
                f"to {patched:.2f}: ({patched:.2f} − ({result.corrupted_diff:.2f})) / ({result.clean_diff:.2f} − "
                f"({result.corrupted_diff:.2f})) = {r:.2f} of the way back. It carries the name to the last token."
            )
        return False, (
            f"Patching {options[choice]} restores {r:.2f} of the difference; another option restores more. The heads "
            "that matter here read a name from the last token's position and write it into the prediction."
        )

    return Exercise(
        step=step,
        key="patching",
        title="Activation patching",
        seed=seed,
        intro=(
            "Which heads carry the answer? **Activation patching** runs the corrupted prompt again with one head's "
            "output taken from the clean run, and measures how much of the clean − corrupted logit difference comes "
            "back: 1 = all of it, 0 = none."
        ),
        given=_pair_text(result, pair)
        + f"  \nThe sweep patches every head of layers {layers.start} … {layers.stop - 1}, the last third.",
        parts=(
            Part(
                "Which head restores the **most** of the difference when patched?",
                CHOICE,
                answer,
                check,
                options[answer],
                options,
            ),
        ),
        hint="The answer is a name. Which head would move a name from earlier in the sentence to the last token?",
        explanation=(
            "Restored when patched: "
            + ", ".join(f"{o} {float(result.restored[h]):.2f}" for o, h in zip(options, heads, strict=True))
            + f". **{options[answer]}** restores the most of any head swept; the map shows them all."
        ),
        data={"restored": result.restored, "heads": options},
        link=_patch_link(pair),
        lesson=LESSON,
    )


def attribution(seed: int, step: int = 3, *, ckpt=None, pairs: tuple[Pair, ...] | None = None) -> Exercise:
    """Does attribution patching's estimate agree with exact patching for the top head, and on the top head?"""
    ckpt = ckpt or checkpoints.load()
    pairs = pairs or PAIRS
    pair = pairs[_shared(seed, 91, len(pairs))]
    exact, approx = swept(ckpt, pair), estimated(ckpt, pair)
    layers = list(swept_layers(exact.restored.shape[0]))
    top = _ranked(exact)[0]
    # Both as the student reads them (2 decimals): "close" is judged on the numbers shown.
    e, a = round(float(exact.restored[top]), 2), round(float(approx.restored[top]), 2)
    closeness = (
        f"Close: within ±{CLOSE} of {e:.2f}",
        f"Too high: more than {CLOSE} above {e:.2f}",
        f"Too low: more than {CLOSE} below {e:.2f}",
    )
    close = 0 if round(abs(a - e), 2) <= CLOSE else 1 if a > e else 2
    grid = approx.restored[layers]  # (swept layers, H)
    H = grid.shape[1]
    best = (layers[int(np.argmax(grid) // H)], int(np.argmax(grid) % H))
    same = ("Yes: the same head", "No: another head")
    found = 0 if best == top else 1
    match = interp.agreement(exact.restored[layers], grid, k=min(5, grid.size))
    summary = (
        f"for {name(top)} attribution estimates {a:.2f} against {e:.2f} exact; its largest head is {name(best)} "
        f"({float(approx.restored[best]):.2f}). Over the {grid.size} heads swept, Spearman's ρ = {match.rho:.2f} "
        f"and {match.overlap} of the exact top {match.k} are in the estimate's top {match.k}"
    )

    def close_check(choice: int) -> tuple[bool, str]:
        if choice == close:
            return True, f"Right: {summary}."
        return False, (
            "Attribution patching is a straight-line estimate taken at the corrupted run. Where a head's effect "
            "runs through a saturated softmax or a sharp nonlinearity, a straight line can miss it, either way; "
            "where the change is gentle it follows closely. Which is this head?"
        )

    def same_check(choice: int) -> tuple[bool, str]:
        if choice == found:
            return True, f"Right: {summary}."
        return (
            False,
            "Compare the two maps' largest cells: the estimate can rank heads differently from the sweep.",
        )

    return Exercise(
        step=step,
        key="attribution",
        title="Attribution patching",
        seed=seed,
        intro=(
            "Exact patching runs the model once per head. **Attribution patching** estimates every head's effect at "
            "once: the change in its output times the gradient of the logit difference, from one forward and one "
            "backward pass. Is the shortcut right?"
        ),
        given=_pair_text(exact, pair)
        + f"  \nExact patching: **{name(top)}** restores **{e:.2f}**, the most.",
        parts=(
            Part(
                f"Attribution patching's estimate for {name(top)} is…",
                CHOICE,
                close,
                close_check,
                closeness[close],
                closeness,
            ),
            Part(
                f"Is the estimate's largest head (layers {layers[0]} … {layers[-1]}) also {name(top)}?",
                CHOICE,
                found,
                same_check,
                same[found],
                same,
            ),
        ),
        hint="A first-order estimate is exact for a straight line. How straight is a softmax that is nearly 0 or 1?",
        explanation=f"{summary[0].upper()}{summary[1:]}. Each point of the figure is one head: on the diagonal the "
        "estimate is exact.",
        data={
            "exact": exact.restored[layers],
            "estimate": grid,
            "layers": layers,
            "highlight": (layers.index(top[0]), top[1]),
        },
        link=_patch_link(pair),
        lesson=LESSON,
    )
