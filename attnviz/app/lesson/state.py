"""The Lesson page's state: which lesson, step and seed, what the student answered, and the URL that
keeps it.

The URL is a deep link in `attnviz.lessons.deep_link`'s form, so a teacher can hand out one exercise:

- `lesson` (basics, modern, circuits, speech; default basics), `step` (1 … n, a step's key, or `summary`;
  default 1), and the configuration's `seed` (the sidebar's, bound to `?seed=`);
- `lesson.log`: two characters per step of the lesson, the wrong tries (0–9) and the state —
  "o" open, "r" answered right, "s" answer shown;
- `lesson.answers`: the last answer checked at each step (`answers.encode_answers`), so a reopened link shows
  each answer with its feedback, graded again by the same `Exercise`;
- `class` (and `lesson.nickname` once joined): class mode, `attnviz.app.lesson.class_mode`.

Old links keep working: `?seed=5&lesson.step=3` (the basics lesson before deep links) opens step 3
with or without a `lesson.log`, and is rewritten in the new form.

Progress lives in the session per (lesson, seed), so switching lessons or seeds and back loses nothing. The
seed is the link's (the student's sheet); a class draws its exercise from `class_mode.instance`, not kept.
"""

from __future__ import annotations

import random
import time

import numpy as np
import streamlit as st

from attnviz import lessons
from attnviz.app.frame import links
from attnviz.app.lesson import fields
from attnviz.app.lesson.answers import (
    MAX_SHAPE_TEXT,
    answer_text,
    decode_answers,
    empty_parts,
    encode_answers,
    from_plain,
    plain_label,
    to_plain,
)
from attnviz.errors import SpecError
from attnviz.lessons import CELLS, CHOICE, NUMBERS, SHAPE, Exercise, Feedback, Lesson

LESSON, STEP, LOG, ANSWERS = "lesson", "step", "lesson.log", "lesson.answers"
OLD_STEP = fields.OLD_STEP.key  # the basics lesson's step before deep links (`?lesson.step=3`)
SUMMARY = "summary"
OPEN, RIGHT, SHOWN = "o", "r", "s"
FRESH = "0" + OPEN

# Session keys: where the student is, and each (lesson, seed)'s progress.
AT, SEEN = "lesson.at", "lesson.seen"  # (lesson id, step index); the link read for (lesson, seed)
LOGS, KEPT = "lesson.logs", "lesson.kept"  # {(lesson, seed): log}; {(lesson, seed): {step: answers}}
FIRST, STARTED = "lesson.first", "lesson.started"  # {(lesson, seed, step): first answer text / time}
PENDING, NOTES, ENDED = "lesson.pending", "lesson.link_notes", "lesson.ended"
EMPTY = "lesson.empty"  # what the page says when Check was pressed with nothing entered
WROTE = "lesson.wrote"  # (lesson, step) as the page last wrote them into the link
TRIED = "lesson.tried"  # wrong tries not yet sent to a class: [(exercise id, wrong tries so far)]


# -- the lesson, the step, the seed ----------------------------------------------------------------


def seed() -> int:
    """The lesson seed: the configuration's, folded into the lesson's range."""
    return int(st.session_state.get("seed", 0)) % (lessons.MAX_SEED + 1)


def seed_note() -> str | None:
    """What the page says when the configuration's seed is beyond the lesson's range (it is folded)."""
    raw = int(st.session_state.get("seed", 0))
    if raw <= lessons.MAX_SEED:
        return None
    return (
        f"The lesson uses seeds 0 … {lessons.MAX_SEED:,}: seed {raw:,} gives the lesson of seed {seed():,}."
    )


def current() -> Lesson:
    return lessons.lesson(st.session_state[AT][0])


def step() -> int:
    """The step on screen: 0 … n − 1, or n for the summary."""
    return st.session_state[AT][1]


def count() -> int:
    """Steps of the current lesson (the summary is step `count()`)."""
    return len(current().steps)


