"""Handing a lesson out: every student's link (copyable, and as a file), the class link and its QR code,
and the printable problem set with each student's link and QR code on their sheet.

Drawn on the Teacher page (for a class: the links carry its code) and in the Lesson page's teacher
section (no class). A student's link opens the lesson with their own seed, so their numbers match
their worksheet and the answer key; in a class both are drawn from the class's instance of that seed
(`classroom.instance_seed`), so the Lesson page's public key of the seed is not the student's. Links
are absolute when an address is known: the one the teacher typed (`address_setting`), else the
operator's `ATTNVIZ_PUBLIC_URL`, else the one the browser told the server (`st.context.url`); without
any (a script run with no browser) they are relative and the problem set carries none. An address only
this machine can reach (localhost, 127.0.0.1) is said, with where to give the one students should use
(issue 46, point 5).
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from urllib.parse import urlencode, urlsplit

import streamlit as st

from attnviz import classroom, lessons
from attnviz.app.frame import session
from attnviz.app.frame.literal import escape_markdown
from attnviz.app.lesson import work
from attnviz.classroom import ClassError, qr_svg
from attnviz.classroom.links import public_base
from attnviz.exec import TaskError
from attnviz.lessons import Lesson, problem_set

ENV_PUBLIC = "ATTNVIZ_PUBLIC_URL"  # the operator's address for students' links
TYPED = "teacher.address"  # the address the teacher typed (session)
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "0.0.0.0")


def browser_url() -> str | None:
    """The app's address as the browser sees it (`http://host:port[/path]`), None when no browser said
    (AppTest)."""
    here = st.context.url or ""
    if not here.startswith(("http://", "https://")):
        return None
    page = here.split("?")[0].split("#")[0]
    return page.rsplit("/", 1)[0] if page.count("/") > 2 else page.rstrip("/")


def base_url() -> str | None:
    """The address students' links start with: the teacher's, the operator's, or the browser's (an
    operator's setting that is no address is left out here and named by `address_setting`)."""
    try:
        return public_base(st.session_state.get(TYPED), os.environ.get(ENV_PUBLIC), browser_url())
    except ClassError:
        return public_base(st.session_state.get(TYPED), None, browser_url())


def only_this_machine(url: str | None) -> bool:
    """Whether `url`'s host is one only this machine reaches (a phone opening it opens itself)."""
    host = (urlsplit(url).hostname or "") if url else ""
    return host in LOCAL_HOSTS or host.startswith("127.")


def _typed() -> None:
    raw = (st.session_state.get("teacher.address_typed") or "").strip()
    st.session_state.pop("teacher.address_error", None)
    if not raw:
        st.session_state.pop(TYPED, None)
        return
    try:
        st.session_state[TYPED] = public_base(raw, None, None)
    except ClassError as e:
        st.session_state["teacher.address_error"] = str(e)


def address_setting() -> None:
    """Where the students' links point, said; a warning and a field to give another address when
    they point at this machine only."""
    try:
        public_base(None, os.environ.get(ENV_PUBLIC), None)
    except ClassError as e:
        st.error(f"{ENV_PUBLIC}: {e}", icon=":material/block:")
    base = base_url()
    if base is None:
        return
    local = only_this_machine(base)
    if local:
        st.warning(
            f"**These links point at {urlsplit(base).hostname}**, which only this computer can reach: a "
            "student's phone cannot open them. Give the address students should use (this computer's "
            "address on the network, e.g. http://192.168.1.20:8501), or ask the operator to set "
            f"`{ENV_PUBLIC}`.",
            icon=":material/wifi_off:",
        )
    with st.expander("The address in the students' links", expanded=local, icon=":material/link:"):
        session.value(  # typed before a server restart: read again (the session lost what it read)
            st.text_input, "Address students use", key="teacher.address_typed", on_change=_typed, unchanged="",
            placeholder="http://192.168.1.20:8501", help=f"Now: {base}",
        )  # fmt: skip
        if "teacher.address_error" in st.session_state:
            st.error(st.session_state["teacher.address_error"], icon=":material/block:")
        st.caption(f"The links and QR codes below start with {base}.")


def address(page: str, query: dict) -> str:
    """`page?query` on this app: absolute when the browser gave the address, else relative."""
    base = base_url()
    return (base + "/" if base else "") + f"{page}?{urlencode(query)}"


def student_url(lesson_id: str, seed: int | None = None, class_code: str | None = None) -> str:
    """A student's address: the lesson (for one seed, in one class); the form of
    `attnviz.classroom.student_link`."""
    query = ({"class": class_code} if class_code else {}) | {"lesson": lesson_id}
    return address("lesson", query | ({} if seed is None else {"seed": seed}))


def qr(link: str, caption: str) -> None:
    """A link's QR code (to project or print) with what it opens."""
    st.image(qr_svg(link, scale=6), caption=caption, width=220)


def links_csv(rows: list[tuple[str, int, str]], by_lesson: bool = False) -> str:
    """`(lesson id, seed, link)` rows as CSV: `seed, link`, with a `lesson` column first when the links
    cover more than one lesson."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(("lesson", "seed", "link") if by_lesson else ("seed", "link"))
    writer.writerows(rows if by_lesson else [(seed, link) for _, seed, link in rows])
    return out.getvalue()


def student_links(chosen: Lesson | Sequence[Lesson], prefix: str, class_code: str | None = None) -> None:
    """The class size and first seed, every student's link (copyable, and as CSV), and the problem set
    with each link on its sheet. Widget keys start with `prefix` ("lesson", "teacher").

    `chosen`: one lesson, or several (a class's lessons: one link per student and lesson, and one
    problem set holding every sheet)."""
    chosen = (chosen,) if isinstance(chosen, Lesson) else tuple(chosen)
    ids = tuple(one.id for one in chosen)
    c1, c2 = st.columns(2)
    first = int(c1.number_input("First seed", 0, lessons.MAX_SEED, 1, key=f"{prefix}.first_seed"))
    most = problem_set.MAX_SEEDS
    count = int(
        c2.number_input(
            "Students", 1, most, 30, key=f"{prefix}.students", help=f"1 … {most} (one class at a time)"
        )
    )
    # The browser keeps showing a number typed over the limit while the field keeps its last value: say
    # which count is used.
    c2.caption(f"Using **{count}** students (at most {most}; a larger number is not taken).")
    seeds = tuple((first + i) % (lessons.MAX_SEED + 1) for i in range(count))
    rows = [(one.id, s, student_url(one.id, s, class_code)) for one in chosen for s in seeds]
    each = f" for each of the {len(ids)} lessons" if len(ids) > 1 else ""
    st.markdown(f"**Every student's link{each}** ({count}, seeds {seeds[0]} … {seeds[-1]}): copy them with the "
                "button at the top right of the list, or download them.")  # fmt: skip
    st.code(
        "\n".join(link for *_, link in rows), language=None, wrap_lines=False,
        height=min(40 + 22 * len(rows), 300),
    )  # fmt: skip
    st.download_button(
        "Links (CSV: " + ("lesson, " if len(ids) > 1 else "") + "seed, link)",
        links_csv(rows, by_lesson=len(ids) > 1), f"attnviz-{'-'.join(ids)}-links.csv", "text/csv",
        key=f"{prefix}.links_csv", icon=":material/download:",
    )  # fmt: skip
    absolute = base_url() is not None
    if st.button(
        "Prepare the problem set with answer keys" + (" and every student's link" if absolute else ""),
        key=f"{prefix}.prepare",
    ):
        st.session_state[f"{prefix}.want"] = (seeds, ids, tuple(rows) if absolute else None, class_code)
    want = st.session_state.get(f"{prefix}.want")
    if want:
        _problem_set(prefix, *want)


def _problem_set(
    prefix: str, seeds: tuple[int, ...], lesson_ids: tuple[str, ...], rows, class_code: str | None
) -> None:
    """The problem set of `seeds`; for a class, each student's sheet and key drawn from the class's
    instance of their seed (`classroom.instance_seed`): what the Lesson page shows them in the class."""
    links = {(lesson_id, s): link for lesson_id, s, link in rows} if rows else None
    try:
        instances = {s: classroom.instance_seed(class_code, s) for s in seeds} if class_code else None
        md, html = work.problem_set(seeds, lesson_ids, links, instances)
    except ClassError as error:  # the class ended under the teacher's page
        st.error(escape_markdown(str(error)), icon=":material/block:")
        return
    except TaskError as error:
        from attnviz.app.frame import door

        door.show_failure(error, key=f"{prefix}.again")
        return
    st.session_state[f"{prefix}.problem_set"] = (seeds, md, html)
    per = "a worksheet per seed" + (f" and lesson ({len(lesson_ids)} lessons)" if len(lesson_ids) > 1 else "")
    st.caption(
        f"Seeds {seeds[0]} … {seeds[-1]}: "
        + ("the list of links, then " if links else "")
        + per
        + (" with its link and QR code" if links else "")
        + ", then the answer keys."
    )
    name = f"attnviz-{'-'.join(lesson_ids)}"
    d1, d2 = st.columns(2)
    d1.download_button("Markdown", md, f"{name}.md", "text/markdown", key=f"{prefix}.md")
    d2.download_button("Print-ready HTML", html, f"{name}.html", "text/html", key=f"{prefix}.html")
    st.caption("For a PDF, open the HTML and print it to PDF (each sheet starts a new page).")
