"""A class the teacher controls, and a lesson that counts right (issue 46, points 2, 3, 4, 7, 11 and 22)
through AppTest: a link never joins by itself, the teacher closes joining and removes a student from the
view, class creation is limited per visitor, an empty Check is not an answer, the keys stay hidden from
a class's students, and joining again restores the steps the database holds. Each test has its own
SQLite database; tests/classroom checks the rules on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from sqlalchemy import update

from attnviz import classroom, lessons
from attnviz.app.frame import door
from attnviz.app.lesson import class_mode
from attnviz.app.teacher import visitor
from attnviz.classroom.models import Class
from tests.app.conftest import assert_clean, open_directly, open_page, plain
from tests.app.test_lesson import answer, right, wrong
from tests.app.test_teacher import BASICS, in_class, join

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def class_db(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_CLASS_DB", f"sqlite:///{tmp_path / 'classes.sqlite'}")
    yield
    classroom.default_db().close()


def nicknames(info) -> list[str]:
    return [s.nickname for s in classroom.class_view(info.teacher_token).students]


def progress_text(at) -> str:
    return at.get("progress")[0].proto.text


def test_a_link_with_a_nickname_fills_the_form_in_and_joins_only_on_join():
    info = classroom.create_class("B", lessons=BASICS)
    at = open_directly("lesson", {"class": info.code, "lesson": "basics", "lesson.nickname": "Bot"})
    assert_clean(at)
    assert nicknames(info) == [] and not at.header  # the form, not the lesson
    assert at.text_input(key="lesson.nickname_typed").value == "Bot"
    # The box no longer stops typing at 40 (its counter covered the nickname on a phone): Join says it.
    at.text_input(key="lesson.nickname_typed").input("x" * 41)
    at.form_submit_button[0].click().run()
    assert nicknames(info) == [] and "1 … 40 characters" in plain(at.error[0].value)
    at.text_input(key="lesson.nickname_typed").input("Bot")
    at.form_submit_button[0].click().run()  # the student's own action
    assert nicknames(info) == ["Bot"] and at.header[0].value == "1. Scores"


def joined_and_answered(info, name: str) -> None:
    """`name` joins the class and answers the first exercise wrong once."""
    student = classroom.join(info.code, name)
    classroom.record_answer(info.code, student, "basics.scores", 1, "x", right=False, attempts=1, seconds=1.0)


def remove(teacher, name: str, *, keep_answers: bool) -> None:
    """The teacher removes `name` from the class on the Teacher page, keeping or deleting their answers."""
    teacher.selectbox(key="teacher.remove_who").set_value(name)
    keep = teacher.radio(key="teacher.remove_keep")
    keep.set_value(keep.options[0 if keep_answers else 1])
    next(b for b in teacher.button if b.label == "Remove the student").click().run()
    assert_clean(teacher)


def test_the_teacher_closes_joining_and_removes_a_student_from_the_view():
    info = classroom.create_class("B", lessons=BASICS)
    joined_and_answered(info, "Bot")
    teacher = open_directly("teacher", {"token": info.teacher_token})
    teacher.button(key="teacher.close").click().run()
    assert_clean(teacher)
    assert classroom.class_view(info.teacher_token).joining_open is False
    late = join(open_directly("lesson", {"class": info.code}), "Late")
    assert "closed joining" in plain(late.error[0].value) and nicknames(info) == ["Bot"]
    remove(teacher, "Bot", keep_answers=False)
    assert (
        nicknames(info) == [] and classroom.class_csv(info.teacher_token).count("\n") == 1
    )  # answers deleted
    teacher.button(key="teacher.reopen").click().run()
    join(late, "Late")
    assert nicknames(info) == ["Late"]
    assert "Bot" not in " ".join(str(d.value) for d in teacher.run().dataframe)


def test_a_student_removed_with_their_answers_kept_is_not_counted_in_the_class():
    """The final walk: "Students joined" counted a removed student whose answers were kept (10 with
    "Bob (removed)" listed). The metric counts those in the class and says how many were removed."""
    info = classroom.create_class("B", lessons=BASICS)
    for name in ("Ada", "Bob"):
        joined_and_answered(info, name)
    teacher = open_directly("teacher", {"token": info.teacher_token})
    remove(teacher, "Bob", keep_answers=True)
    assert classroom.class_csv(info.teacher_token).count("Bob") == 1  # the answer kept
    (count,) = [m for m in teacher.metric if m.label == "Students in the class"]
    assert count.value == "1" and "1 removed" in count.proto.help


def test_one_visitor_creates_a_few_classes_then_is_told_to_wait():
    at = open_page("teacher")
    limit = classroom.default_db().limits.created_per_visitor
    for i in range(limit + 1):
        at.text_input(key="teacher.name").input(f"Class {i}")
        at.form_submit_button[0].click().run()
        assert_clean(at)
    assert "from one browser" in plain(at.error[0].value) and "Try again in" in at.error[0].value


def test_check_with_nothing_entered_counts_nothing_and_stores_nothing():
    info = classroom.create_class("B", lessons=BASICS)
    at = join(open_directly("lesson", {"class": info.code, "seed": "0"}), "Ada")
    at.form_submit_button(key="lesson.check").click().run()  # nothing picked
    assert_clean(at)
    assert any("Nothing entered" in w.value and "Nothing was counted" in w.value for w in at.warning)
    assert "lesson.show" not in [b.key for b in at.button]  # no wrong try: no "Show me the answer"
    ex = in_class(info, 0, 0)
    answer(at, ex, right(ex), sheet=0)
    [student] = classroom.class_view(info.teacher_token).students
    assert (student.answered, student.right_first) == (1, 1)  # right first time: the empty Check was no try
    assert "(no answer)" not in classroom.class_csv(info.teacher_token)


def test_inside_a_class_the_answer_keys_are_not_offered():
    info = classroom.create_class("B", lessons=BASICS)
    at = join(open_directly("lesson", {"class": info.code, "seed": "5"}), "Ada")
    assert not [e for e in at.expander if "For teachers" in e.label]
    assert "lesson.prepare" not in [b.key for b in at.button]
    alone = open_directly("lesson", {"seed": "5"})
    assert [e for e in alone.expander if "For teachers" in e.label]


def differing(info, step: int):
    """The first link seed whose class instance and public instance of `step` want different answers: its
    seed, the class's exercise and the public one."""
    for sheet in range(1, 40):
        ex, public = in_class(info, step, sheet), lessons.exercise(step, sheet)
        if right(ex) != right(public):
            return sheet, ex, public
    raise AssertionError("the class's instances want the public answers for 39 seeds")


