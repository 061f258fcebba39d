"""The Lesson page's state: where the student is, what they answered, and the URL that keeps it.

Progress lives in the session (`lesson.step`, `lesson.log`) and in the URL
(`?lesson.step=3&lesson.log=…`), so a reload lands on the same step with the
same results. The seed is the configuration's `seed` (the sidebar's, bound
to `?seed=`): a teacher's link fixes every student's instance.

`lesson.log` holds two characters per step: the wrong tries (0–9) and the
state — "o" open, "r" answered right, "s" answer shown.
"""

from __future__ import annotations

import random
from urllib.parse import urlencode

import numpy as np
import streamlit as st

from attnviz import lessons, settings
from attnviz.app.frame import links
from attnviz.lessons import CELLS, CHOICE, NUMBERS, SHAPE, Exercise, Feedback, Link, problem_set

N = len(lessons.STEPS)  # step N is the summary
STEP, LOG, SEED = "lesson.step", "lesson.log", "lesson.seed"
OPEN, RIGHT, SHOWN = "o", "r", "s"
FRESH = "0" + OPEN


# -- the seed, the step and the log -----------------------------------------------------------------


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


def _valid_log(text) -> bool:
    return (
        isinstance(text, str)
        and len(text) == 2 * N
        and all(text[i] in "0123456789" and text[i + 1] in (OPEN, RIGHT, SHOWN) for i in range(0, 2 * N, 2))
    )


def start(current_seed: int) -> None:
    """Once per session and seed: progress from the URL (a reload), else from the beginning."""
    if st.session_state.get(SEED) == current_seed:
        return
    first_time = SEED not in st.session_state
    st.session_state[SEED] = current_seed
    step, log = st.query_params.get(STEP, "1"), st.query_params.get(LOG, "")
    at = links.read_number(step, 1, N + 1)  # the one reader of a link's numbers (ASCII, finite, in range)
    if first_time and _valid_log(log) and at is not None:
        st.session_state[STEP], st.session_state[LOG] = at - 1, log
    else:
        st.session_state[STEP], st.session_state[LOG] = 0, FRESH * N


def step() -> int:
    return st.session_state[STEP]


def status(i: int) -> tuple[int, str]:
    """Step i's wrong tries and state."""
    log = st.session_state[LOG]
    return int(log[2 * i]), log[2 * i + 1]


def _set_status(i: int, tries: int, state: str) -> None:
    log = st.session_state[LOG]
    st.session_state[LOG] = log[: 2 * i] + str(min(tries, 9)) + state + log[2 * i + 2 :]


def revealed(i: int) -> bool:
    return status(i)[1] != OPEN


def sync_url() -> None:
    """Write the step and the log into the URL (only when they changed: no needless history)."""
    wanted = {STEP: str(step() + 1), LOG: st.session_state[LOG]}
    for key, value in wanted.items():
        if st.query_params.get(key) != value:
            st.query_params[key] = value


# -- callbacks -----------------------------------------------------------------------------------------


def go(i: int) -> None:
    st.session_state[STEP] = max(0, min(N, i))


def restart() -> None:
    st.session_state[STEP], st.session_state[LOG] = 0, FRESH * N


def new_variant() -> None:
    """Another instance of the lesson: a new seed (the sidebar's, so the link carries it)."""
    st.session_state["seed"] = random.randrange(1, lessons.MAX_SEED + 1)


def _key(ex: Exercise, k: int) -> str:
    return f"lesson.{ex.seed}.{ex.step}.{k}"


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


def check(step_: int, seed_: int) -> None:
    """Check: grade every part, keep the feedback, count a wrong try or mark the step right.

    Takes the step and seed, not the exercise: a callback's arguments live as long as the session.
    """
    ex = lessons.exercise(step_, seed_)
    feedback = lessons.grade(ex, [response(ex, k) for k in range(len(ex.parts))])
    st.session_state[f"lesson.feedback.{ex.seed}.{ex.step}"] = feedback
    tries, state = status(ex.step)
    if state != OPEN:
        return
    _set_status(ex.step, tries if feedback.right else tries + 1, RIGHT if feedback.right else OPEN)