def read_step(chosen: Lesson, raw: str | None) -> tuple[int, str | None]:
    """A link's `step` for `chosen`: its index (n for `summary`) and a note when it was not usable."""
    n = len(chosen.steps)
    if raw is None:
        return 0, None
    if raw.strip().lower() == SUMMARY:
        return n, None
    number = links.read_number(raw, 1, n)
    try:
        return chosen.index(raw.strip() if number is None else int(number) - 1), None
    except SpecError:
        keys = ", ".join(s.key for s in chosen.steps)
        return 0, links.ignored(STEP, raw, f"1 … {n}, {SUMMARY} or a step's name ({keys})")


def start(current_seed: int) -> None:
    """Each run, before anything is drawn: on a session's first run (and after a change of seed) read
    the lesson, the step, the progress and the answers from the link."""
    key = current_seed
    if SEEN in st.session_state:
        follow_history()
    if st.session_state.get(SEEN) == key:
        return
    first_time = SEEN not in st.session_state
    st.session_state[SEEN] = key
    st.session_state.setdefault(LOGS, {})
    st.session_state.setdefault(KEPT, {})
    st.session_state.setdefault(FIRST, {})
    st.session_state.setdefault(STARTED, {})
    notes = []
    raw_lesson = st.query_params.get(LESSON)
    try:
        chosen = lessons.lesson(raw_lesson or "basics")
    except SpecError:
        chosen = lessons.lesson("basics")
        notes.append(links.ignored(LESSON, raw_lesson, " | ".join(lessons.LESSONS)))
    if not first_time:  # a new seed: the same lesson and step, that seed's own progress
        chosen, at = current(), min(step(), len(current().steps))
    else:
        raw_step = st.query_params.get(STEP, st.query_params.get(OLD_STEP) if chosen.id == "basics" else None)
        at, note = read_step(chosen, raw_step)
        notes += [note] if note else []
        notes += _read_progress(chosen, current_seed)
    st.session_state[AT] = (chosen.id, at)
    _ensure_log(chosen, current_seed)
    st.session_state[NOTES] = notes


def follow_history() -> None:
    """Browser Back and Forward between steps: each step the page writes into the link is a history
    entry (Streamlit pushes one per change of the query); when the link's lesson or step is not the one
    the page last wrote, the browser moved through its history, and the page goes there."""
    raw_lesson, raw_step = st.query_params.get(LESSON), st.query_params.get(STEP)
    wrote = st.session_state.get(WROTE)
    if wrote is None or raw_step is None or (raw_lesson, raw_step) == wrote:
        return
    try:
        chosen = lessons.lesson(raw_lesson or "basics")
    except SpecError:
        return
    at, note = read_step(chosen, raw_step)
    if note is None:
        st.session_state[AT] = (chosen.id, at)
        _ensure_log(chosen, seed())


def _read_progress(chosen: Lesson, current_seed: int) -> list[str]:
    """The link's log and answers for `chosen`; returns the notes for those that do not fit its steps
    (ignored: the lesson starts fresh rather than from a progress it cannot read)."""
    notes, n = [], len(chosen.steps)
    log = st.query_params.get(LOG, "")
    if _valid_log(log, n):
        st.session_state[LOGS][chosen.id, current_seed] = log
    elif log:
        notes.append(
            links.ignored(LOG, log, f"a digit and one of {OPEN}, {RIGHT}, {SHOWN} per step ({n} steps)")
        )
    raw = st.query_params.get(ANSWERS, "")
    answers = decode_answers(raw, n)
    if answers:
        st.session_state[KEPT][chosen.id, current_seed] = answers
    elif raw:
        notes.append(links.ignored(ANSWERS, raw, "the answers this page writes into its links"))
    return notes


def _ensure_log(chosen: Lesson, current_seed: int) -> None:
    st.session_state[LOGS].setdefault((chosen.id, current_seed), FRESH * len(chosen.steps))
    st.session_state[KEPT].setdefault((chosen.id, current_seed), {})


def link_notes() -> list[str]:
    """What the link asked for and did not get (a bad lesson or step), for the page to say."""
    return st.session_state.get(NOTES, [])


def _valid_log(text, n: int) -> bool:
    return (
        isinstance(text, str)
        and len(text) == 2 * n
        and all(text[i] in "0123456789" and text[i + 1] in (OPEN, RIGHT, SHOWN) for i in range(0, 2 * n, 2))
    )


def _mine() -> tuple[str, int]:
    return st.session_state[AT][0], seed()