def test_a_class_student_sees_and_is_graded_on_the_classs_own_numbers():
    """Issue 46, point 4: the public key of a student's link seed (`/lesson?seed=N`, printable) is not
    theirs in a class: they see the class's instance, are graded on it, and the seed shown and stored is
    still N. The revealed step's link, whose configuration seed gives the instance away, waits."""
    info = classroom.create_class("B", lessons=BASICS)
    sheet, ex, public = differing(info, 0)
    at = join(open_directly("lesson", {"class": info.code, "seed": str(sheet)}), "Ada")
    shown = " ".join(m.value for m in at.markdown)
    assert ex.given.strip() in shown and public.given.strip() not in shown
    assert f"Seed {sheet} ·" in progress_text(at)
    answer(at, ex, right(public), sheet=sheet)  # the public key's answer: wrong in this class
    assert at.error and not any(s.value == "Why" for s in at.subheader)
    answer(at, ex, right(ex), sheet=sheet)
    assert any(s.value == "Why" for s in at.subheader) and ex.explanation in " ".join(
        m.value for m in at.markdown
    )
    rows = classroom.class_csv(info.teacher_token).splitlines()[1:]
    assert [r.split(",")[1:3] for r in rows] == [["basics.scores", str(sheet)]]  # the link's seed
    assert "right on a later try" in rows[0]
    assert ex.link is not None and "seed" in ex.link.config
    assert not at.get("link_button") and any(class_mode.LINK_WAITS in c.value for c in at.caption)
    assert class_mode.link_waits(ex.link, None, False) is False  # alone: the link is there at once
    assert class_mode.link_waits(ex.link, classroom.Student(info.code, "Ada"), True) is False  # all done


def test_a_class_that_ended_under_a_student_is_said_not_drawn_from_another_seed():
    info = classroom.create_class("B", lessons=BASICS)
    at = join(open_directly("lesson", {"class": info.code, "seed": "6"}), "Ada")
    past = datetime.now(UTC) - timedelta(days=1)
    with classroom.default_db().engine.begin() as c:
        c.execute(update(Class).where(Class.code == info.code).values(expires_at=past))
    at.number_input(key="seed").set_value(7).run()  # another sheet: its instance is asked for
    assert_clean(at)
    assert not at.header and "a running class" in plain(at.error[0].value)


