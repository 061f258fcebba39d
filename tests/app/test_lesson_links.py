"""The Lesson page's three lessons through AppTest: the picker, deep links (each lesson, a step, a seed;
the old `lesson.step` / `lesson.log` links), feedback restored on reopening a link, and the figures'
properties (issue 32 §1, issue 33).

Every exercise shown is compared with the library's (`attnviz.lessons`, checked against independent
oracles in tests/lessons/test_lessons*.py); the steps that run SmolLM2 are built in a worker (the page's
door), so these tests also check that the worker's exercise is the library's.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pytest

from attnviz import lessons
from attnviz.app.lesson import state
from attnviz.app.lesson.figures import LABELS_PX, NAME_PX
from attnviz.plots.colorbar import BAR_NAME
from tests.app.conftest import array, assert_clean, figures, open_directly, open_page, plain
from tests.app.test_lesson import answer, reveal_shown, right, wrong

pytestmark = pytest.mark.slow


def query(at) -> dict:
    return {k: (v[-1] if isinstance(v, list) else v) for k, v in dict(at.query_params).items()}


def shown_text(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def header(at) -> str:
    return at.header[0].value


@pytest.mark.parametrize(
    ("lesson_id", "step", "seed"),
    [("basics", 3, 5), ("modern", 3, 5), ("modern", 7 - 1, 11), ("circuits", 1, 5)],
    ids=["basics-3", "modern-window", "modern-lens", "circuits-induction"],
)
def test_a_deep_link_opens_that_exercise_for_that_seed(lesson_id, step, seed):
    chosen = lessons.lesson(lesson_id)
    at = open_directly("lesson", {"lesson": lesson_id, "step": str(step), "seed": str(seed)})
    assert_clean(at)
    ex = chosen.exercise(step - 1, seed)  # the library, in this process
    assert header(at) == f"{step}. {ex.title}"
    assert ex.given in shown_text(at) and ex.intro in shown_text(at)
    assert at.segmented_control(key="lesson.pick").value == lesson_id
    assert at.progress[0].proto.text.startswith(f"Seed {seed} · {step}. {ex.title}")
    assert query(at) | {"seed": str(seed)} == query(at)  # the seed stays the sidebar's
    assert (query(at)["lesson"], query(at)["step"]) == (lesson_id, str(step))  # not rewritten to step 1
    if lesson_id == "circuits":  # the question's figure: the four heads the library chose, in its order
        [panels] = figures(at)
        titles = [a["text"] for a in panels["layout"]["annotations"]]
        assert titles[:4] == list(ex.data["names"])


def test_a_step_named_by_its_key_and_the_summary_open_directly():
    at = open_directly("lesson", {"lesson": "modern", "step": "window", "seed": "3"})
    assert header(at) == "3. Sliding windows" and query(at)["step"] == "3"
    at = open_directly("lesson", {"lesson": "basics", "step": "summary", "seed": "3"})
    assert header(at) == "Summary" and query(at)["step"] == "summary"


@pytest.mark.parametrize(
    ("link", "step"),
    [
        ({"seed": "5", "lesson.step": "3"}, 3),
        ({"seed": "5", "lesson.step": "4", "lesson.log": "1r0s" + "0o" * 6}, 4),
    ],
    ids=["without-log", "with-log"],
)
def test_old_links_keep_working_and_are_rewritten(link, step):
    """Issue 33: `/lesson?seed=5&lesson.step=3` opened step 1 and rewrote the URL."""
    at = open_directly("lesson", link)
    assert_clean(at)
    assert header(at) == f"{step}. {lessons.exercise(step - 1, 5).title}"
    q = query(at)
    assert (q["lesson"], q["step"], "lesson.step" in q) == ("basics", str(step), False)
    assert q["lesson.log"] == link.get("lesson.log", "0o" * 8)
    if "lesson.log" in link:  # the progress it carried: step 1 right, step 2 shown
        icons = [at.button(key=f"lesson.go.{i}").proto.icon for i in range(3)]
        assert icons == [":material/check:", ":material/visibility:", ""]


@pytest.mark.parametrize(
    ("link", "field"),
    [
        ({"lesson": "nope"}, "lesson='nope'"),
        ({"lesson": "modern", "step": "99"}, "step='99'"),
        ({"lesson.log": "zz9"}, "lesson.log='zz9'"),  # the walk: dropped without a word
        ({"lesson.answers": "%%%"}, "lesson.answers='%%%'"),
    ],
)
def test_a_bad_lesson_or_step_is_named_and_the_page_opens_at_a_step_that_exists(link, field):
    at = open_directly("lesson", link)
    assert_clean(at)
    notes = " ".join(plain(w.value) for w in at.warning)
    assert f"URL parameter {field} ignored" in notes
    assert header(at).startswith("1. ")


def test_the_picker_switches_lessons_and_keeps_each_ones_progress():
    at = open_page("lesson", {"seed": "4"})
    ex = lessons.exercise(0, 4)
    answer(at, ex, right(ex))
    at.segmented_control(key="lesson.pick").set_value("modern").run()
    assert_clean(at)
    assert header(at) == f"1. {lessons.lesson('modern').steps[0].title}"
    assert (query(at)["lesson"], query(at)["step"]) == ("modern", "1")
    assert query(at)["lesson.log"] == "0o" * len(lessons.lesson("modern").steps)
    at.segmented_control(key="lesson.pick").set_value("basics").run()
    assert header(at) == f"1. {ex.title}" and reveal_shown(at)  # solved before the switch: still solved
    assert query(at)["lesson.log"].startswith("0r")


def _notes(at) -> list[tuple[bool, str]]:
    return [(True, plain(s.value)) for s in at.success] + [(False, plain(e.value)) for e in at.error]


def test_a_reopened_link_restores_the_answer_and_its_feedback():
    """Issue 33: the answer came back, its feedback did not. Here both, for a wrong try and a right one."""
    seed = 7
    ex = lessons.lesson("modern").exercise("window", seed)
    at = open_directly("lesson", {"lesson": "modern", "step": "window", "seed": str(seed)})
    picked = wrong(ex)
    answer(at, ex, picked)
    before = _notes(at)
    graded = lessons.grade(ex, picked)
    expected = [(ok, f"({'ab'[k]}) {why}") for k, (ok, why) in enumerate(graded.notes)]
    assert sorted(before) == sorted(expected) and not graded.right

    again = open_directly("lesson", query(at))  # the same URL in a new session
    assert_clean(again)
    assert header(again) == "3. Sliding windows" and not reveal_shown(again)
    assert sorted(_notes(again)) == sorted(before)  # the same feedback, right and wrong parts
    key = f"lesson.modern.{seed}.2"
    cells = again.pills(key=f"{key}.0.0").value
    assert cells == [c for c, on in zip(ex.parts[0].options, np.asarray(picked[0])[0], strict=True) if on]
    assert again.pills(key=f"{key}.1").value == picked[1]

    answer(again, ex, right(ex))
    solved = open_directly("lesson", query(again))
    assert reveal_shown(solved)
    assert [ok for ok, _ in _notes(solved)] == [True, True]
    assert all(why.startswith(("(a) Right", "(b) Right")) for _, why in _notes(solved))


def test_a_link_with_a_hand_edited_answer_is_ignored_not_a_traceback():
    bad = state.encode_answers({0: [99], 1: ["x"], 40: [1]})
    at = open_directly("lesson", {"seed": "2", "lesson.answers": bad + "!!", "lesson.log": "0o" * 8})
    assert_clean(at)
    at = open_directly("lesson", {"seed": "2", "lesson.answers": bad, "lesson.log": "0o" * 8})
    assert_clean(at)
    assert not at.error and not at.success  # nothing graded from answers that do not fit
    assert at.pills(key="lesson.basics.2.0.0").value is None


def test_step_1s_colour_bar_covers_every_cell_and_fits_its_figure():
    """Issue 33: the QKᵀ colour bar showed −1 … 0 while cells reached 1.46 (the bar was cut off)."""
    seed = 5
    ex = lessons.exercise(0, seed)
    at = open_page("lesson", {"seed": str(seed)})
    answer(at, ex, right(ex))
    [fig] = figures(at)
    [heat] = [t for t in fig["data"] if t["type"] == "heatmap"]
    cells = array(heat["z"])
    assert np.allclose(cells, ex.data["scores"], atol=1e-9)
    assert heat["zmin"] <= cells.min() and heat["zmax"] >= cells.max()
    bar, width, left = heat["colorbar"], fig["layout"]["width"], fig["layout"]["margin"]["l"]
    [name] = [a for a in fig["layout"]["annotations"] if a.get("name") == BAR_NAME]
    assert bar["lenmode"] == "pixels" and bar.get("xref", "paper") == "paper" and bar["x"] == 0
    assert (
        name["text"] == "value" and name["xref"] == "paper" and name["x"] == 0 and name["xanchor"] == "left"
    )
    assert name["xshift"] > bar["len"]  # right of the bar, clear of it (the browser test measures it drawn)
    assert left + LABELS_PX + bar["len"] + NAME_PX <= width  # bar and name inside, however wide the labels


def test_the_summary_marks_right_first_time_with_an_icon_the_fonts_have():
    """Issue 33: "☐ right first time" — ✅ has no glyph in the app's fonts."""
    at = open_directly("lesson", {"seed": "1", "step": "summary", "lesson.log": "0r1r0s2s" + "0o" * 4})
    results = list(at.table[0].value["Result"])
    assert results[0] == ":material/check_circle: right first time"
    assert results[1] == "right after 1 wrong try"
    # shown with no try first is said as such (the walk read "answer shown (after 0 wrong tries)")
    assert results[2] == ":material/visibility: answer shown, no try first"
    assert results[3] == ":material/visibility: answer shown (after 2 wrong tries)"
    assert not any("✅" in r or "☐" in r for r in results)


def test_a_circuits_step_built_in_a_worker_grades_and_reveals_as_the_library():
    seed = 5
    ex = lessons.lesson("circuits").exercise("induction", seed)
    at = open_directly("lesson", {"lesson": "circuits", "step": "1", "seed": str(seed)})
    answer(at, ex, wrong(ex))
    errors = [plain(e.value) for e in at.error]
    assert errors == [plain(ex.parts[0].check(wrong(ex)[0])[1])]
    answer(at, ex, right(ex))
    assert reveal_shown(at)
    scan = figures(at)[1]  # the role scan's heatmaps: the library's scores
    z = [array(t["z"]) for t in scan["data"] if t["type"] == "heatmap"]
    assert any(np.allclose(m, ex.data["scores"]["induction"], atol=1e-6) for m in z)
    link = at.link_button[0].proto.url
    assert dict(parse_qsl(urlsplit(link).query)) == ex.link.page_keys
