"""Steps 1–3: scores, scaling, softmax — on a configuration the app can open.

Each instance is one app configuration (`AttentionSpec` with one head and no
bias, float64), so "Open this in Step by step" shows exactly the numbers the
exercise gives. The seed picks the configuration among `TRIES` candidates:
the first whose answer is clear once the numbers are rounded to 2 decimals.
"""

from __future__ import annotations

import numpy as np

from attnviz import reference
from attnviz.interp.scores import row_entropy
from attnviz.lessons.core import (
    CHOICE,
    NUMBERS,
    TRIES,
    Exercise,
    Link,
    Part,
    app_config,
    config_seed,
    first,
    hand_rounded,
    matrix_markdown,
    names,
    rng,
)
from attnviz.params import init_params, make_inputs
from attnviz.spec import AttentionSpec

SCORE_MARGIN = 0.15  # the top key beats the next by this much, on the numbers as shown
SOFTMAX_TOLERANCE = 0.015  # a weight typed to two decimals, with room for a calculator's rounding
SMALL_DK, LARGE_DK = 4, 256
SHOWN_DECIMALS = 2  # the decimals the exercises print their inputs to


def tiny_config(seed: int, length: int, d_model: int = 2, **extra) -> dict:
    """The app configuration of a one-head, bias-free float64 run (keys of `attnviz.settings.DEFAULTS`)."""
    return app_config(
        len_q=length, d_model=d_model, n_heads=1, bias=False, dtype="float64", seed=seed, **extra
    )


def run(cfg: dict) -> dict[str, np.ndarray]:
    """The reference's steps for a `tiny_config` (what the app computes for that link), head 0 of item 0."""
    extra = {name: cfg[name] for name in ("scale", "rope_base") if cfg.get(name)}
    spec = AttentionSpec(
        len_q=cfg["len_q"],
        d_model=cfg["d_model"],
        n_heads=1,
        bias=False,
        dtype="float64",
        seed=cfg["seed"],
        **extra,
    )
    x_q, x_kv = make_inputs(spec)
    steps = reference.multi_head_attention(spec, init_params(spec), x_q, x_kv)
    return {
        name: value[0, 0]
        for name, value in steps.items()
        if name in ("q_heads", "k_heads", "scores", "scaled", "softmax")
    }


def shown(values: np.ndarray) -> np.ndarray:
    """`values` as the exercise prints them (2 decimals): every answer key is computed from these."""
    return np.round(values, SHOWN_DECIMALS)


def _dot_text(q, k) -> str:
    return " + ".join(f"({a:.2f})({b:.2f})" for a, b in zip(q, k, strict=True))


def scores(seed: int, step: int = 0) -> Exercise:
    """Which key gets the highest score for query q1?"""

    def clear(cfg):
        r = run(cfg)
        s = np.sort(shown(r["q_heads"])[0] @ shown(r["k_heads"]).T)
        return s[-1] - s[-2] >= SCORE_MARGIN

    cfg = first((tiny_config(config_seed(seed, step, t), 3) for t in range(TRIES)), clear)
    r = run(cfg)
    Q, K = shown(r["q_heads"]), shown(r["k_heads"])  # what the student sees
    S = Q @ K.T  # (3, 3) the key computed from those numbers, as the student does
    qs, ks = names("q", 3), names("k", 3)
    best = int(S[0].argmax())
    longest = int(np.linalg.norm(K, axis=1).argmax())

    def check(choice: int) -> tuple[bool, str]:
        worked = f"q1·{ks[choice]} = {_dot_text(Q[0], K[choice])} = **{hand_rounded(S[0, choice])}**"
        if choice == best:
            others = ", ".join(f"{ks[j]}: {hand_rounded(S[0, j])}" for j in range(3) if j != best)
            return True, f"Right: {worked}, above the others ({others})."
        why = f"{worked}. Work out q1's other two scores: one of them is larger."
        if choice == longest:
            why += f" {ks[choice]} is the longest key, but a score rewards pointing the same way as q1, not size alone."
        return False, why

    return Exercise(
        step=step,
        key="scores",
        title="Scores",
        seed=seed,
        intro=(
            "Each query compares itself with every key by a **dot product**: multiply matching entries and add. "
            "The bigger the score, the more that key will count. All the scores together are the matrix QKᵀ."
        ),
        given="**Q** (one row per query)\n\n"
        + matrix_markdown(Q, qs, ("d1", "d2"))
        + "\n**K** (one row per key)\n\n"
        + matrix_markdown(K, ks, ("d1", "d2")),
        parts=(
            Part(
                "Which key gets the **highest score** for query **q1**?",
                CHOICE,
                best,
                check,
                ks[best],
                options=ks,
            ),
        ),
        hint="The score of key j is q1·kj = q1[d1]·kj[d1] + q1[d2]·kj[d2]. Work out all three; mind the signs.",
        explanation=(
            "q1's scores: "
            + "; ".join(f"q1·{ks[j]} = {_dot_text(Q[0], K[j])} = {hand_rounded(S[0, j])}" for j in range(3))
            + f". The highest is **{ks[best]}**. The heatmap is the whole QKᵀ: row i holds query i's scores."
        ),
        data={"scores": r["scores"], "q_labels": qs, "k_labels": ks},
        link=Link(
            "steps",
            "Open this in Step by step",
            cfg,
            {"steps.current": "QKᵀ", "steps.values": "true"},
        ),
    )


