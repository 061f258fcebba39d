"""Step 7: rotary positions (RoPE, Su et al., 2021) — where the tokens are, or how far apart?

RoPE turns q and k by an angle proportional to their position before the
dot product, so q·k sees only the difference of the angles. The answer is
computed, not asserted: a query and a key of the app's RoPE configuration
(`rope_base`), turned by `attnviz.reference.rope`, are scored at shifted
positions and at other distances, and compared with positions *added* to
the input (the original Transformer's sinusoids), whose score moves with
the pair.
"""

from __future__ import annotations

import numpy as np

from attnviz import reference
from attnviz.lessons.basics import run, tiny_config
from attnviz.lessons.core import CHOICE, Exercise, Link, Part, config_seed, rng

BASE = 10_000.0
WIDTH = 8  # d_k of the example
SPAN = 24  # positions drawn in the figure


def sinusoids(length: int, width: int) -> np.ndarray:
    """`(length, width)`: the original Transformer's added position code (Vaswani et al., 2017)."""
    angle = np.arange(length)[:, None] * BASE ** (-np.arange(0, width, 2) / width)
    return np.concatenate([np.sin(angle), np.cos(angle)], axis=-1)


def rope_score(q: np.ndarray, k: np.ndarray, m: int, n: int) -> float:
    """q·k with q at position m and k at position n, both turned by RoPE."""
    length = max(m, n) + 1
    return float(
        reference.rope(np.tile(q, (length, 1)), BASE)[m] @ reference.rope(np.tile(k, (length, 1)), BASE)[n]
    )


def added_score(q: np.ndarray, k: np.ndarray, m: int, n: int) -> float:
    """q·k with the sinusoidal position code added to each vector instead."""
    pe = sinusoids(max(m, n) + 1, len(q))
    return float((q + pe[m]) @ (k + pe[n]))


def positions(seed: int, step: int = 6) -> Exercise:
    """With RoPE, does the q·k of two tokens depend on where they are or how far apart?"""
    g = rng(seed, step)
    m, gap, shift = int(g.integers(0, 6)), int(g.integers(1, 6)), int(g.integers(3, 12))
    n = m + gap
    cfg = tiny_config(config_seed(seed, step, 0), n + 1, WIDTH, rope_base=BASE)
    r = run(cfg)  # the app's run: q and k before they are turned
    q, k = r["q_heads"][m], r["k_heads"][n]
    here, moved = rope_score(q, k, m, n), rope_score(q, k, m + shift, n + shift)
    farther = rope_score(q, k, m, n + 1)
    # over every start at this distance, and over every distance from this start
    along = np.array([rope_score(q, k, s, s + gap) for s in range(SPAN)])
    apart = np.array([rope_score(q, k, m, m + d) for d in range(SPAN)])
    shift_free, distance_matters = np.ptp(along) < 1e-9, np.ptp(apart) > 1e-6
    options = (
        "Only how far apart they are (n − m)",
        "Where they are (m and n themselves)",
        "Neither: RoPE leaves q·k as it was",
    )
    answer = 0 if shift_free and distance_matters else 1 if not shift_free else 2
    added = np.array([added_score(q, k, s, s + gap) for s in range(SPAN)])
    numbers = (
        f"q·k at positions ({m}, {n}) = {here:.3f}; moved {shift} places to ({m + shift}, {n + shift}) = "
        f"{moved:.3f}; one place farther apart, ({m}, {n + 1}) = {farther:.3f}."
    )

    def check(choice: int) -> tuple[bool, str]:
        if choice == answer:
            return True, (
                f"Right. {numbers} RoPE turns q by angle m·θ and k by n·θ; a dot product of two turned vectors "
                "sees only the angle between them, (n − m)·θ."
            )
        if choice == 1:
            return False, (
                "Moving both tokens turns q and k by the same extra angle. Does a dot product change when "
                "both vectors turn together?"
            )
        return False, (
            "RoPE does change q·k: q is turned by m·θ and k by n·θ. Which of m and n does the angle between "
            "them depend on?"
        )

    return Exercise(
        step=step,
        key="positions",
        title="Positions",
        seed=seed,
        intro=(
            "Attention by itself ignores order: shuffle the tokens and each one gets the same weights. Models add "
            "position. **RoPE** (rotary position embedding, used by Llama, SmolLM2 …) **turns** q and k before the "
            "dot product: the vector at position p is rotated by p·θ in each pair of features."
        ),
        given=(
            f"Two tokens: a query at position **m = {m}** and a key at position **n = {n}**, "
            f"d_k = {WIDTH}, base {BASE:,.0f}. Now both move {shift} places to the right."
        ),
        parts=(
            Part(
                "With RoPE, the q·k of two tokens depends on…",
                CHOICE,
                answer,
                check,
                options[answer],
                options=options,
            ),
        ),
        hint="Rotate two arrows by the same angle. Does the angle between them change?",
        explanation=(
            f"{numbers} Along every start position at distance {gap} the RoPE score stays {here:.3f}; with the "
            f"sinusoids *added* instead it wanders between {added.min():.2f} and {added.max():.2f}."
        ),
        data={"rope": along, "added": added, "gap": gap, "q": q, "k": k},
        link=Link(
            "steps",
            "Open this in Step by step (RoPE)",
            cfg,
            {"steps.current": "Q·RoPE", "steps.pos": str(m)},
        ),
    )
