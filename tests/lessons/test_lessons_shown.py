"""Every answer key is computed from the numbers as the student sees them (issue 46, point 1).

An exercise prints its inputs rounded (2 decimals); a key computed from the unrounded numbers
disagrees with a student who worked from the page for some seeds (the softmax step's seed 0 showed
−1.87, −0.13, 0.42 and keyed 0.59 for 0.60). Here each key is recomputed from the exercise's own
printed text — the tables parsed back out of `given` — by NumPy, over many seeds.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal

import numpy as np
import pytest

from attnviz import lessons

SEEDS = range(300)  # seed 0 and 52 others of these were wrong before
_ROW = re.compile(r"^\| \*\*(\w+)\*\* \|(.*)\|$", re.M)


def printed_tables(markdown: str) -> list[np.ndarray]:
    """Every matrix printed in `markdown` (`lessons.core.matrix_markdown`), as the numbers shown."""
    tables, current = [], []
    for line in [*markdown.splitlines(), ""]:
        found = _ROW.match(line)
        if found:
            current.append([float(x) for x in found.group(2).split("|")])
        elif current:
            tables.append(np.array(current))
            current = []
    return tables


def by_hand(q_row, k_row) -> str:
    """q·k of two printed rows in exact decimal arithmetic, rounded half up as a student does."""
    exact = sum(Decimal(f"{a:.2f}") * Decimal(f"{b:.2f}") for a, b in zip(q_row, k_row, strict=True))
    return str(exact.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def two_decimals(values) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


@pytest.fixture(scope="module")
def softmax_steps():
    return [lessons.exercise(2, seed) for seed in SEEDS]


@pytest.fixture(scope="module")
def score_steps():
    return [lessons.exercise(0, seed) for seed in SEEDS]


def test_softmax_key_is_the_softmax_of_the_scores_shown(softmax_steps):
    for ex in softmax_steps:
        (shown,) = printed_tables(ex.given)  # (1, 3)
        e = np.exp(shown[0])
        key = two_decimals(e / e.sum())
        part = ex.parts[0]
        assert part.answer_text == key, (ex.seed, shown, part.answer_text, key)
        assert f"**{key}**" in ex.explanation, ex.seed
        typed = tuple(float(x) for x in key.split(", "))
        assert lessons.grade(ex, [typed]).right, ex.seed


def test_softmax_seed_0_keys_what_the_issue_computed_by_hand(softmax_steps):
    ex = softmax_steps[0]
    assert printed_tables(ex.given)[0].tolist() == [[-1.87, -0.13, 0.42]]
    assert ex.parts[0].answer_text == "0.06, 0.34, 0.60"


def test_score_key_and_worked_products_are_those_of_the_numbers_shown(score_steps):
    for ex in score_steps:
        Q, K = printed_tables(ex.given)  # (3, 2) each
        S = Q[0] @ K.T  # (3,) q1's scores from the printed numbers
        part = ex.parts[0]
        assert part.answer == int(S.argmax()), ex.seed
        for j in range(len(K)):
            products = " + ".join(f"({a:.2f})({b:.2f})" for a, b in zip(Q[0], K[j], strict=True))
            assert f"q1·k{j + 1} = {products} = {by_hand(Q[0], K[j])}" in ex.explanation, (ex.seed, j)