def scaling(seed: int, step: int = 1) -> Exercise:
    """Without 1/√d_k, does softmax get sharper or flatter when d_k grows from 4 to 256?"""
    options = (
        "Sharper: one key takes nearly all the weight",
        "Flatter: the weights move towards equal",
        "About the same: softmax does not depend on d_k",
    )
    length = 6
    row = int(rng(seed, step).integers(length))

    def pair(t: int):
        c = config_seed(seed, step, t)
        return tuple(run(tiny_config(c, length, d, scale=1.0)) for d in (SMALL_DK, LARGE_DK)), c

    def clear(found):
        (small, large), _ = found
        return large["softmax"][row].max() - small["softmax"][row].max() >= 0.2

    (small, large), c = first((pair(t) for t in range(TRIES)), clear)
    scaled_large = run(tiny_config(c, length, LARGE_DK))["softmax"]
    h_small, h_large = row_entropy(small["softmax"]).mean(), row_entropy(large["softmax"]).mean()
    answer = 0 if h_large < 0.8 * h_small else 1 if h_large > 1.25 * h_small else 2
    spread = [float(np.ptp(x["scores"][row])) for x in (small, large)]
    top = [float(x["softmax"][row].max()) for x in (small, large)]
    q = f"q{row + 1}"
    numbers = (
        f"Row {q}: its scores span {spread[0]:.1f} at d_k = {SMALL_DK} and {spread[1]:.1f} at d_k = {LARGE_DK}; "
        f"its top weight goes from {top[0]:.2f} to {top[1]:.2f}."
    )

    def check(choice: int) -> tuple[bool, str]:
        if choice == answer:
            return True, (
                f"Right. {numbers} A score is a sum of d_k products, so its spread grows like √d_k; "
                "softmax exponentiates the differences, and the largest score swallows the row."
            )
        return False, (
            f"Not quite. A score sums d_k products: at d_k = {LARGE_DK} there are 64× more terms than at "
            f"d_k = {SMALL_DK}. How much wider do {q}'s scores spread, and what does softmax do with bigger "
            "gaps between its inputs?"
        )

    return Exercise(
        step=step,
        key="scaling",
        title="Scaling",
        seed=seed,
        intro=(
            "Attention divides the scores by √d_k before the softmax. What is that for? "
            f"Here the same kind of random queries and keys are used at d_k = {SMALL_DK} and d_k = {LARGE_DK}, "
            "both **without** the division (scale = 1)."
        ),
        given=f"We watch query **{q}**'s row of {length} weights.",
        parts=(
            Part(
                f"When d_k grows from {SMALL_DK} to {LARGE_DK} without 1/√d_k, {q}'s softmax row gets…",
                CHOICE,
                answer,
                check,
                options[answer],
                options=options,
            ),
        ),
        hint="A score is q·k = q[1]k[1] + … + q[d_k]k[d_k]. What happens to a sum of more and more random terms?",
        explanation=(
            f"{numbers} Dividing by √{LARGE_DK} = {LARGE_DK**0.5:.0f} brings the spread back "
            f"(top weight {scaled_large[row].max():.2f} with the scale), so gradients do not vanish in a saturated "
            "softmax."
        ),
        data={
            "rows": {
                f"d_k = {SMALL_DK}, scale 1": small["softmax"][row],
                f"d_k = {LARGE_DK}, scale 1": large["softmax"][row],
                f"d_k = {LARGE_DK}, scale 1/√{LARGE_DK}": scaled_large[row],
            },
            "k_labels": names("k", length),
        },
        link=Link("explorer", "Open this in the explorer", tiny_config(c, length, LARGE_DK, scale=1.0)),
    )


