"""Teacher: create a class, hand out its code, QR code and links, and watch how it answers, live.

Without a token this page creates a class (`attnviz.classroom.create_class`): a short code for the
students, shown as text and as a QR code of the class link, and a private teacher link, shown once.
With the teacher link (`?token=…`) it is the class's view (`classroom.class_view`): per exercise the
share right the first time and the most common wrong answer, per student their progress, refreshed
every few seconds while the class works, and the CSV of every answer. A wrong or expired token reads
nothing; nicknames and answers are shown as text (docs/security.md, "Classes").
"""

import streamlit as st

from attnviz import classroom, lessons
from attnviz.app.frame import session
from attnviz.app.frame.literal import escape_markdown
from attnviz.app.frame.shell import routed
from attnviz.app.teacher import handout, view

routed("teacher")  # inside app.py's shell, also when Streamlit's pages/ routing ran this file alone
st.title("Teacher: a class")
token = st.query_params.get("token")
if token is not None:
    view.show(token)
    st.stop()

st.markdown(
    "Create a **class** for a lesson: the students open it with the class code (or its QR code) and a "
    "nickname — no account, no e-mail — and each exercise they finish is stored. Your private teacher link "
    "then shows, live, how the class answers each exercise."
)
created = st.session_state.get("teacher.created")
with st.form("teacher.create", border=True):
    st.text_input(
        "Class name",
        key="teacher.name",
        max_chars=classroom.rules.MAX_NAME,
        placeholder="e.g. Year 2, group B",
    )
    st.multiselect(
        "Lessons", list(lessons.LESSONS), default=["basics"], key="teacher.lessons",
        format_func=lambda i: lessons.LESSONS[i].title,
        help="Every step of each lesson chosen is stored (the steps that can run on this server).",
    )  # fmt: skip
    session.submit(
        "Create the class", key="teacher.create", type="primary", on_click=view.create, icon=":material/add:"
    )
if "teacher.error" in st.session_state:
    st.error(st.session_state["teacher.error"], icon=":material/block:")
if created is None:
    st.stop()

info = created
first_lesson = info.lessons[0][0]
st.success(
    f"Class **{escape_markdown(info.name)}** created; it runs until {info.expires_at:%Y-%m-%d %H:%M} UTC."
)
handout.address_setting()
code_col, qr_col = st.columns([3, 2])
with code_col:
    st.markdown(
        "Students open the **Lesson** page and type this code in its sidebar (**In a class? Type its code**), then a "
        "nickname — or scan the QR code:"
    )
    st.title(info.code, anchor=False)  # big enough to read off a projector
    st.markdown("One link for the whole class (everyone gets the same numbers: this class's for seed 0):")
    st.code(handout.student_url(first_lesson, class_code=info.code), language=None)
with qr_col:
    handout.qr(handout.student_url(first_lesson, class_code=info.code), f"Class {info.code}")

teacher = handout.address("teacher", {"token": info.teacher_token})
st.warning(
    "**Your teacher link — keep it private.** Whoever has it reads the class's answers. It is shown only "
    "now: copy it, or open it and bookmark it.",
    icon=":material/key:",
)
st.code(teacher, language=None)
st.link_button("Open the class view", teacher, icon=":material/open_in_new:", type="primary")

st.subheader("One link per student")
st.caption(
    "Each link gives its student their own numbers (a seed) and the class code; the problem set puts each "
    "link and its QR code on that student's worksheet."
)
for lesson_id, _ in info.lessons:
    with st.expander(lessons.LESSONS[lesson_id].title, expanded=lesson_id == first_lesson):
        handout.student_links(lessons.LESSONS[lesson_id], f"teacher.{lesson_id}", info.code)
if len(info.lessons) > 1:  # one file for the whole class: each student's sheets for every lesson
    with st.expander(f"All {len(info.lessons)} lessons in one problem set"):
        handout.student_links([lessons.LESSONS[lid] for lid, _ in info.lessons], "teacher.all", info.code)
