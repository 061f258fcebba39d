"""The Teacher page's two jobs: creating a class, and the class's live view behind the teacher link.

The view reads the class database on every refresh (`REFRESH_S`, a fragment: the rest of the page
stays put) with the token from the link; nothing is kept in the session but what the page draws.
"""

from __future__ import annotations

import functools
import time

import pandas as pd
import streamlit as st

from attnviz import classroom, lessons
from attnviz.app.frame import session
from attnviz.app.frame.literal import escape_markdown
from attnviz.app.teacher import handout, visitor
from attnviz.classroom import ClassError, ClassView, RateLimited

REFRESH_S = 5  # the live view's refresh while a class works


def create() -> None:
    """The Create button's callback: a class of the chosen lessons' steps that can run here."""
    st.session_state.pop("teacher.error", None)
    chosen = st.session_state.get("teacher.lessons") or []
    if not chosen:
        st.session_state["teacher.error"] = "Lessons: choose at least one lesson (basics, modern, circuits)."
        return
    plan = {lesson_id: list(lessons.LESSONS[lesson_id].exercise_ids()) for lesson_id in chosen}
    try:
        st.session_state["teacher.created"] = classroom.create_class(
            st.session_state.get("teacher.name") or "", lessons=plan, visitor=visitor.key()
        )
    except RateLimited as e:
        st.session_state["teacher.error"] = (
            f"{escape_markdown(str(e))} Try again in {max(1, round(e.retry_after / 60))} min, or use a class you created."
        )
    except ClassError as e:
        st.session_state["teacher.error"] = escape_markdown(str(e))


def step_titles() -> dict[str, str]:
    """Each exercise id's step as the Lesson page numbers it ("2. Ablating it")."""
    return {
        f"{one.id}.{step.key}": f"{i + 1}. {step.title}"
        for one in lessons.LESSONS.values()
        for i, step in enumerate(one.steps)
    }


def exercise_table(cv: ClassView, lesson_id: str) -> pd.DataFrame:
    """One row per exercise of a lesson: the share right the first time first (what a phone shows
    without scrolling sideways), who answered, and the most common wrong answer."""
    names = step_titles()
    rows = [e for e in cv.exercises if e.exercise_id.split(".")[0] == lesson_id]
    return pd.DataFrame(
        {
            "Step": [names.get(e.exercise_id, e.exercise_id) for e in rows],
            "Share right first time": [e.share_right for e in rows],
            "Answered": [e.students for e in rows],
            "Right first time": [e.right_first for e in rows],
            "Most common wrong answer": [e.common_wrong or "" for e in rows],
            "Gave it": [e.common_wrong_count for e in rows],
        }
    )


def stuck(exercise_id: str | None, wrong_tries: int) -> str:
    """The unfinished exercise a student has tried, in words ("3. Softmax: 4 wrong tries"), or ""."""
    if not exercise_id:
        return ""
    return f"{step_titles().get(exercise_id, exercise_id)}: {wrong_tries} wrong {'try' if wrong_tries == 1 else 'tries'}"


def student_table(cv: ClassView) -> pd.DataFrame:
    """One row per student, in joining order: exercises finished, right first time, progress (a
    student the teacher removed, their answers kept, is marked so)."""
    total = len(cv.exercises)
    return pd.DataFrame(
        {
            # text: a dataframe never renders markup
            "Nickname": [s.nickname + (" (removed)" if s.removed else "") for s in cv.students],
            "Finished": [s.answered for s in cv.students],
            "Right first time": [s.right_first for s in cv.students],
            "Progress": [s.answered / total if total else 0.0 for s in cv.students],
            "Stuck on": [stuck(s.working_on, s.wrong_tries) for s in cv.students],
        }
    )


def _read(token: str) -> ClassView | None:
    try:
        return classroom.class_view(token)
    except ClassError as e:  # AccessDenied: a wrong or expired token reads nothing
        st.error(escape_markdown(str(e)), icon=":material/lock:")
        return None


def show(token: str) -> None:
    """The class's view for the teacher link's token, or a message naming what was refused."""
    cv = _read(token)
    if cv is None:
        st.page_link("pages/teacher.py", label="Create a class instead", icon=":material/add:")
        return
    st.header(escape_markdown(cv.name), anchor=False)
    st.caption(
        f"Class **{cv.code}** · created {cv.created_at:%Y-%m-%d %H:%M} UTC · runs until "
        f"{cv.expires_at:%Y-%m-%d %H:%M} UTC · lessons: "
        + ", ".join(lessons.LESSONS[lid].title if lid in lessons.LESSONS else lid for lid, _ in cv.lessons)
    )
    handout.address_setting()
    with st.expander(
        "Hand the class out: its code, QR code and every student's link", icon=":material/share:"
    ):
        first = cv.lessons[0][0]
        link = handout.student_url(first, class_code=cv.code)
        st.title(cv.code, anchor=False)
        st.code(link, language=None)
        handout.qr(link, f"Class {cv.code}")
        known = [lessons.LESSONS[lid] for lid, _ in cv.lessons if lid in lessons.LESSONS]
        for one in known:
            st.markdown(f"**{one.title}**")
            handout.student_links(one, f"teacher.view.{one.id}", cv.code)
        if len(known) > 1:  # one file for the whole class: each student's sheets for every lesson
            st.markdown(f"**All {len(known)} lessons in one problem set**")
            handout.student_links(known, "teacher.view.all", cv.code)
    controls(token, cv)
    live(token)


