"""The Lesson page in a class (`?class=CODE`): join under a nickname, and store each finished exercise.

A student opens the link a teacher handed out (`attnviz.classroom.student_link`), types a nickname
(no account, no e-mail) and presses Join (`classroom.join`, the same nickname being the same student).
A link alone never joins: a `lesson.nickname` in it only fills the form in, so a link cannot put
students into a class (issue 46); only the browser that joined under it comes back by it (a reload, a
server restart: `classroom.returning`). Joining again under the same nickname brings back the steps the
database holds (`classroom.progress`). One browser joins a class once (`visitor.key`). Each exercise that ends
— answered right, or the answer shown — is stored with `classroom.record_answer`: the first answer as
text, whether it was right, the attempts and the seconds (`attnviz.app.lesson.state.ended`). Nothing
here reads anything of the class back: a class code lets a student write their own answers only. In a
class the exercises are the class's own instance of the link's seed (`instance`), whose key only the
teacher prints (the Teacher page); the seed shown and stored stays the link's.

What the database refuses is said, never a traceback: an answer stored already (`AlreadyStored`: the
first one counts), too many too fast (`RateLimited`: sent again after `retry_after`), an exercise the
class does not have (not recorded), and any other `ClassError` with its field and what is allowed.
"""

from __future__ import annotations

import contextlib
import time

import streamlit as st

from attnviz import classroom
from attnviz.app.frame import session
from attnviz.app.frame.literal import escape_markdown
from attnviz.app.lesson import state as ui
from attnviz.app.teacher import visitor
from attnviz.classroom import AccessDenied, AlreadyStored, ClassError, RateLimited, Student
from attnviz.classroom.rules import MAX_NICKNAME, check_code

CODE, NICKNAME = "class", "lesson.nickname"
STUDENT, SENT = "lesson.student", "lesson.sent"  # the joined Student; what was said about the last sends
INSTANCES = "lesson.instances"  # {(class code, sheet seed): instance seed}, never drawn
LINK_WAITS = (
    "In a class, the link to this computation opens once every step is done: it carries the seed of "
    "your numbers, from which the answers to the other steps could be read."
)
MAX_WAIT_S = 3.0  # a rate-limited answer waits at most this long in the run, then on the next run


def code() -> tuple[str | None, str | None]:
    """The link's class code, checked: `(code, None)`, `(None, None)` without one, or `(None, message)`
    for a code that cannot be one (the page says so and runs the lesson without the class)."""
    raw = st.query_params.get(CODE)
    if raw is None:
        return None, None
    try:
        return check_code(raw), None
    except ClassError as e:
        return None, _message(e)


def _message(error: ClassError) -> str:
    return escape_markdown(str(error))


def student(class_code: str) -> Student | None:
    """This session's student of `class_code` (None until the student pressed Join). A nickname in
    the link fills the form in; it never joins by itself — except in the browser that joined as it
    (a reload, a server restart: `classroom.returning`), which comes back with its stored steps."""
    joined = st.session_state.get(STUDENT)
    if joined is not None and joined.code == class_code:
        return joined
    nickname = st.query_params.get(NICKNAME)
    if nickname and "lesson.nickname_typed" not in st.session_state:
        st.session_state["lesson.nickname_typed"] = nickname[:MAX_NICKNAME]
        with contextlib.suppress(ClassError):  # a closed class, a bad nickname: the form says it on Join
            if back := classroom.returning(class_code, nickname, visitor=visitor.key()):
                st.session_state[STUDENT] = back
                ui.restore_stored(classroom.progress(class_code, back))
                return back
    return None


def instance(joined: Student | None, sheet: int) -> int:
    """The seed the exercises are drawn from: outside a class the link's (`sheet`); in a class its
    instance (`classroom.instance_seed`, keyed by the teacher's hash), which only the server computes,
    so sheet `sheet`'s public key (the page without `class=`) is not this student's (issue 46, point 4).
    Kept in the session, never drawn, put in a link or stored: the sheet seed names the exercise there."""
    if joined is None:
        return sheet
    known = st.session_state.setdefault(INSTANCES, {})
    if (joined.code, sheet) not in known:
        try:
            known[joined.code, sheet] = classroom.instance_seed(joined.code, sheet)
        except ClassError as e:  # the class ended or was deleted under the student
            st.error(f"{_message(e)} Your class's exercises cannot be shown.", icon=":material/block:")
            st.stop()
    return known[joined.code, sheet]


def link_waits(link, joined: Student | None, finished: bool) -> bool:
    """Whether an exercise's "Open this in …" link waits until the lesson is finished: in a class, a link
    carrying the configuration's seed gives the instance away (`lessons.core.config_seed` is
    (seed · 8 + step) · 32 + attempt), and with it the keys of the steps not yet answered."""
    return joined is not None and link is not None and "seed" in link.config and not finished


