"""Lesson: attention in eight steps — predict first, then the app reveals the computed answer."""

import streamlit as st

from attnviz import lessons
from attnviz.app.lesson import figures
from attnviz.app.lesson import state as ui

st.title("Lesson: attention in eight steps")
seed = ui.seed()
if ui.seed_note():
    st.caption(ui.seed_note())
ui.start(seed)
step = ui.step()

with st.expander("For teachers: one link per student, and a printable problem set", icon=":material/school:"):
    st.markdown(
        "Every student gets their own numbers from a **seed** in the link: `?seed=12` always gives the same "
        "exercises, so you can check a student's answers against the key for their seed. Without a seed "
        "everyone gets seed 0. Progress stays in the link, so a reload keeps it."
    )
    c1, c2 = st.columns(2)
    first = c1.number_input("First seed", 0, lessons.MAX_SEED, 1, key="lesson.first_seed")
    most = lessons.problem_set.MAX_SEEDS
    count = c2.number_input(
        "Students", 1, most, 30, key="lesson.students", help=f"1 … {most} (one class at a time)"
    )
    # The browser keeps showing a number typed over the limit while the field keeps its last value: say
    # which count is used.
    c2.caption(f"Using **{count}** students (at most {most}; a larger number is not taken).")
    st.code("\n".join(ui.lesson_url(first + i) for i in range(min(count, 5))) + ("\n…" if count > 5 else ""))
    st.button(
        "Prepare the problem set with answer keys",
        on_click=ui.prepare_problem_set,
        key="lesson.prepare",
    )
    prepared = st.session_state.get("lesson.problem_set")
    if prepared:
        seeds, md, html = prepared
        st.caption(f"Seeds {seeds[0]} … {seeds[-1]}: a worksheet per seed, then the answer keys.")
        d1, d2 = st.columns(2)
        d1.download_button("Markdown", md, "attnviz-lesson.md", "text/markdown", key="lesson.md")
        d2.download_button("Print-ready HTML", html, "attnviz-lesson.html", "text/html", key="lesson.html")
        st.caption("For a PDF, open the HTML and print it to PDF (each sheet starts a new page).")

titles = [f"{i + 1}. {title}" for i, (_, title, _) in enumerate(lessons.STEPS)] + ["Summary"]
st.progress(sum(ui.revealed(i) for i in range(ui.N)) / ui.N, text=f"Seed {seed} · {titles[step]}")
with st.container(horizontal=True, gap="small", key="lesson.nav"):
    for i, title in enumerate(titles):
        st.button(
            str(i + 1) if i < ui.N else "Summary",
            key=f"lesson.go.{i}",
            on_click=ui.go,
            args=(i,),
            type="primary" if i == step else "secondary",
            icon=ui.icon(i) if i < ui.N else None,
            help=title,
        )

if step == ui.N:
    st.header("Summary")
    right = ui.first_time_count()
    st.markdown(f"**{right} of {ui.N}** right first time.")
    st.table(ui.summary_rows())
    c1, c2 = st.columns(2)
    c1.button("Start again (same numbers)", on_click=ui.restart, key="lesson.restart", width="stretch")
    c2.button("New numbers (another seed)", on_click=ui.new_variant, key="lesson.variant", width="stretch")
    ui.sync_url()
    st.stop()

with st.spinner("Running MiniLM (the first time takes a few seconds)…"):
    ex = lessons.exercise(step, seed)
st.header(f"{step + 1}. {ex.title}")
st.markdown(ex.intro)
st.markdown(ex.given)
if ex.key == "heads":
    st.plotly_chart(figures.head_panels(ex.data, revealed=False), width="stretch", key="lesson.question")

done = ui.revealed(step)
if done:  # the question stays; its answer follows under "Why"
    st.markdown("\n\n".join(p.prompt for p in ex.parts))
else:
    with st.form(f"lesson.form.{seed}.{step}", border=False, enter_to_submit=False):
        for k in range(len(ex.parts)):
            ui.part_input(ex, k)
        st.form_submit_button(
            "Check", type="primary", on_click=ui.check, args=(step, seed), width="stretch", key="lesson.check"
        )

feedback = ui.feedback(ex)
tries, state = ui.status(step)
if feedback is not None and not (state == ui.SHOWN and not feedback.right):
    for k, (ok, why) in enumerate(feedback.notes):
        prefix = f"({'abcdefgh'[k]}) " if len(ex.parts) > 1 else ""
        (st.success if ok else st.error)(
            prefix + why, icon=":material/check_circle:" if ok else ":material/cancel:"
        )
if not done:
    with st.expander("Hint", icon=":material/lightbulb:", expanded=tries > 0):
        st.markdown(ex.hint)
    if tries > 0:
        st.button("Show me the answer", on_click=ui.show_answer, args=(step,), key="lesson.show")

if done:
    st.subheader("The answer" if state == ui.SHOWN else "Why")
    answers = "; ".join(
        f"({'abcdefgh'[k]}) {p.answer_text}" if len(ex.parts) > 1 else p.answer_text
        for k, p in enumerate(ex.parts)
    )
    st.markdown(f"**{answers}**\n\n{ex.explanation}")
    shown = figures.reveal(ex.key, ex.data)
    for i, (col, fig) in enumerate(zip(st.columns(len(shown)), shown, strict=True)):
        col.plotly_chart(fig, width="content" if fig.layout.width else "stretch", key=f"lesson.reveal.{i}")
    if ex.link is not None:
        st.link_button(ex.link.label, ui.link_url(ex.link), icon=":material/open_in_new:")

with st.container(horizontal=True, key="lesson.steps"):
    if step > 0:
        st.button("← Back", on_click=ui.go, args=(step - 1,), key="lesson.back")
    st.space("stretch")
    st.button(
        "Next →" if step < ui.N - 1 else "Summary →",
        on_click=ui.go,
        args=(step + 1,),
        key="lesson.next",
        type="primary" if done else "secondary",
    )
ui.sync_url()