def log() -> str:
    return st.session_state[LOGS][_mine()]


def status(i: int) -> tuple[int, str]:
    """Step i's wrong tries and state."""
    text = log()
    return int(text[2 * i]), text[2 * i + 1]


def _set_status(i: int, tries: int, state: str) -> None:
    text = log()
    st.session_state[LOGS][_mine()] = text[: 2 * i] + str(min(tries, 9)) + state + text[2 * i + 2 :]


def revealed(i: int) -> bool:
    return status(i)[1] != OPEN


def answers() -> dict[int, list]:
    """The last answer checked at each step of the current lesson and seed."""
    return st.session_state[KEPT][_mine()]


def sync_url() -> None:
    """Write the lesson, step, log and answers into the URL — only what changed — in one message, and
    drop the old form's step. Streamlit pushes a history entry per message: one message per key pushed
    two for a Check (log, answers) and two on opening, so an answered step took three Backs to leave
    (the final walk of 28 Nov 2026); now a Check is one entry."""
    chosen, at = current(), step()
    wanted = {
        LESSON: chosen.id,
        STEP: SUMMARY if at == len(chosen.steps) else str(at + 1),
        LOG: log(),
        ANSWERS: encode_answers(answers()),
    }
    stale = {k: v for k, v in wanted.items() if st.query_params.get(k, "") != v}
    for key in [k for k, v in stale.items() if not v]:
        del st.query_params[key]
    if any(stale.values()):
        st.query_params.update({k: v for k, v in stale.items() if v})
    if OLD_STEP in st.query_params:
        del st.query_params[OLD_STEP]
    st.session_state[WROTE] = (wanted[LESSON], wanted[STEP])


# -- callbacks -----------------------------------------------------------------------------------------


def go(i: int) -> None:
    chosen = current()
    st.session_state[AT] = (chosen.id, max(0, min(len(chosen.steps), i)))


def pick_lesson() -> None:
    """The picker's on_change: open the chosen lesson where this session left it (its first step)."""
    chosen = lessons.lesson(st.session_state.get("lesson.pick") or st.session_state[AT][0])
    visited = st.session_state.setdefault("lesson.visited", {})
    visited[st.session_state[AT][0]] = st.session_state[AT][1]
    st.session_state[AT] = (chosen.id, visited.get(chosen.id, 0))
    _ensure_log(chosen, seed())


def restart() -> None:
    chosen = current()
    st.session_state[LOGS][_mine()] = FRESH * len(chosen.steps)
    st.session_state[KEPT][_mine()] = {}
    st.session_state[AT] = (chosen.id, 0)


def new_variant() -> None:
    """Another instance of the lesson: a new seed (the sidebar's, so the link carries it)."""
    st.session_state["seed"] = random.randrange(1, lessons.MAX_SEED + 1)


def _key(ex: Exercise, k: int) -> str:
    return f"lesson.{ex.lesson}.{seed()}.{ex.step}.{k}"


def response(ex: Exercise, k: int):
    """Part k's answer as the widgets hold it, in the form `Part.check` takes (None: not answered)."""
    part, key = ex.parts[k], _key(ex, k)
    if part.kind == CHOICE or part.kind == SHAPE:
        return st.session_state.get(key)
    if part.kind == NUMBERS:
        values = [st.session_state.get(f"{key}.{i}") for i in range(len(part.options))]
        return None if any(v is None for v in values) else tuple(values)
    picked = [st.session_state.get(f"{key}.{r}") or [] for r in range(len(part.rows))]
    return np.array([[c in row for c in part.options] for row in picked], dtype=bool)


def check(lesson_id: str, step_: int, seed_: int) -> None:
    """Check's callback: grade on this run, once the exercise is built (`grade_pending`).

    Takes the lesson, step and seed, not the exercise: a callback's arguments live as long as the session.
    """
    st.session_state[PENDING] = (lesson_id, step_, seed_)