def _set_joining(token: str, open_: bool) -> None:
    try:
        classroom.set_joining(token, open_=open_)
        st.session_state["teacher.control"] = (
            "Joining is open again." if open_ else "Joining is closed: no new student can join."
        )
    except ClassError as e:
        st.session_state["teacher.control"] = escape_markdown(str(e))


def _remove(token: str) -> None:
    who = st.session_state.get("teacher.remove_who")
    keep = st.session_state.get("teacher.remove_keep", KEEP) == KEEP
    if who is None:
        st.session_state["teacher.control"] = "Student: pick the nickname to remove."
        return
    try:
        classroom.remove_student(token, who, keep_answers=keep)
        st.session_state["teacher.control"] = f"Removed {escape_markdown(who)}; " + (
            "their answers are kept." if keep else "their answers are deleted."
        )
    except ClassError as e:
        st.session_state["teacher.control"] = escape_markdown(str(e))


KEEP, DELETE = "Keep their answers (in the view and the CSV)", "Delete their answers"


def controls(token: str, cv: ClassView) -> None:
    """Close or reopen joining, and remove a student: stored in the class database, so they hold on
    every server of the class."""
    with st.expander(
        "Control the class: "
        + ("joining open" if cv.joining_open else "joining closed")
        + ", remove a student",
        icon=":material/admin_panel_settings:",
        expanded=not cv.joining_open,
    ):
        if cv.joining_open:
            session.button("Close joining", on_click=_set_joining, args=(token, False), key="teacher.close")
            st.caption("Anyone with the code can join now. Closed, the students in the class keep answering.")
        else:
            session.button("Reopen joining", on_click=_set_joining, args=(token, True), key="teacher.reopen")
            st.caption("Closed: no new nickname can join; the students in the class keep answering.")
        in_class = [s.nickname for s in cv.students if not s.removed]
        with st.form("teacher.remove", border=False):
            st.selectbox("Student", in_class, index=None, key="teacher.remove_who", placeholder="A nickname")
            st.radio("Their answers", (KEEP, DELETE), key="teacher.remove_keep", horizontal=True)
            session.submit(
                "Remove the student",
                key="teacher.remove_student",
                on_click=_remove,
                args=(token,),
                icon=":material/person_remove:",
            )
        if "teacher.control" in st.session_state:
            st.caption(st.session_state["teacher.control"])


def _exercises(cv: ClassView, lesson_id: str) -> None:
    """The lesson's exercises as a table (`exercise_table`)."""
    st.markdown(f"**{lessons.LESSONS[lesson_id].title if lesson_id in lessons.LESSONS else lesson_id}**")
    st.dataframe(
        exercise_table(cv, lesson_id),
        hide_index=True,
        key=f"teacher.exercises.{lesson_id}",
        column_config={
            "Share right first time": st.column_config.ProgressColumn(
                "Share right first time", format="percent", min_value=0.0, max_value=1.0,
                help="Of the students who finished it, the share whose first answer was right",
            ),
            "Most common wrong answer": st.column_config.TextColumn("Most common wrong answer", width="large"),
            "Gave it": st.column_config.NumberColumn("Gave it", help="Students whose first answer was that one"),
        },
    )  # fmt: skip


@st.fragment(run_every=REFRESH_S)
def live(token: str) -> None:
    """The class as it answers: re-read from the database every `REFRESH_S` seconds."""
    cv = _read(token)
    if cv is None:
        return
    stored = sum(s.answered for s in cv.students)
    c1, c2, c3 = st.columns(3)
    removed = sum(s.removed for s in cv.students)  # their answers kept, they are no longer in the class
    c1.metric(
        "Students in the class",
        len(cv.students) - removed,
        help=f"{removed} removed, their answers kept (marked in the table)" if removed else None,
    )
    c2.metric("Exercises finished", stored)
    c3.metric("Exercises in the class", len(cv.exercises))
    st.subheader("Per exercise", anchor=False)
    for lesson_id, _ in cv.lessons:
        _exercises(cv, lesson_id)
    st.subheader("Per student", anchor=False)
    if cv.students:
        st.dataframe(
            student_table(cv),
            hide_index=True,
            key="teacher.students",
            column_config={
                "Progress": st.column_config.ProgressColumn(
                    "Progress", format="percent", min_value=0.0, max_value=1.0,
                    help="Exercises finished of the class's",
                ),
            },
        )  # fmt: skip
    else:
        st.info(
            "No student has joined yet: they join from the class link with a nickname.",
            icon=":material/hourglass_empty:",
        )
    st.download_button(  # read at the click (deferred): every answer up to then, not up to the last refresh,
        # and not the whole class's answers re-read every REFRESH_S for a file nobody may ask for
        "Every answer (CSV)", functools.partial(classroom.class_csv, token), f"class-{cv.code}.csv", "text/csv",
        key="teacher.csv", icon=":material/download:", on_click="ignore",
    )  # fmt: skip
    st.caption(
        f"Live: read from the class database every {REFRESH_S} s (last at {time.strftime('%H:%M:%S')})."
    )