def _join(class_code: str, nickname: str) -> None:
    try:
        joined = classroom.join(class_code, nickname, visitor=visitor.key())
        stored = classroom.progress(class_code, joined)
    except RateLimited as e:
        st.session_state["lesson.join_error"] = (
            f"The class is taking many new students at once: try again in {max(e.retry_after, 1):.0f} s."
        )
        return
    except ClassError as e:
        st.session_state["lesson.join_error"] = _message(e)
        return
    st.session_state[STUDENT] = joined
    st.session_state.pop("lesson.join_error", None)
    st.query_params[NICKNAME] = joined.nickname
    ui.restore_stored(stored)


def join_clicked(class_code: str) -> None:
    """The Join button's callback."""
    _join(class_code, st.session_state.get("lesson.nickname_typed") or "")


def join_form(class_code: str) -> None:
    """Ask for a nickname before the lesson (every answer is then stored under it)."""
    st.info(
        f"**Class {class_code}.** Type a nickname your teacher will recognise (at most {MAX_NICKNAME} "
        "characters; no account, no e-mail): "
        "each exercise you finish is stored under it for your teacher's view of the class.",
        icon=":material/groups:",
    )
    # No hint inside the box: Streamlit draws "Press Enter to submit form" and a "29/40" count over the
    # right end of the input, and on a phone they covered the typed nickname (issue 46, point 19). The
    # length is checked on Join (`classroom.join`), which says what is allowed.
    with st.form("lesson.join", border=False, enter_to_submit=False):
        st.text_input("Nickname", key="lesson.nickname_typed", placeholder="e.g. Ada L.")
        session.submit(
            "Join the class", key="lesson.join", type="primary", on_click=join_clicked, args=(class_code,)
        )
    if "lesson.join_error" in st.session_state:
        st.error(st.session_state["lesson.join_error"], icon=":material/block:")


def code_clicked() -> None:
    """The 'Join' button's callback: a code that can be one goes into the link (the join form then
    asks for a nickname); another is named with what a code looks like."""
    raw = (st.session_state.get("lesson.code_typed") or "").strip().upper()
    try:
        st.query_params[CODE] = check_code(raw)
        st.session_state.pop("lesson.code_error", None)
    except ClassError as e:
        st.session_state["lesson.code_error"] = _message(e)


def code_form() -> None:
    """For a student without the class link: type the code the teacher projects (in the sidebar,
    out of the way of the exercise's own form)."""
    with st.sidebar, st.expander("In a class? Type its code", icon=":material/groups:"):
        with st.form("lesson.code", border=False, enter_to_submit=True):
            st.text_input("Class code", key="lesson.code_typed", max_chars=16, placeholder="e.g. K7QP2M")
            session.submit("Join", on_click=code_clicked, key="lesson.code_join")
        if "lesson.code_error" in st.session_state:
            st.error(st.session_state["lesson.code_error"], icon=":material/block:")


def banner(joined: Student) -> None:
    """Who is answering, as text (a nickname is never markdown or HTML)."""
    st.caption(
        f":material/groups: Class **{joined.code}** · answering as **{escape_markdown(joined.nickname)}** "
        "· each exercise you finish is stored for your teacher."
    )


def send(joined: Student | None) -> None:
    """Store the exercises that ended (`ui.ended`) for the class; say what was refused and why."""
    waiting, tries = ui.ended(), st.session_state.setdefault(ui.TRIED, [])
    if joined is None:
        waiting.clear()  # not in a class: nothing is stored
        tries.clear()
        return
    for exercise_id, wrong in tries[-1:]:  # the latest says where the student is; a refusal is not said
        with contextlib.suppress(ClassError):
            classroom.record_try(joined.code, joined, exercise_id, wrong)
    tries.clear()
    said = []
    while waiting:
        record = waiting[0]
        outcome = _send_one(joined, record)
        if outcome == "later":
            said.append(("info", "Your answer waits to be stored: it is sent with your next click."))
            break
        waiting.pop(0)
        if outcome:
            said.append(outcome)
    st.session_state[SENT] = said


def _send_one(joined: Student, record: dict):
    """One `record_answer`; None when stored, "later" when still rate-limited, else (kind, message)."""
    for _ in range(3):
        try:
            classroom.record_answer(joined.code, joined, **record)
            return None
        except AlreadyStored:
            return (
                "info",
                f"Your first answer to this exercise (seed {record['seed']}) was stored already: it counts.",
            )
        except RateLimited as e:
            if e.retry_after > MAX_WAIT_S:
                return "later"
            time.sleep(e.retry_after)
        except AccessDenied as e:
            return ("error", f"Not stored: {_message(e)}")
        except ClassError as e:
            if e.field == "exercise_id":
                return ("info", "This exercise is not part of your class: it is not stored.")
            return ("error", f"Not stored: {_message(e)}")
    return "later"


def notes() -> None:
    """What the last sends said (under the exercise)."""
    for kind, text in st.session_state.get(SENT, []):
        (st.error if kind == "error" else st.caption)(text)
