"""The shape of an exercise: parts to answer, how each is checked, what the reveal shows.

An exercise is data: its question, its parts (each with the answer and a
`check` that says why a response is right or wrong), a hint, the worked
answer, the arrays its figures draw, and the app configuration that shows
the same computation. Every number in it is computed by the library
(`attnviz.reference`, `attnviz.heads`, `attnviz.masks`) from the seed.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import numpy as np

from attnviz.errors import SpecError

CHOICE, NUMBERS, SHAPE, CELLS = "choice", "numbers", "shape", "cells"
KINDS = (CHOICE, NUMBERS, SHAPE, CELLS)
MAX_SEED = 999_999  # lesson seeds 0 … MAX_SEED (derived configuration seeds stay below 2**31)
TRIES = 32  # candidate configurations per exercise when a seed's first draw is ambiguous


@dataclass(frozen=True)
class Part:
    """One answer the student gives.

    Attributes:
        prompt: the question of this part (markdown).
        kind: "choice" (an option index), "numbers" (a tuple of floats), "shape"
            (a tuple of ints) or "cells" (bool `(rows, columns)`, True = picked).
        answer: the right response, in the kind's form.
        check: response → `(right, why)`; `why` explains this response, right or wrong.
        answer_text: the answer as a person writes it (the answer key).
        options: choice: the options; numbers: each field's label; cells: the column labels.
        rows: cells: the row labels.
        row_label: cells: each row's question, `{row}` standing for the row's label.
        bounds, decimals: numbers: the range a field accepts and the decimals it shows (a weight
            is 0 … 1 to 2 decimals; a cache size in MiB or a count of tiles is not).
    """

    prompt: str
    kind: str
    answer: Any
    check: Callable[[Any], tuple[bool, str]]
    answer_text: str
    options: tuple[str, ...] = ()
    rows: tuple[str, ...] = ()
    row_label: str = "{row} cannot see"
    bounds: tuple[float, float] = (0.0, 1.0)
    decimals: int = 2


# What every exercise's computation assumes (AttentionSpec's defaults, random weights and inputs):
# written into each link, so the page opens the same computation whatever the app's defaults are.
PINNED: dict[str, Any] = {
    "input": "random",
    "weights": "random",
    "mode": "self",
    "batch": 1,
    "mask": "none",
    "bias": True,
    "dropout": 0.0,
    "training": False,
    "scale": 0.0,
    "residual_norm": False,
    "dtype": "float32",
    "d_k": 0,
    "d_v": 0,
    "n_kv_heads": 0,
    "rope_base": 0.0,
    "window": 0,
}


def app_config(**values) -> dict[str, Any]:
    """An app configuration (keys of `attnviz.settings.DEFAULTS`): `PINNED` with `values` over it."""
    return PINNED | values


@dataclass(frozen=True)
class Link:
    """Where the app shows the same computation.

    Attributes:
        page: the page's URL path (`attnviz.app.frame.pages.PageInfo.name`), e.g. "explorer".
        label: the link's text.
        config: the app configuration (keys of `attnviz.settings.DEFAULTS`, values off their defaults).
        page_keys: the page's own URL parameters (e.g. which step Step by step opens on).
    """

    page: str
    label: str
    config: dict[str, Any] = field(default_factory=dict)
    page_keys: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Exercise:
    """One step of the lesson for one seed.

    Attributes:
        step: 0-based position in its lesson's steps (`Lesson.all_steps`; for basics, `STEPS`).
        key, title: the step's name.
        seed: the lesson seed it was drawn from.
        intro: the idea, in two or three sentences (markdown).
        given: this instance's numbers (markdown).
        parts: what the student answers.
        hint: a nudge that does not give the answer away.
        explanation: the worked answer with the reference's numbers (markdown).
        data: the arrays the figures draw (`attnviz.app.lesson.figures`).
        link: the app page and configuration that show the same computation.
        tables: what a printed worksheet must show besides `given` (the app draws it as a figure):
            `(caption, values (R, C), row labels, column labels)`.
        lesson: the id of the lesson it belongs to (`attnviz.lessons.LESSONS`).
    """

    step: int
    key: str
    title: str
    seed: int
    intro: str
    given: str
    parts: tuple[Part, ...]
    hint: str
    explanation: str
    data: dict[str, Any]
    link: Link | None
    tables: tuple[tuple[str, np.ndarray, tuple[str, ...], tuple[str, ...]], ...] = ()
    lesson: str = "basics"

    @property
    def id(self) -> str:
        """The exercise's stable id, `lesson.key` (e.g. "basics.softmax"): what a class's answers are stored
        under, with the seed; it never depends on which models are installed."""
        return f"{self.lesson}.{self.key}"


@dataclass(frozen=True)
class Feedback:
    """The result of a check: right when every part is; one note per part saying why."""

    right: bool
    notes: tuple[tuple[bool, str], ...]


def grade(exercise: Exercise, responses: list[Any]) -> Feedback:
    """Check one response per part (None: not answered)."""
    notes = []
    for part, response in zip(exercise.parts, responses, strict=True):
        if response is None or (isinstance(response, str) and not response.strip()):
            notes.append((False, "Not answered yet."))
        else:
            notes.append(part.check(response))
    return Feedback(all(ok for ok, _ in notes), tuple(notes))


def check_seed(seed: Any) -> int:
    """A lesson seed as an int, or a `SpecError`."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed <= MAX_SEED:
        raise SpecError("seed", seed, f"an integer in 0 … {MAX_SEED:,}")
    return int(seed)