def test_the_teachers_key_is_the_classs_and_the_public_key_is_not(monkeypatch):
    """The Teacher page prints each student's sheet (headed by their link seed) and key from the class's
    instance; the Lesson page's "For teachers" without a class prints the public seed's, another key."""
    monkeypatch.setattr(door, "run", lambda task, *args, **_: task(*args))  # the worker's task, run here
    info = classroom.create_class("B", lessons=BASICS)
    sheet, ex, public = differing(info, 0)
    assert ex.explanation != public.explanation
    keys = {}
    for at, prefix in (
        (open_directly("teacher", {"token": info.teacher_token}), "teacher.view.basics"),
        (open_directly("lesson", {"seed": str(sheet)}), "lesson"),
    ):
        at.number_input(key=f"{prefix}.first_seed").set_value(sheet)
        at.number_input(key=f"{prefix}.students").set_value(1)
        at.button(key=f"{prefix}.prepare").click().run()
        assert_clean(at)
        _, md, _ = at.session_state[f"{prefix}.problem_set"]
        keys[prefix] = md.split("# Answer key")[1]
        assert keys[prefix].startswith(f" — seed {sheet}\n")
        assert f"worksheet, seed {sheet}" in md
    assert (
        ex.explanation in keys["teacher.view.basics"]
        and public.explanation not in keys["teacher.view.basics"]
    )
    assert public.explanation in keys["lesson"] and ex.explanation not in keys["lesson"]


def test_joining_again_restores_the_steps_the_database_holds_and_the_csv_says_how_they_ended():
    info = classroom.create_class("B", lessons=BASICS)
    first = join(open_directly("lesson", {"class": info.code, "seed": "3"}), "Chloé")
    ex0, ex1 = in_class(info, 0, 3), in_class(info, 1, 3)
    answer(first, ex0, wrong(ex0), sheet=3)
    answer(first, ex0, right(ex0), sheet=3)  # right on a later try
    first.button(key="lesson.next").click().run()
    answer(first, ex1, wrong(ex1), sheet=3)
    first.button(key="lesson.show").click().run()  # the answer shown
    assert "2 of 8 steps done" in progress_text(first)
    again = join(open_directly("lesson", {"class": info.code, "seed": "3"}), "Chloé")  # a new session
    assert "2 of 8 steps done" in progress_text(again)
    csv_text = classroom.class_csv(info.teacher_token)
    assert csv_text.startswith("\ufeff") and csv_text.count("right on a later try") == 1
    assert csv_text.count("answer shown") == 1


def create(at, name="B"):
    at.text_input(key="teacher.name").input(name)
    at.form_submit_button[0].click().run()
    assert_clean(at)
    return at


def links(at) -> list[str]:
    return [c.value for c in at.code if "lesson?class=" in c.value]


def test_links_at_localhost_are_said_and_the_teacher_gives_the_students_address(monkeypatch):
    """Issue 46, point 5: opened as localhost (the README's quick start), every link pointed at this
    machine, and no phone could open them — silently."""
    monkeypatch.setattr("attnviz.app.teacher.handout.browser_url", lambda: "http://localhost:8501")
    at = create(open_page("teacher"))
    assert any("only this computer can reach" in w.value for w in at.warning)
    assert links(at)[0].startswith("http://localhost:8501/lesson?class=")
    at.text_input(key="teacher.address_typed").input("http://192.168.1.20:8501/").run()
    assert_clean(at)
    assert links(at)[0].startswith("http://192.168.1.20:8501/lesson?class=")
    assert not any("only this computer can reach" in w.value for w in at.warning)
    at.text_input(key="teacher.address_typed").input("192.168.1.20").run()  # no scheme: named, not taken
    assert "base_url" in plain(at.error[0].value)