def grade_pending(ex: Exercise) -> None:
    """Grade the answer Check was pressed for, if it is this exercise's: keep the answer, count a wrong
    try or mark the step right (then it has `ended`)."""
    if st.session_state.get(PENDING) != (ex.lesson, st.session_state[AT][1], seed()):
        return
    del st.session_state[PENDING]
    i = step()
    responses = [response(ex, k) for k in range(len(ex.parts))]
    missing = empty_parts(ex, responses)
    if missing:  # not an answer: nothing counted, nothing kept or stored
        st.session_state[EMPTY] = (ex.lesson, seed(), i, missing)
        return
    st.session_state.pop(EMPTY, None)
    feedback = lessons.grade(ex, responses)
    answers()[i] = [to_plain(p, r) for p, r in zip(ex.parts, responses, strict=True)]
    where = (ex.lesson, seed(), i)
    st.session_state[FIRST].setdefault(where, answer_text(ex, responses))
    tries, state = status(i)
    if state != OPEN:
        return
    if not feedback.right:
        _set_status(i, tries + 1, OPEN)
        st.session_state.setdefault(TRIED, []).append((ex.id, tries + 1))  # a class's view: stuck on it
        return
    _set_status(i, tries, RIGHT)
    _ended(ex.id, ex.lesson, seed(), i, right=tries == 0, attempts=tries + 1)


def empty_note(ex: Exercise) -> str | None:
    """What the page says under the form after Check with nothing entered, for this step only."""
    said = st.session_state.get(EMPTY)
    if not said or said[:3] != (ex.lesson, seed(), step()):
        return None
    return f"Nothing entered for {said[3]}: type or pick an answer, then press Check. Nothing was counted."


def show_answer(lesson_id: str, step_: int, seed_: int, exercise_id: str) -> None:
    """ "Show me the answer": the step ends, the answer shown (it counts as not right first time)."""
    tries, _ = status(step_)
    _set_status(step_, tries, SHOWN)
    _ended(exercise_id, lesson_id, seed_, step_, right=False, attempts=max(tries, 1), shown=True)


def restore_stored(stored) -> None:
    """Mark the steps a class's database holds for this student as done (`classroom.Progress`
    records: a student who joins again sees their progress), each in its lesson and seed; a step
    done in this session already stays as it is."""
    for record in stored:
        lesson_id, _, key = record.exercise_id.partition(".")
        if lesson_id not in lessons.LESSONS:
            continue
        chosen = lessons.LESSONS[lesson_id]
        keys = [s.key for s in chosen.steps]
        if key not in keys:
            continue
        mine = (lesson_id, record.seed)
        st.session_state[LOGS].setdefault(mine, FRESH * len(keys))
        st.session_state[KEPT].setdefault(mine, {})
        i, text = keys.index(key), st.session_state[LOGS][mine]
        if text[2 * i + 1] != OPEN:
            continue
        if record.right_first:
            tries, state = 0, RIGHT
        elif record.shown:
            tries, state = record.attempts, SHOWN
        else:
            tries, state = record.attempts - 1, RIGHT
        st.session_state[LOGS][mine] = text[: 2 * i] + str(min(tries, 9)) + state + text[2 * i + 2 :]


def ended() -> list[dict]:
    """The exercises finished since they were last taken (`class_mode.send` stores them for a class):
    each as `record_answer`'s fields."""
    return st.session_state.setdefault(ENDED, [])


def _ended(
    exercise_id: str, lesson_id: str, seed_: int, i: int, *, right: bool, attempts: int, shown: bool = False
) -> None:
    where = (lesson_id, seed_, i)
    began = st.session_state[STARTED].get(where, time.time())
    ended().append(
        {
            "exercise_id": exercise_id,
            "seed": seed_,
            "answer": st.session_state[FIRST].get(where, "(answer shown)"),
            "right": right,
            "attempts": attempts,
            "seconds": round(min(max(time.time() - began, 0.0), 86_400.0), 1),
            "shown": shown,
        }
    )


def mark_started(ex: Exercise) -> None:
    """The time the student first saw this open step (what a class stores as the seconds it took)."""
    if not revealed(step()):
        st.session_state[STARTED].setdefault((ex.lesson, seed(), step()), time.time())


