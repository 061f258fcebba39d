"""Where the Lesson and Teacher pages build exercises and problem sets: in the script, or in a worker.

A step that runs a model (`Step.needs`: MiniLM for the basics' last step, SmolLM2 or Gemma for the
modern and circuits lessons, Whisper for the speech lesson) is built by `attnviz.lessons.registry.packed_exercise` in a worker process,
through the app's door (`attnviz.app.frame.door`): its runs — SmolLM2's layer captures, the role
scan, the ablations, the patching sweep, the lens — stay kept in that worker for the next seed, and
the built exercise stays in the server's result cache, so a class of 30 costs a few runs, and the
server's own process never loads a model. Every other step (the arithmetic of the basics, the
window, and the two cache-size steps, which read a checkpoint's config in ≈ 0.04 s) is built here:
a worker's round trip would be a visible share of it (the door's line: well under 0.2 s stays).
"""

from __future__ import annotations

import pickle

from attnviz import lessons
from attnviz.app.frame import door
from attnviz.lessons import Exercise, registry
from attnviz.lessons import problem_set as sheets

# Steps that name a checkpoint but only read its config (`attnviz.lessons.grouped`): built here.
CONFIG_ONLY = frozenset({"modern.kv_cache", "modern.gemma_cache"})
KEEP_S = 3 * 3600  # a built exercise stays in the result cache this long without use (a lesson)
SPINNERS = {
    "basics": "Running MiniLM on the sentence (the first student's run loads it)",
    "modern": "Running SmolLM2 for this step (the first student's run loads the model; the class shares it)",
    "circuits": "Running SmolLM2's scan, ablations or patching sweep for this step (about a minute for "
    "the first student; the class shares the run)",
    "speech": "Transcribing the clip with Whisper tiny.en (the first student's run loads the model; the class "
    "shares it)",
}


def in_worker(lesson_id: str, key: str) -> bool:
    """Whether the step runs a model, so is built in a worker."""
    chosen = lessons.lesson(lesson_id)
    step = chosen.steps[chosen.index(key)]
    return step.needs is not None and f"{lesson_id}.{key}" not in CONFIG_ONLY


def exercise(lesson_id: str, key: str, seed: int) -> Exercise:
    """Step `key` of lesson `lesson_id` for `seed`, built here or in a worker (`in_worker`).

    Raises:
        TaskError: the worker's build failed or was stopped (`door.show_failure` says which).
    """
    if not in_worker(lesson_id, key):
        return lessons.lesson(lesson_id).exercise(key, seed)
    data = door.run(
        registry.packed_exercise, lesson_id, key, seed, spinner=SPINNERS[lesson_id], cache="lesson.exercise", ttl=KEEP_S
    )  # fmt: skip
    return pickle.loads(data)  # bytes from this server's own worker (cloudpickle)


def problem_set(
    seeds: tuple[int, ...],
    lesson_ids: tuple[str, ...],
    links: dict | None = None,
    instances: dict | None = None,
) -> tuple[str, str]:
    """The problem set's Markdown and HTML (`attnviz.lessons.problem_set`, with each sheet's link
    `{(lesson id, seed): address}` and, for a class, each seed's instance `{seed: instance seed}`), built
    in a worker."""
    pairs = tuple(sorted(links.items())) if links else None  # the result cache's key is hashable
    drawn = tuple(sorted(instances.items())) if instances else None
    return door.run(
        sheets.both, tuple(seeds), tuple(lesson_ids), pairs, drawn, spinner="Writing the problem set",
        cache="lesson.problem_set", ttl=KEEP_S,
    )  # fmt: skip