def test_the_operator_sets_the_students_address(monkeypatch):
    monkeypatch.setattr("attnviz.app.teacher.handout.browser_url", lambda: "http://127.0.0.1:8501")
    monkeypatch.setenv("ATTNVIZ_PUBLIC_URL", "https://class.example.org")
    at = create(open_page("teacher"))
    assert links(at)[0].startswith("https://class.example.org/lesson?class=")
    assert not any("only this computer can reach" in w.value for w in at.warning)
    monkeypatch.setenv("ATTNVIZ_PUBLIC_URL", "not an address")
    at = create(open_page("teacher"))
    assert "ATTNVIZ_PUBLIC_URL" in plain(at.error[0].value)
    assert links(at)[0].startswith("http://127.0.0.1:8501/")  # the browser's, said to be local


def test_the_live_view_shows_a_student_stuck_on_wrong_tries():
    info = classroom.create_class("B", lessons=BASICS)
    at = join(open_directly("lesson", {"class": info.code, "seed": "2"}), "Ada")
    ex = in_class(info, 0, 2)
    answer(at, ex, wrong(ex), sheet=2)
    answer(at, ex, wrong(ex), sheet=2)
    teacher = open_directly("teacher", {"token": info.teacher_token})
    students = teacher.dataframe[-1].value
    assert list(students["Stuck on"]) == ["1. Scores: 2 wrong tries"] and list(students["Finished"]) == [0]


def tornado_cookies(loads: int) -> list[str]:
    """The `_streamlit_xsrf` cookie's text as Tornado writes it on `loads` page loads of one browser: the
    first load makes the token, each later one sends the cookie back and gets the token masked anew."""
    from unittest.mock import Mock

    from tornado.httputil import HTTPHeaders, HTTPServerRequest, RequestStartLine
    from tornado.web import Application, RequestHandler

    app = Application(xsrf_cookies=True, xsrf_cookie_name=visitor.COOKIE)
    texts, sent = [], HTTPHeaders({"Host": "127.0.0.1"})
    for _ in range(loads):
        line = RequestStartLine("GET", "/", "HTTP/1.1")
        request = HTTPServerRequest(headers=sent, connection=Mock(), start_line=line)
        texts.append(RequestHandler(app, request).xsrf_token.decode())
        sent = HTTPHeaders({"Host": "127.0.0.1", "Cookie": f"{visitor.COOKIE}={texts[0]}"})
    return texts


def key_of(cookie: str, monkeypatch) -> str:
    monkeypatch.setattr(visitor.st, "context", SimpleNamespace(cookies={visitor.COOKIE: cookie}))
    return visitor.key()


def test_one_browser_is_one_visitor_across_reloads(monkeypatch):
    """Every reload gets the XSRF cookie masked anew (the walk of 28 Nov 2026 joined one browser under two
    nicknames by reloading): the visitor key is the token under the mask, another browser's differs."""
    first, again, later = tornado_cookies(3)
    assert len({first, again, later}) == 3  # the cookie's text changes with each load
    keys = {key_of(c, monkeypatch) for c in (first, again, later)}
    (other,) = tornado_cookies(1)
    assert len(keys) == 1 and key_of(other, monkeypatch) not in keys


def test_the_browser_that_joined_comes_back_by_its_link_and_no_other(monkeypatch):
    """A reload or a server restart is a new session (the walk of 28 Nov 2026 found the tab's first click
    after a restart landing on the join form): the browser that joined under the link's nickname is back in
    with its stored steps; another browser with the same link gets the form, and nobody new joins by a link."""
    info = classroom.create_class("B", lessons=BASICS)
    link = {"class": info.code, "seed": "3", "lesson.nickname": "Chloé"}
    monkeypatch.setattr(visitor, "key", lambda: "a" * 64)  # this browser
    first = join(open_directly("lesson", {"class": info.code, "seed": "3"}), "Chloé")
    ex0 = in_class(info, 0, 3)
    answer(first, ex0, right(ex0), sheet=3)
    back = open_directly("lesson", link)  # a new session of the same browser, the link as it left it
    assert_clean(back)
    assert back.header[0].value == "1. Scores" and "1 of 8 steps done" in progress_text(back)
    monkeypatch.setattr(visitor, "key", lambda: "b" * 64)  # another browser, the same link
    other = open_directly("lesson", link)
    assert not other.header and other.text_input(key="lesson.nickname_typed").value == "Chloé"
    monkeypatch.setattr(visitor, "key", lambda: "a" * 64)
    stranger = open_directly("lesson", {**link, "lesson.nickname": "Bot"})  # not joined: still the form
    assert not stranger.header and nicknames(info) == ["Chloé"]
