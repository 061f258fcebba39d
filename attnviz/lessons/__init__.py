"""The lessons: predict-then-reveal exercises, each drawn from a seed.

Four lessons (`LESSONS`, `lesson(id)`): **basics** (attention in eight steps), **modern** (shared K/V
heads, the KV cache, sliding windows, RoPE, FlashAttention's tiles, the logit lens, on SmolLM2 and
Gemma 3), **circuits** (the induction head, ablation, activation and attribution patching on
SmolLM2) and **speech** (which part of the sound a word reads: Whisper tiny.en's cross-attention). `lesson("modern").exercise(2, seed=7)` builds a step; `Exercise.id` ("modern.window") is its
stable name; `deep_link` / `read_link` are the addresses of one step for one seed.

The basics lesson, as before:

`exercise(step, seed)` builds step `step` (0-based) of the lesson for a seed:
the question, what the student answers (`Part`s), and for each part the
answer and a `check` that says why a response is right or wrong — every
number computed by the library (`attnviz.reference`, `attnviz.heads`,
`attnviz.masks`, `attnviz.pretrained`), none typed in. The same seed gives
the same exercise; another seed another instance of it. `problem_set`
writes a class's worksheets with their answer keys.

    from attnviz import lessons
    ex = lessons.exercise(2, seed=7)          # the softmax step for student 7
    lessons.grade(ex, [(0.2, 0.5, 0.3)])      # Feedback(right=…, notes=((ok, why), …))
"""

from __future__ import annotations

from collections.abc import Callable

from attnviz.errors import SpecError
from attnviz.lessons.basics import scaling, scores, softmax
from attnviz.lessons.core import (
    CELLS,
    CHOICE,
    KINDS,
    MAX_SEED,
    NUMBERS,
    SHAPE,
    Exercise,
    Feedback,
    Link,
    Part,
    check_seed,
    grade,
    parse_shape,
)
from attnviz.lessons.minilm import learned
from attnviz.lessons.registry import LESSONS, Lesson, Step, deep_link, exercise_by_id, lesson, read_link
from attnviz.lessons.rotary import positions
from attnviz.lessons.structure import heads_exercise, mask, shapes

# The path, in order: (key, title, builder). Step i is built as builder(seed, i).
STEPS: tuple[tuple[str, str, Callable[[int, int], Exercise]], ...] = (
    ("scores", "Scores", scores),
    ("scaling", "Scaling", scaling),
    ("softmax", "Softmax", softmax),
    ("masks", "Masks", mask),
    ("heads", "Heads", heads_exercise),
    ("shapes", "Shapes", shapes),
    ("positions", "Positions", positions),
    ("learned", "A learned head", learned),
)


def exercise(step: int, seed: int) -> Exercise:
    """Step `step` (0 … 7) of the lesson for `seed` (0 … `MAX_SEED`).

    Raises:
        SpecError: a step or seed out of range.
    """
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < len(STEPS):
        raise SpecError("step", step, f"an integer in 0 … {len(STEPS) - 1}")
    return STEPS[step][2](check_seed(seed), step)


__all__ = [
    "CELLS",
    "CHOICE",
    "KINDS",
    "LESSONS",
    "MAX_SEED",
    "NUMBERS",
    "SHAPE",
    "STEPS",
    "Exercise",
    "Feedback",
    "Lesson",
    "Link",
    "Part",
    "Step",
    "deep_link",
    "exercise",
    "exercise_by_id",
    "grade",
    "lesson",
    "parse_shape",
    "read_link",
]
