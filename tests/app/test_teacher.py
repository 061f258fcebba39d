"""A class through AppTest: the Teacher page creates it (code, QR code, teacher link, every student's
link), the Lesson page in class mode joins and stores each finished exercise, and the teacher's view
shows what the class database holds (issue 32 §2). Each test has its own SQLite database
(`ATTNVIZ_CLASS_DB`); tests/classroom checks the database itself on SQLite and PostgreSQL."""

from __future__ import annotations

import re

import pytest

from attnviz import classroom, lessons
from attnviz.app.teacher import handout
from attnviz.classroom.rules import ALPHABET
from tests.app.conftest import assert_clean, open_directly, open_page, plain
from tests.app.test_lesson import answer, reveal_shown, right, wrong

pytestmark = pytest.mark.slow

BASICS = {"basics": list(lessons.lesson("basics").exercise_ids())}
NICK = "<b>Ada</b> *x* [y](http://e.vil)"  # markup that must stay text


@pytest.fixture(autouse=True)
def class_db(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_CLASS_DB", f"sqlite:///{tmp_path / 'classes.sqlite'}")
    yield
    classroom.default_db().close()


def codes(at) -> list[str]:
    return [c.value for c in at.code]


def test_creating_a_class_shows_its_code_qr_code_private_link_and_every_students_link():
    at = open_page("teacher")
    at.text_input(key="teacher.name").input("Year 2, group B")
    at.multiselect(key="teacher.lessons").set_value(["basics", "modern"])
    at.form_submit_button[0].click().run()
    assert_clean(at)
    code = at.title[1].value
    assert re.fullmatch(f"[{ALPHABET}]{{6}}", code)
    token = next(c.split("token=")[1] for c in codes(at) if c.startswith("teacher?token="))
    view = classroom.class_view(token)  # the link's token reads this class
    assert (view.code, view.name) == (code, "Year 2, group B")
    assert [lid for lid, _ in view.lessons] == ["basics", "modern"]
    assert view.lessons[0][1] == lessons.lesson("basics").exercise_ids()
    assert f"lesson?class={code}&lesson=basics" in codes(at)
    assert any("keep it private" in w.value for w in at.warning)
    assert len(at.image) >= 1  # the class link's QR code
    lists = [c for c in codes(at) if c.count("\n") >= 29]
    assert lists[0].splitlines() == [f"lesson?class={code}&lesson=basics&seed={s}" for s in range(1, 31)]


def test_a_class_of_two_lessons_hands_out_one_problem_set_holding_both(monkeypatch):
    """The walk: each lesson had its own links and problem set, so a class of two lessons meant two
    files to print. A class of several lessons also gets one set: each student's sheets for every
    lesson, and one list of links. The set itself (`problem_set.markdown` over several lessons, with
    their links) is tested in tests/lessons/test_lessons_modern.py and tests/lessons/test_problem_set_links.py; the
    modern lesson runs SmolLM2, so here the page's request is recorded rather than built again."""
    asked = []

    def problem_set(seeds, lesson_ids, links=None, instances=None):
        asked.append((seeds, lesson_ids, links, instances))
        return "# the set", "<h1>the set</h1>"

    monkeypatch.setattr("attnviz.app.lesson.work.problem_set", problem_set)
    at = open_page("teacher")
    at.text_input(key="teacher.name").input("Year 2")
    at.multiselect(key="teacher.lessons").set_value(["basics", "modern"])
    at.form_submit_button[0].click().run()
    code = at.title[1].value
    both = [c for c in codes(at) if c.count("\n") >= 59]
    assert both[0].splitlines() == [
        f"lesson?class={code}&lesson={lid}&seed={s}" for lid in ("basics", "modern") for s in range(1, 31)
    ]
    at.number_input(key="teacher.all.first_seed").set_value(4)
    at.number_input(key="teacher.all.students").set_value(2)
    at.button(key="teacher.all.prepare").click().run()
    assert_clean(at)
    drawn = {s: classroom.instance_seed(code, s) for s in (4, 5)}  # the class's numbers (issue 46, point 4)
    assert asked == [((4, 5), ("basics", "modern"), None, drawn)]  # no browser, no absolute links to print
    assert at.session_state["teacher.all.problem_set"] == ((4, 5), "# the set", "<h1>the set</h1>")
    offered = {b.proto.label for b in at.get("download_button") if "teacher.all" in b.proto.id}
    assert offered == {"Links (CSV: lesson, seed, link)", "Markdown", "Print-ready HTML"}
    rows = [(lid, s, f"lesson?lesson={lid}&seed={s}") for lid in ("basics", "modern") for s in (4, 5)]
    assert handout.links_csv(rows, by_lesson=True).splitlines()[:2] == [
        "lesson,seed,link",
        "basics,4,lesson?lesson=basics&seed=4",
    ]


def test_a_class_needs_a_name_and_a_lesson_and_says_which_field():
    at = open_page("teacher")
    at.multiselect(key="teacher.lessons").set_value([])
    at.form_submit_button[0].click().run()
    assert "Lessons: choose at least one lesson" in plain(at.error[0].value)
    at.multiselect(key="teacher.lessons").set_value(["basics"])
    at.form_submit_button[0].click().run()
    assert "name" in plain(at.error[0].value) and len(at.title) == 1  # no class made


def in_class(info, step: int, sheet: int):
    """Step `step` as a student of the class `info` with link seed `sheet` sees it: drawn from the class's
    instance of that seed (issue 46, point 4), not from the public seed `sheet`."""
    return lessons.exercise(step, classroom.instance_seed(info.code, sheet))


def join(at, nickname: str):
    at.text_input(key="lesson.nickname_typed").input(nickname)
    at.form_submit_button[0].click().run()
    assert_clean(at)
    return at


def test_a_student_joins_and_each_finished_exercise_is_stored():
    info = classroom.create_class("B", lessons=BASICS)
    at = open_directly("lesson", {"class": info.code, "lesson": "basics", "seed": "3"})
    assert not at.header and any(f"Class {info.code}" in i.value for i in at.info)  # the nickname first
    join(at, NICK)
    caption = " ".join(c.value for c in at.caption)
    assert plain(caption).count(NICK) == 1  # shown as text: every markup character escaped
    assert at.query_params["lesson.nickname"] == [NICK] or at.query_params["lesson.nickname"] == NICK
    ex0, ex1 = in_class(info, 0, 3), in_class(info, 1, 3)
    answer(at, ex0, wrong(ex0), sheet=3)
    answer(at, ex0, right(ex0), sheet=3)  # right after one wrong try
    at.button(key="lesson.next").click().run()
    answer(at, ex1, wrong(ex1), sheet=3)
    at.button(key="lesson.show").click().run()  # shown after one wrong try
    assert_clean(at)

    view = classroom.class_view(info.teacher_token)
    [student] = view.students
    assert (student.nickname, student.answered, student.right_first) == (NICK, 2, 0)
    scores, scaling = view.exercises[0], view.exercises[1]
    assert (scores.students, scores.right_first, scores.share_right) == (1, 0, 0.0)
    assert scores.common_wrong == ex0.parts[0].options[wrong(ex0)[0]]
    assert scaling.common_wrong == ex1.parts[0].options[wrong(ex1)[0]]
    rows = classroom.class_csv(info.teacher_token).splitlines()[1:]
    assert [r.split(",")[1:6] for r in rows] == [
        ["basics.scores", "3", scores.common_wrong, "False", "2"],
        ["basics.scaling", "3", scaling.common_wrong, "False", "1"],
    ]


def test_a_student_without_the_link_types_the_projected_code_then_a_nickname():
    """The Teacher page tells students to type the code on the Lesson page: the code goes into the
    link (lower case and a dash forgiven), the join form follows, and the student is in the class."""
    info = classroom.create_class("C", lessons=BASICS)
    at = open_page("lesson", {"lesson": "basics"})
    at.text_input(key="lesson.code_typed").input("0000-00")  # cannot be a code: named, nothing joined
    at.button(key="lesson.code_join").click().run()
    assert_clean(at)
    assert "code: got '0000-00'" in plain(at.sidebar.error[0].value) and "class" not in at.query_params
    typed = f"{info.code[:3].lower()}-{info.code[3:]}"
    at.text_input(key="lesson.code_typed").input(typed)
    at.button(key="lesson.code_join").click().run()
    assert_clean(at)
    assert at.query_params["class"] in ([info.code], info.code)
    assert any(f"Class {info.code}" in i.value for i in at.info)  # the nickname next
    join(at, "Grace")
    assert [s.nickname for s in classroom.class_view(info.teacher_token).students] == ["Grace"]


def test_a_repeated_submission_is_refused_and_the_stored_answer_stays():
    info = classroom.create_class("B", lessons=BASICS)
    ex = in_class(info, 0, 4)
    first = join(open_directly("lesson", {"class": info.code, "seed": "4"}), "Bo")
    again = join(
        open_directly("lesson", {"class": info.code, "seed": "4"}), "Bo"
    )  # another tab, same nickname
    answer(first, ex, right(ex), sheet=4)
    answer(again, ex, wrong(ex), sheet=4)  # the second tab joined before the first answer was stored
    answer(again, ex, right(ex), sheet=4)
    assert reveal_shown(again) and not again.error
    assert any("stored already: it counts" in c.value for c in again.caption)
    view = classroom.class_view(info.teacher_token)
    assert (view.exercises[0].students, view.exercises[0].right_first) == (1, 1)  # the first answer stays


def test_an_exercise_outside_the_class_is_not_stored_and_says_so():
    info = classroom.create_class("B", lessons={"basics": ["basics.scaling"]})
    at = join(open_directly("lesson", {"class": info.code, "seed": "2"}), "Cy")
    ex = in_class(info, 0, 2)
    answer(at, ex, right(ex), sheet=2)
    assert any("not part of your class" in c.value for c in at.caption)
    assert classroom.class_view(info.teacher_token).students[0].answered == 0


@pytest.mark.parametrize("raw", ["ZZZZZZ", "abc"])
def test_an_unknown_or_malformed_class_code_is_named_never_a_traceback(raw):
    at = open_directly("lesson", {"class": raw, "seed": "1"})
    assert_clean(at)
    if raw == "abc":  # cannot be a code: the lesson runs without a class
        assert "code" in plain(at.warning[0].value) and at.header[0].value == "1. Scores"
    else:  # could be one: joining says no running class has it
        join(at, "Di")
        assert "code" in plain(at.error[0].value) and "running class" in plain(at.error[0].value)
        assert not at.header


def test_the_teacher_view_shows_the_database_with_nicknames_as_text():
    info = classroom.create_class("Year <i>2</i>", lessons=BASICS)
    for nick, right_first in ((NICK, True), ("Eve", False), ("Fay", True)):
        student = classroom.join(info.code, nick)
        classroom.record_answer(
            info.code, student, "basics.scores", 1, "k1" if right_first else "k2", right=right_first,
            attempts=1 if right_first else 3, seconds=12.0,
        )  # fmt: skip
    at = open_directly("teacher", {"token": info.teacher_token})
    assert_clean(at)
    assert plain(at.header[0].value) == "Year <i>2</i>"
    exercises, students = (d.value for d in at.dataframe)  # one lesson's table, then the students'
    assert any(m.value == "**Attention in eight steps**" for m in at.markdown)
    assert list(exercises["Step"]) == [
        f"{i + 1}. {s.title}" for i, s in enumerate(lessons.lesson("basics").steps)
    ]
    row = exercises.iloc[0]
    assert (row["Answered"], row["Right first time"]) == (3, 2)
    assert row["Share right first time"] == pytest.approx(2 / 3)
    assert (row["Most common wrong answer"], row["Gave it"]) == ("k2", 1)
    assert list(students["Nickname"]) == [NICK, "Eve", "Fay"]  # verbatim: a dataframe shows text
    assert list(students["Right first time"]) == [1, 0, 1]
    assert list(students["Progress"]) == pytest.approx([1 / 8] * 3)


@pytest.mark.parametrize("which", ["wrong token", "class code as token", "student link"])
def test_without_the_teacher_link_nothing_of_the_class_is_read(which):
    info = classroom.create_class("Secret class", lessons=BASICS)
    classroom.record_answer(info.code, classroom.join(info.code, "Gus"), "basics.scores", 1, "k1",
                            right=True, attempts=1, seconds=3.0)  # fmt: skip
    query = {
        "wrong token": {"token": info.teacher_token[:-2] + "AA"},
        "class code as token": {"token": info.code},
        "student link": {"class": info.code, "lesson": "basics"},
    }[which]
    at = open_directly("teacher", query)
    assert_clean(at)
    page = " ".join(e.value for e in [*at.markdown, *at.header, *at.caption, *at.title])
    assert "Secret class" not in page and "Gus" not in page and not at.dataframe
    if "token" in query:
        assert "teacher_token" in plain(at.error[0].value)
        assert info.teacher_token not in plain(at.error[0].value) and query["token"] not in plain(
            at.error[0].value
        )
    else:
        assert at.form_submit_button[0].label == "Create the class"
