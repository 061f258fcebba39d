"""Lesson: three lessons of predict-then-reveal exercises — attention in eight steps, modern attention,
circuits — each step a deep link (`?lesson=modern&step=3&seed=5`), in a class or alone."""

import streamlit as st

from attnviz import lessons
from attnviz.app.frame import door, session
from attnviz.app.frame.pages import by_name
from attnviz.app.frame.shell import routed
from attnviz.app.lesson import class_mode, figures, work
from attnviz.app.lesson import state as ui
from attnviz.app.lesson.answers import link_url
from attnviz.app.teacher import handout
from attnviz.exec import TaskError
from attnviz.lessons import registry

routed("lesson")  # inside app.py's shell, also when Streamlit's pages/ routing ran this file alone
seed = ui.seed()
ui.start(seed)
chosen, step, n = ui.current(), ui.step(), ui.count()
st.title(f"Lesson: {chosen.title}")
for note in ui.link_notes():
    st.warning(note, icon=":material/link_off:")
if ui.seed_note():
    st.caption(ui.seed_note())

class_code, class_problem = class_mode.code()
if class_problem:
    st.warning(
        f"{class_problem} This lesson runs without a class: nothing is stored.", icon=":material/link_off:"
    )
joined = class_mode.student(class_code) if class_code else None
if class_code and joined is None:
    class_mode.join_form(class_code)
    ui.sync_url()
    st.stop()
if joined is not None:
    class_mode.banner(joined)
elif not class_code:
    class_mode.code_form()

session.value(  # shows the chosen lesson; a new session's first pick is told from the one its link names
    st.segmented_control, "Lesson", list(registry.runnable()), format_func=lambda i: lessons.LESSONS[i].title,
    key="lesson.pick", on_change=ui.pick_lesson, unchanged=chosen.id, follow=True, required=True, width="stretch",
)  # fmt: skip
st.caption(chosen.summary + "".join(f" {note}" for note in chosen.notes))

if not class_code:  # inside a class the answer keys are the teacher's alone (Teacher page)
    with st.expander(
        "For teachers: one link per student, and a printable problem set", icon=":material/school:"
    ):
        st.markdown(
            "Every student gets their own numbers from a **seed** in the link: `?seed=12` always gives the same "
            "exercises, so you can check a student's answers against the key for their seed. Without a seed "
            "everyone gets seed 0. Progress stays in the link, so a reload keeps it. To see how a class "
            "answers, create a class on the **Teacher** page: its links carry the class code, and its "
            "students get the class's own numbers, whose keys the Teacher page prints."
        )
        handout.student_links(chosen, "lesson")

ex = None
if step < n:
    try:
        ex = work.exercise(chosen.id, chosen.steps[step].key, class_mode.instance(joined, seed))
    except TaskError as error:
        door.show_failure(error, key="lesson.again")
        st.stop()
    ui.grade_pending(ex)
    ui.mark_started(ex)
class_mode.send(joined)

titles = [f"{i + 1}. {s.title}" for i, s in enumerate(chosen.steps)] + ["Summary"]
answered = sum(ui.revealed(i) for i in range(n))
st.progress(answered / n, text=f"Seed {seed} · {titles[step]} · {answered} of {n} steps done")
with st.container(horizontal=True, gap="small", key="lesson.nav"):
    for i, title in enumerate(titles):
        session.button(  # a callback that also runs on a new session's first click (after a restart)
            str(i + 1) if i < n else "Summary",
            key=f"lesson.go.{i}",
            on_click=ui.go,
            args=(i,),
            type="primary" if i == step else "secondary",
            icon=ui.icon(i) if i < n else None,
            help=title,
        )

if ex is None:  # the summary
    st.header("Summary")
    st.markdown(f"**{ui.first_time_count()} of {n}** right first time.")
    st.table(ui.summary_rows(), hide_index=True)
    c1, c2 = st.columns(2)
    session.button(
        "Start again (same numbers)", on_click=ui.restart, key="lesson.restart", width="stretch", where=c1
    )
    session.button(
        "New numbers (another seed)", on_click=ui.new_variant, key="lesson.variant", width="stretch", where=c2
    )
    class_mode.notes()
    ui.sync_url()
    st.stop()

st.header(f"{step + 1}. {ex.title}")
st.markdown(ex.intro)
st.markdown(ex.given)
for i, fig in enumerate(figures.question(ex)):
    st.plotly_chart(fig, width="stretch", key=f"lesson.question.{i}")

done = ui.revealed(step)
if done:  # the question stays; its answer follows under "Why"
    st.markdown("\n\n".join(p.prompt for p in ex.parts))
else:
    ui.restore_inputs(ex)
    with st.form(f"lesson.form.{chosen.id}.{seed}.{step}", border=False, enter_to_submit=False):
        for k in range(len(ex.parts)):
            ui.part_input(ex, k)
        session.submit(
            "Check", type="primary", on_click=ui.check, args=(chosen.id, step, seed), width="stretch",
            key="lesson.check",
        )  # fmt: skip

if ui.empty_note(ex):
    st.warning(ui.empty_note(ex), icon=":material/edit:")
feedback = ui.feedback(ex)
tries, state = ui.status(step)
if feedback is not None and not (state == ui.SHOWN and not feedback.right):
    for k, (ok, why) in enumerate(feedback.notes):
        prefix = f"({'abcdefgh'[k]}) " if len(ex.parts) > 1 else ""
        (st.success if ok else st.error)(
            prefix + why, icon=":material/check_circle:" if ok else ":material/cancel:"
        )
class_mode.notes()
if not done:
    with st.expander("Hint", icon=":material/lightbulb:", expanded=tries > 0):
        st.markdown(ex.hint)
    if tries > 0:
        session.button(
            "Show me the answer",
            on_click=ui.show_answer,
            args=(chosen.id, step, seed, ex.id),
            key="lesson.show",
        )

if done:
    st.subheader("The answer" if state == ui.SHOWN else "Why")
    answers = "; ".join(
        f"({'abcdefgh'[k]}) {p.answer_text}" if len(ex.parts) > 1 else p.answer_text
        for k, p in enumerate(ex.parts)
    )
    st.markdown(f"**{answers}**\n\n{ex.explanation}")
    shown = figures.reveal_figures(ex)
    # The basics' small figures side by side (fixed sizes); the real models' figures one under another.
    places = st.columns(len(shown)) if ex.lesson == "basics" else [st.container() for _ in shown]
    for i, (col, fig) in enumerate(zip(places, shown, strict=True)):
        col.plotly_chart(fig, width="content" if fig.layout.width else "stretch", key=f"lesson.reveal.{i}")
    if class_mode.link_waits(ex.link, joined, answered == n):
        st.caption(class_mode.LINK_WAITS)
    elif ex.link is not None:
        st.link_button(ex.link.label, link_url(ex.link), icon=":material/open_in_new:")

with st.container(horizontal=True, key="lesson.steps"):
    if step > 0:
        session.button("← Back", on_click=ui.go, args=(step - 1,), key="lesson.back")
    st.space("stretch")
    session.button(
        "Next →" if step < n - 1 else "Summary →",
        on_click=ui.go,
        args=(step + 1,),
        key="lesson.next",
        type="primary" if done else "secondary",
    )
if joined is None and not class_code:
    st.page_link(
        by_name("teacher").path,
        label="Teaching a class? Create one and watch its answers live",
        icon=":material/groups:",
    )
ui.sync_url()
