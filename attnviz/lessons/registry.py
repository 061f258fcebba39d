"""The lessons by id: their titles, their steps, and the addresses that open one step for one seed.

A lesson is a list of `Step`s; step i of a lesson for a seed is `Lesson.exercise(i, seed)`. A step
that runs a packaged checkpoint which is not installed (Gemma 3 270M) is left out of `Lesson.steps`
and named in `Lesson.notes`, never an error. Each exercise has a stable id, `lesson.key`
(`Exercise.id`), under which a class's answers are stored with the seed; `exercise_by_id` opens
it again. A deep link `?lesson=modern&step=3&seed=5` opens step 3 (counting from 1, or the step's
key) of the modern lesson for seed 5 (`deep_link`, `read_link`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

from attnviz import pretrained
from attnviz.errors import SpecError
from attnviz.exec.monitor import Monitor, watch
from attnviz.frameworks import prepare
from attnviz.lessons import checkpoints, circuits, grouped, lens, modern, speech
from attnviz.lessons.basics import scaling, scores, softmax
from attnviz.lessons.core import MAX_SEED, Exercise, check_seed
from attnviz.lessons.minilm import CHECKPOINT as MINILM
from attnviz.lessons.minilm import learned
from attnviz.lessons.rotary import positions
from attnviz.lessons.structure import heads_exercise, mask, shapes
from attnviz.settings import read_number


@dataclass(frozen=True)
class Step:
    """One step of a lesson.

    Attributes:
        key: its name in the exercise id (`lesson.key`) and in a link.
        title: what the page's navigation shows.
        build: `(seed, step) → Exercise`, step being the position in `Lesson.all_steps`.
        needs: the packaged checkpoint it runs (`attnviz.pretrained.local_checkpoints`), if any.
    """

    key: str
    title: str
    build: Callable[[int, int], Exercise]
    needs: str | None = None


@dataclass(frozen=True)
class Lesson:
    """A lesson: an id (`basics`, `modern`, `circuits`, `speech`), a title, a summary and its steps."""

    id: str
    title: str
    summary: str
    all_steps: tuple[Step, ...]

    @property
    def steps(self) -> tuple[Step, ...]:
        """The steps that can run here (their checkpoint installed), in order."""
        return tuple(s for s in self.all_steps if s.needs is None or checkpoints.available(s.needs))

    @property
    def notes(self) -> tuple[str, ...]:
        """One sentence per step left out, naming the checkpoint it needs and how to install it."""
        missing = pretrained.not_installed()
        return tuple(
            f"“{s.title}” is left out: it runs {s.needs}, which is not installed here"
            + (f" (`{missing[s.needs]}`)." if s.needs in missing else ".")
            for s in self.all_steps
            if s not in self.steps
        )

    def exercise_ids(self) -> tuple[str, ...]:
        """The ids of the steps that can run here (what a class's answers are stored under)."""
        return tuple(f"{self.id}.{s.key}" for s in self.steps)

    def index(self, step) -> int:
        """The position in `steps` of a step given by its key or its number (0-based int), or a `SpecError`."""
        steps = self.steps
        keys = [s.key for s in steps]
        if isinstance(step, str) and step in keys:
            return keys.index(step)
        if isinstance(step, int) and not isinstance(step, bool) and 0 <= step < len(steps):
            return step
        raise SpecError("step", step, f"0 … {len(steps) - 1} or one of {', '.join(keys)}")

    def exercise(self, step, seed: int) -> Exercise:
        """Step `step` (a position in `steps`, or a key) for `seed`.

        Raises:
            SpecError: a step or seed out of range.
        """
        chosen = self.steps[self.index(step)]
        return chosen.build(check_seed(seed), self.all_steps.index(chosen))


BASICS = Lesson(
    "basics",
    "Attention in eight steps",
    "Scores, scaling, softmax, masks, heads, shapes, positions and a head of a trained model.",
    (
        Step("scores", "Scores", scores),
        Step("scaling", "Scaling", scaling),
        Step("softmax", "Softmax", softmax),
        Step("masks", "Masks", mask),
        Step("heads", "Heads", heads_exercise),
        Step("shapes", "Shapes", shapes),
        Step("positions", "Positions", positions),
        Step("learned", "A learned head", learned, MINILM),
    ),
)

MODERN = Lesson(
    "modern",
    "Modern attention",
    "How today's decoders attend: shared K/V heads, the KV cache, sliding windows, RoPE, FlashAttention's "
    "tiles and the logit lens — on SmolLM2 (and Gemma 3 where it is installed).",
    (
        Step("kv_groups", "Shared K/V heads", grouped.kv_groups, checkpoints.SMOLLM2),
        Step("kv_cache", "The KV cache", grouped.kv_cache, checkpoints.SMOLLM2),
        Step("window", "Sliding windows", modern.window),
        Step("rope", "RoPE in SmolLM2", modern.rope, checkpoints.SMOLLM2),
        Step("tiles", "FlashAttention's tiles", modern.tiles, checkpoints.SMOLLM2),
        Step("lens", "The logit lens", lens.lens, checkpoints.SMOLLM2),
        Step("gemma_cache", "Gemma's cache", grouped.gemma_cache, checkpoints.GEMMA),
    ),
)

CIRCUITS = Lesson(
    "circuits",
    "Circuits",
    "Find SmolLM2's induction head, test it by ablation, and find the heads that carry a name with "
    "activation patching and its one-pass estimate.",
    (
        Step("induction", "The induction head", circuits.induction, checkpoints.SMOLLM2),
        Step("ablation", "Ablating it", circuits.ablation, checkpoints.SMOLLM2),
        Step("patching", "Activation patching", circuits.patching, checkpoints.SMOLLM2),
        Step("attribution", "Attribution patching", circuits.attribution, checkpoints.SMOLLM2),
    ),
)

SPEECH = Lesson(
    "speech",
    "Cross-attention in speech",
    "Whisper tiny.en writes what it hears: each written word's cross-attention reads the part of the sound "
    "it came from. Predict which part, then see the model's own row over the spectrogram.",
    (Step("span", "Which sound a word reads", speech.span, speech.MODEL),),
)

LESSONS: dict[str, Lesson] = {lesson.id: lesson for lesson in (BASICS, MODERN, CIRCUITS, SPEECH)}


def runnable() -> tuple[str, ...]:
    """The ids of the lessons with a step that can run here (the speech lesson needs Whisper)."""
    return tuple(i for i, one in LESSONS.items() if one.steps)


def lesson(lesson_id) -> Lesson:
    """The lesson `lesson_id`, or a `SpecError` naming the lessons that can run here."""
    if isinstance(lesson_id, str) and lesson_id in LESSONS and LESSONS[lesson_id].steps:
        return LESSONS[lesson_id]
    raise SpecError("lesson", lesson_id, "one of " + ", ".join(map(repr, runnable())))


def exercise_by_id(exercise_id, seed: int) -> Exercise:
    """The exercise stored as `exercise_id` ("modern.kv_cache") for `seed`.

    Raises:
        SpecError: (field "exercise") an id of no exercise that can run here, or a bad seed.
    """
    lesson_id, _, key = exercise_id.partition(".") if isinstance(exercise_id, str) else ("", "", "")
    if lesson_id not in LESSONS or key not in [s.key for s in LESSONS[lesson_id].steps]:
        known = [i for one in LESSONS.values() for i in one.exercise_ids()]
        raise SpecError("exercise", exercise_id, "an exercise id such as " + ", ".join(known[:3]) + ", …")
    return LESSONS[lesson_id].exercise(key, seed)


def packed_exercise(lesson_id: str, step: str, seed: int, *, monitor: Monitor | None = None) -> bytes:
    """Step `step` (its key) of lesson `lesson_id` for `seed`, as a worker builds it for the Lesson
    page: the runs it reads (SmolLM2's captures, the role scan, the ablations, the patching sweep,
    the lens; MiniLM's sentences; Whisper's transcriptions of the bundled clips) are kept by this process for the next seed. Returned as
    cloudpickle bytes, because an `Exercise`'s checks are closures, which plain pickle cannot carry;
    `pickle.loads` reads them back.

    Inside `monitor.loading()`: the library fixes every size a lesson runs (the seed only picks among
    a few prompts and sequences), and the checkpoints it needs load inside the build."""
    import cloudpickle

    monitor = watch(monitor)
    chosen = lesson(lesson_id)
    monitor.step(0, 1)
    with monitor.loading():
        prepare(checkpoints.framework())
        exercise = chosen.exercise(step, seed)
    monitor.report(1, 1)
    return cloudpickle.dumps(exercise)


def deep_link(lesson_id: str, step: int, seed: int, page: str = "lesson") -> str:
    """The relative address that opens step `step` (0-based position in `steps`) of a lesson for `seed`,
    e.g. "lesson?lesson=modern&step=4&seed=5" (the link counts steps from 1, as the page does)."""
    chosen = lesson(lesson_id)
    index = chosen.index(step)
    return f"{page}?" + urlencode({"lesson": chosen.id, "step": index + 1, "seed": check_seed(seed)})


def read_link(params: Mapping[str, str]) -> tuple[Lesson, int, int]:
    """`(lesson, step, seed)` from a link's parameters: `lesson` (default basics), `step` counted from 1
    or a step's key (default 1), `seed` (default 0).

    Raises:
        SpecError: naming the field whose value is not one of those allowed.
    """
    chosen = lesson(params.get("lesson", "basics"))
    raw = params.get("step", "1")
    number = read_number(raw, 1, len(chosen.steps))
    step = chosen.index(raw if number is None else int(number) - 1)
    seed = read_number(params.get("seed", "0"), 0, MAX_SEED)
    if seed is None:
        raise SpecError("seed", params.get("seed"), f"an integer in 0 … {MAX_SEED:,}")
    return chosen, step, check_seed(int(seed))