def softmax(seed: int, step: int = 2) -> Exercise:
    """Type one row's softmax weights to two decimals."""
    row = int(rng(seed, step).integers(3))

    def clear(cfg):
        return run(cfg)["softmax"][row].max() >= 0.45

    cfg = first((tiny_config(config_seed(seed, step, t), 3) for t in range(TRIES)), clear)
    r = run(cfg)
    s = shown(r["scaled"][row])  # what the student sees
    w = np.exp(s - s.max()) / np.exp(s - s.max()).sum()  # the key from the scores as shown
    e = np.exp(s)
    ks, q = names("k", 3), f"q{row + 1}"

    def check(typed) -> tuple[bool, str]:
        typed = np.asarray(typed, dtype=float)
        off = np.abs(typed - w) > SOFTMAX_TOLERANCE
        if not off.any():
            return (
                True,
                f"Right: e^s / Σ e^s = {', '.join(f'{x:.2f}' for x in w)} (within ±{SOFTMAX_TOLERANCE}).",
            )
        if np.allclose(typed, s, atol=0.01):
            return False, "Those are the scores themselves; softmax turns them into shares of e^s."
        if np.allclose(typed, e, atol=0.02):
            return False, f"Those are the exponentials e^s; divide each by their sum ({e.sum():.2f})."
        if abs(typed.sum() - 1) > 0.03:
            return False, f"Your weights sum to {typed.sum():.2f}, but a softmax row always sums to 1."
        wrong = ", ".join(k for k, o in zip(ks, off, strict=True) if o)
        if np.argmax(typed) != np.argmax(s):
            return False, f"Off for {wrong}: the largest score must get the largest weight."
        return (
            False,
            f"Off by more than {SOFTMAX_TOLERANCE} for {wrong}: e^s of each score, divided by their sum.",
        )

    return Exercise(
        step=step,
        key="softmax",
        title="Softmax",
        seed=seed,
        intro=(
            "Softmax turns a row of scores into weights: **wⱼ = e^sⱼ / Σₖ e^sₖ**. Every weight is positive and the "
            "row sums to 1, so the output is a weighted average of the values."
        ),
        given=f"Query **{q}**'s scaled scores (QKᵀ/√d_k):\n\n" + matrix_markdown(s[None], (q,), ks),
        parts=(
            Part(
                f"Type {q}'s three weights to **two decimals** (a calculator is fine).",
                NUMBERS,
                tuple(float(x) for x in w),
                check,
                ", ".join(f"{x:.2f}" for x in w),
                options=ks,
            ),
        ),
        hint=f"Exponentiate each score (e^{s[0]:.2f} = {e[0]:.2f}), add the three, divide each by that sum.",
        explanation=(
            f"e^s = {', '.join(f'{x:.2f}' for x in e)}; their sum is {e.sum():.2f}; dividing gives "
            f"**{', '.join(f'{x:.2f}' for x in w)}**. The biggest score gets the biggest share, but never all of it."
        ),
        data={"scores": s, "weights": w, "k_labels": ks, "query": q},
        link=Link(
            "steps",
            "Open this in Step by step",
            cfg,
            {"steps.current": "softmax", "steps.values": "true"},
        ),
    )