def restore_inputs(ex: Exercise) -> None:
    """Put the step's last answer back in its inputs (a reopened link), before they are drawn."""
    kept = answers().get(step())
    if not kept or len(kept) != len(ex.parts):
        return
    for k, (part, value) in enumerate(zip(ex.parts, kept, strict=True)):
        response_ = from_plain(part, value)
        key = _key(ex, k)
        if response_ is None or _drawn(ex, k):
            continue
        if part.kind in (CHOICE, SHAPE):
            st.session_state[key] = response_
        elif part.kind == NUMBERS:
            for i, v in enumerate(response_):
                st.session_state[f"{key}.{i}"] = round(v, part.decimals)
        else:
            for r, row in enumerate(response_):
                st.session_state[f"{key}.{r}"] = [c for c, on in zip(part.options, row, strict=True) if on]


def _drawn(ex: Exercise, k: int) -> bool:
    """Whether part k's input already holds a value in this session (the student's own, kept)."""
    part, key = ex.parts[k], _key(ex, k)
    if part.kind == NUMBERS:
        return f"{key}.0" in st.session_state
    if part.kind == CELLS:
        return f"{key}.0" in st.session_state
    return key in st.session_state


def feedback(ex: Exercise) -> Feedback | None:
    """The feedback on the step's last answer checked: graded again from the kept answer, so a
    reopened link shows it as the student saw it."""
    kept = answers().get(step())
    if not kept or len(kept) != len(ex.parts):
        return None
    responses = [from_plain(p, v) for p, v in zip(ex.parts, kept, strict=True)]
    if all(r is None for r in responses):
        return None
    return lessons.grade(ex, responses)


# -- widgets and links ----------------------------------------------------------------------------------


def part_input(ex: Exercise, k: int) -> None:
    """The input of part k: one row of pills to pick from, number fields, a text field, or a row of pills per query."""
    part, key = ex.parts[k], _key(ex, k)
    if part.kind in (CHOICE, SHAPE):  # the prompt drawn as markdown; the widget's (aria-)label plain text
        st.markdown(part.prompt)
    if part.kind == CHOICE:  # pills, not radio buttons: a radio's row is 22 px, too small to tap on a phone
        st.pills(
            plain_label(part.prompt), range(len(part.options)), format_func=part.options.__getitem__, key=key,
            label_visibility="collapsed",
        )  # fmt: skip
    elif part.kind == NUMBERS:
        st.markdown(part.prompt)
        low, high = part.bounds
        step_ = 10.0**-part.decimals
        width = 110 if part.decimals <= 2 and high <= 1 else 150
        with st.container(horizontal=True, key=f"{key}.row"):
            for i, label in enumerate(part.options):
                st.number_input(
                    label, float(low), float(high), None, step_, format=f"%.{part.decimals}f",
                    key=f"{key}.{i}", width=width,
                )  # fmt: skip
    elif part.kind == SHAPE:
        st.text_input(
            plain_label(part.prompt), key=key, placeholder="numbers separated by commas",
            max_chars=MAX_SHAPE_TEXT, label_visibility="collapsed",
        )  # fmt: skip
    elif part.kind == CELLS:
        st.markdown(part.prompt)
        for r, row in enumerate(part.rows):
            st.pills(part.row_label.format(row=row), part.options, selection_mode="multi", key=f"{key}.{r}")


def summary_rows() -> list[dict]:
    """One row per step: its title and how it went, a Material icon for right first time (the app's
    fonts have no ✅: it showed as an empty box)."""
    rows = []
    for i, one in enumerate(current().steps):
        tries, state = status(i)
        wrong = f"{tries} wrong {'try' if tries == 1 else 'tries'}"
        result = {
            RIGHT: ":material/check_circle: right first time" if tries == 0 else f"right after {wrong}",
            SHOWN: ":material/visibility: answer shown"
            + (f" (after {wrong})" if tries else ", no try first"),
            OPEN: "not answered yet" if tries == 0 else f"open ({wrong} so far)",
        }[state]
        rows.append({"Step": f"{i + 1}\\. {one.title}", "Result": result})  # "1." alone starts a list
    return rows


def icon(i: int) -> str | None:
    """The navigation button's icon for step i: a tick when answered right, an eye when shown."""
    return {RIGHT: ":material/check:", SHOWN: ":material/visibility:"}.get(status(i)[1])


def first_time_count() -> int:
    return sum(status(i) == (0, RIGHT) for i in range(count()))