def rng(seed: int, step: int, lesson: str = "basics") -> np.random.Generator:
    """The generator of one step of one lesson seed (steps and lessons draw independently; the basics
    lesson's draws are those it has always made, so an old link gives the same exercise)."""
    if lesson == "basics":
        return np.random.default_rng([check_seed(seed), step])
    return np.random.default_rng([check_seed(seed), step, zlib.crc32(lesson.encode())])


def config_seed(seed: int, step: int, attempt: int) -> int:
    """The app configuration seed of a step's `attempt`-th candidate (< 2**31, distinct per input)."""
    return (check_seed(seed) * 8 + step) * TRIES + attempt


def first(candidates, good: Callable[[Any], bool]):
    """The first candidate that `good` accepts (the last one if none is: a seed is never refused)."""
    found = None
    for found in candidates:
        if good(found):
            return found
    return found


# -- reading what a student typed -------------------------------------------------------------

_INT = re.compile(r"-?\d+")


def parse_shape(text: str) -> tuple[int, ...] | None:
    """ "(2, 4, 8, 16)", "2x4x8x16" or "2 4 8 16" → `(2, 4, 8, 16)`; None when no number is there."""
    numbers = _INT.findall(str(text))
    return tuple(int(n) for n in numbers) if numbers else None


def shape_text(shape) -> str:
    return "(" + ", ".join(str(int(n)) for n in shape) + ")"


def matrix_markdown(values: np.ndarray, rows, cols, digits: int = 2) -> str:
    """A small matrix as a markdown table, numbers to `digits` decimals."""
    head = "| | " + " | ".join(cols) + " |\n|---|" + "---:|" * len(cols) + "\n"
    body = "".join(
        f"| **{r}** | " + " | ".join(f"{v:.{digits}f}" for v in row) + " |\n"
        for r, row in zip(rows, np.asarray(values), strict=True)
    )
    return head + body


def hand_rounded(value: float, decimals: int = 2) -> str:
    """`value` to `decimals` as a person rounds it (half up: 0.395 → "0.40"), not as its binary float
    happens to fall (0.39499999… → "0.39"): a sum of products of 2-decimal numbers is exact at 4."""
    exact = Decimal(repr(round(float(value), 9)))
    return str(exact.quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP))


def names(prefix: str, n: int, start: int = 1) -> tuple[str, ...]:
    """`("q1", "q2", …)`: the labels a reader counts from 1."""
    return tuple(f"{prefix}{i + start}" for i in range(n))