def show_answer(step_: int) -> None:
    tries, _ = status(step_)
    _set_status(step_, tries, SHOWN)


def feedback(ex: Exercise) -> Feedback | None:
    return st.session_state.get(f"lesson.feedback.{ex.seed}.{ex.step}")


# -- widgets and links ----------------------------------------------------------------------------------


def part_input(ex: Exercise, k: int) -> None:
    """The input of part k: one row of pills to pick from, number fields, a text field, or a row of pills per query."""
    part, key = ex.parts[k], _key(ex, k)
    if part.kind == CHOICE:  # pills, not radio buttons: a radio's row is 22 px, too small to tap on a phone
        st.pills(part.prompt, range(len(part.options)), format_func=part.options.__getitem__, key=key)
    elif part.kind == NUMBERS:
        st.markdown(part.prompt)
        with st.container(horizontal=True, key=f"{key}.row"):
            for i, label in enumerate(part.options):
                st.number_input(label, 0.0, 1.0, None, 0.01, format="%.2f", key=f"{key}.{i}", width=110)
    elif part.kind == SHAPE:
        st.text_input(part.prompt, key=key, placeholder="e.g. 2, 4, 8, 16")
    elif part.kind == CELLS:
        st.markdown(part.prompt)
        for r, row in enumerate(part.rows):
            st.pills(f"{row} cannot see", part.options, selection_mode="multi", key=f"{key}.{r}")


def link_url(link: Link) -> str:
    """The page's relative URL carrying the exercise's configuration (the sidebar's URL form) and page keys."""
    cfg = settings.DEFAULTS | link.config
    query = settings.url_values(cfg) | link.page_keys
    return link.page + ("?" + urlencode(query) if query else "")


def lesson_url(lesson_seed: int) -> str:
    """The lesson's address for one seed, absolute when the browser told the server its URL."""
    here = st.context.url or ""
    base = here.split("?")[0].rsplit("/", 1)[0] + "/" if here.startswith("http") else ""
    return base + "lesson?" + urlencode({"seed": lesson_seed})


def summary_rows() -> list[dict]:
    rows = []
    for i, (_, title, _) in enumerate(lessons.STEPS):
        tries, state = status(i)
        result = {
            RIGHT: "✅ right first time"
            if tries == 0
            else f"right after {tries} wrong {'try' if tries == 1 else 'tries'}",
            SHOWN: f"answer shown (after {tries} wrong {'try' if tries == 1 else 'tries'})",
            OPEN: "not answered yet" if tries == 0 else f"open ({tries} wrong so far)",
        }[state]
        rows.append({"Step": f"{i + 1}. {title}", "Result": result})
    return rows


def icon(i: int) -> str | None:
    """The navigation button's icon for step i: a tick when answered right, an eye when shown."""
    return {RIGHT: ":material/check:", SHOWN: ":material/visibility:"}.get(status(i)[1])


def first_time_count() -> int:
    return sum(status(i) == (0, RIGHT) for i in range(N))


@st.cache_data(max_entries=8, show_spinner="Writing the problem set…")
def _problem_set(seeds: tuple[int, ...]) -> tuple[str, str]:
    return problem_set.markdown(seeds), problem_set.html(seeds)


def prepare_problem_set() -> None:
    """Button callback: the Markdown and HTML problem set for the teacher's first seed and class size
    (read from the fields at the click, not from the run that drew the button)."""
    first, count = int(st.session_state["lesson.first_seed"]), int(st.session_state["lesson.students"])
    seeds = tuple((first + i) % (lessons.MAX_SEED + 1) for i in range(count))
    st.session_state["lesson.problem_set"] = (seeds, *_problem_set(seeds))
