"""A class on a live server (issue 32 §2): a teacher creates it in Chromium, simulated students join
with nicknames and answer with a known right/wrong pattern, and the teacher's live view shows the
shares the pattern implies — read from the database the server writes: 12 students on PostgreSQL
(started by this test process; in CI it must start, never skip). Then the class's keys on
a live server: a student link cannot read the teacher view, a wrong token reads nothing, a nickname
full of HTML and markdown stays text, and a repeated submission is refused without losing what was
stored.

Light on 2 cores: three Chromium pages take turns (each page load is a new session, so a new
student), each student answers one or two basics exercises; no model runs. Screenshots of the
teacher's view land in test-artifacts/class-*.png.
"""

from __future__ import annotations

import io
import re
import warnings
from collections import Counter

import numpy as np
import pytest
import zxingcpp
from PIL import Image
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from playwright.sync_api import expect

from attnviz import lessons
from attnviz.classroom import ClassDB
from attnviz.classroom.instances import instance_seed
from tests.browser.conftest import Server, assert_no_exception, painted, settle, shot
from tests.classroom.conftest import empty_database, postgres  # noqa: F401 — fixtures: `url` on each backend
from tests.live import FRAMES

pytestmark = pytest.mark.browser

LINKS, LANES = 30, 3  # the student links the Teacher page lists; Chromium pages taking turns
# Students who join and answer in Chromium, on PostgreSQL (CI's database, issue 32): 12, one whole
# period of `plan` (i mod 3 and i mod 4: every mix of right and wrong first answers). Each student is a
# page load and four to six clicks (2.5 s of two busy cores; 30 here took 110 s of the suite). Thirty
# students answering at once on both databases is tests/classroom/test_class_of_30.py (the store under
# 30 threads); SQLite, the default, serves a live class in `test_the_class_keys_hold_on_a_live_server`.
STUDENTS = {"postgresql": 12}
SENT_MS = 20_000  # a click's rerun request leaves the page within this, however loaded the machine
DESKTOP, PHONE = (1440, 900), (390, 844)
HOSTILE = "<img src=x onerror=alert(1)>**b**[a](/x)"  # 40 characters, the most a nickname has


# -- the database the server writes -------------------------------------------------------------------


@pytest.fixture
def class_server(url):
    srv = Server(env={"ATTNVIZ_CLASS_DB": url})
    yield srv
    srv.stop()


# -- the students' pattern ----------------------------------------------------------------------------


def seed_of(i: int) -> int:
    return 100 + i


def plan(i: int) -> list[tuple[int, bool]]:
    """Student i's exercises (basics step index) and whether their first answer is right: everyone
    does Scores (right unless i % 3 == 0), every second student Scaling too (right when i % 4 == 0)."""
    out = [(0, i % 3 != 0)]
    if i % 2 == 0:
        out.append((1, i % 4 == 0))
    return out


def wrong_choice(part) -> int:
    """A wrong option chosen the same way by every student: the first option that is not the answer."""
    return next(k for k in range(len(part.options)) if k != part.answer)


def instances(database: str, code: str, seeds) -> dict[int, int]:
    """The class's instance of each link seed: the seed its students' exercises are drawn from (issue 46,
    point 4: not the public seed, whose key anyone prints)."""
    db = ClassDB(database)
    try:
        return {s: instance_seed(db, code, s) for s in seeds}
    finally:
        db.close()


def expected(students: int, drawn: dict[int, int]) -> dict[str, dict]:
    """Per exercise id: students, right first time, the share, the most common wrong answer and its count
    (ties: the first in text order, as the view breaks them), `drawn` the class's instance of each seed."""
    out = {}
    for step, key in ((0, "basics.scores"), (1, "basics.scaling")):
        done = [(i, ok) for i in range(students) for s, ok in plan(i) if s == step]
        wrong = Counter(
            (ex := lessons.exercise(step, drawn[seed_of(i)])).parts[0].options[wrong_choice(ex.parts[0])]
            for i, ok in done
            if not ok
        )
        common, count = min(wrong.items(), key=lambda kv: (-kv[1], kv[0]))
        right = sum(ok for _, ok in done)
        out[key] = {
            "students": len(done),
            "right": right,
            "share": right / len(done),
            "wrong": (common, count),
        }
    return out


# -- what a student and the teacher do --------------------------------------------------------------------


def main(page):
    return page.locator('[data-testid="stMain"]')


def submit(page, button, outcome) -> None:
    """Click `button` and wait for `outcome`, what the run it starts must show, then for the page to
    settle. Not `click_and_settle`: it counts runs by the app's "running" state, and a run this short
    (a join, a check) can start and end before the browser ever draws that state."""
    sent = page.evaluate("() => window.__attnvizReruns")
    button.click()
    try:
        page.wait_for_function(f"() => window.__attnvizReruns > {sent}", timeout=SENT_MS)
    except PlaywrightTimeoutError:
        # The click never reached Streamlit: no rerun request left the page (CI lost the teacher section's
        # Prepare click twice, under load 6-7; the page then sat idle). Said, and clicked once more: what
        # follows still has to show `outcome`, and a click that was sent but came to nothing still fails.
        warnings.warn(f"a click sent no rerun request in {SENT_MS / 1000:g} s; clicked again", stacklevel=2)
        button.click()
    expect(outcome.first).to_be_visible()
    settle(page)
    assert_no_exception(page)


def pick(page, part, k: int, outcome) -> None:
    """Tap option k of a choice part (and see it chosen), then Check."""
    form = main(page).locator('[data-testid="stForm"]')
    exact = re.compile("^" + re.escape(part.options[k]) + "$")
    option = form.locator('[data-testid="stButtonGroup"] button').filter(has_text=exact)
    option.click()
    expect(option).to_have_attribute("aria-checked", "true")  # single choice: a radio group
    submit(page, form.get_by_role("button", name="Check"), outcome)


def joined(page):
    return main(page).locator('[data-testid="stCaptionContainer"]').filter(has_text="answering as")


def join(page, nickname: str) -> None:
    main(page).get_by_label("Nickname").fill(nickname)
    # Nothing drawn over the typed nickname (issue 46, point 19: on a phone Streamlit's "Press Enter to
    # submit form · 29/40" covered it).
    page.evaluate(FRAMES)  # the input's next render, where Streamlit drew them
    hints = main(page).locator('[data-testid="stForm"] [data-testid="InputInstructions"]').all_inner_texts()
    assert not "".join(hints).strip(), hints
    submit(page, main(page).get_by_role("button", name="Join the class"), joined(page))


def answer(page, step: int, seed: int, right_first: bool) -> None:
    """Answer step `step` as drawn from `seed` (in a class: the class's instance of the link's seed)."""
    ex = lessons.exercise(step, seed)
    expect(main(page).locator("h2").filter(has_text=f"{step + 1}. {ex.title}")).to_be_visible()
    part = ex.parts[0]
    if not right_first:
        pick(page, part, wrong_choice(part), main(page).locator('[data-testid="stAlertContentError"]'))
    pick(page, part, part.answer, main(page).locator("h3").filter(has_text="Why"))


def student(page, i: int, drawn: dict[int, int]) -> None:
    """Student i: join under their nickname, answer their exercises (a wrong try, then right, where the
    plan says wrong first), moving on with Next; `drawn`: the class's instance of each link seed."""
    join(page, f"Student {i:02d}")
    for n, (step, ok) in enumerate(plan(i)):
        if n:
            title = f"{step + 1}. {lessons.STEPS[step][1]}"
            submit(
                page,
                main(page).get_by_role("button", name="Next →"),
                main(page).locator("h2").filter(has_text=title),
            )
        answer(page, step, drawn[seed_of(i)], ok)


def grid(page, index: int) -> list[list[str]]:
    """The rows of the view's `index`-th table, as the grid's accessible cells give them."""
    table = main(page).locator('[data-testid="stDataFrame"]').nth(index)
    heads = table.locator("th")  # the grid draws on a canvas; its accessible table is attached, not visible
    expect(table.locator("td").first).to_be_attached()
    cols = heads.count()
    cells = table.locator("td").all_inner_texts()
    return [cells[k : k + cols] for k in range(0, len(cells), cols)]


def metric(page, label: str):
    return (
        main(page)
        .locator('[data-testid="stMetric"]')
        .filter(has_text=label)
        .locator('[data-testid="stMetricValue"]')
    )


def create_class(page, url: str, name: str) -> tuple[str, str, list[str]]:
    """The Teacher page's form: the class code, the teacher link and the 30 student links it shows."""
    page.goto(f"{url}/teacher")
    settle(page)
    main(page).get_by_label("Class name").fill(name)
    submit(page, main(page).get_by_role("button", name="Create the class"), main(page).locator("h1").nth(1))
    code = main(page).locator("h1").nth(1).inner_text().strip()
    blocks = main(page).locator('[data-testid="stCode"]')
    teacher = blocks.filter(has_text="teacher?token=").inner_text().strip()
    listed = next(b for b in blocks.all_inner_texts() if b.count("\n") >= LINKS - 1).split()
    return code, teacher, listed


def qr_text(locator) -> str:
    """What the QR code on screen says, read from a screenshot by zxing-cpp (an independent reader)."""
    image = np.asarray(Image.open(io.BytesIO(locator.screenshot())).convert("L"))
    [found] = zxingcpp.read_barcodes(image)
    return found.text


# -- the tests --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("url", list(STUDENTS), indirect=True)
def test_a_class_answers_and_the_teachers_view_shows_the_shares(class_server, url, new_page, request):
    backend, database, site = request.node.callspec.params["url"], url, class_server.url
    students = STUDENTS[backend]
    teacher = new_page(DESKTOP)
    code, teacher_link, listed = create_class(teacher, site, "Year 2, group B")
    assert teacher_link.startswith(f"{site}/teacher?token=")
    assert listed == [f"{site}/lesson?class={code}&lesson=basics&seed={s}" for s in range(1, LINKS + 1)]
    class_link = f"{site}/lesson?class={code}&lesson=basics"
    assert qr_text(main(teacher).locator('[data-testid="stImage"] img').first) == class_link
    shot(teacher, f"class-{backend}-created-1440")

    teacher.goto(teacher_link)  # the live view, open while the class works
    expect(metric(teacher, "Students in the class")).to_have_text("0")

    drawn = instances(database, code, [seed_of(i) for i in range(students)])
    lanes = [new_page(DESKTOP) for _ in range(LANES)]
    for start in range(0, students, LANES):  # the pages take turns; each load is a new session
        batch = list(zip(lanes, range(start, min(start + LANES, students)), strict=False))
        for page, i in batch:
            page.context.clear_cookies()  # each student is a browser of their own: one browser joins once
            page.goto(f"{class_link}&seed={seed_of(i)}")
        for page, i in batch:
            settle(page)
            student(page, i, drawn)

    want = expected(students, drawn)
    finished = students + (students + 1) // 2  # everyone Scores, every second student Scaling too
    token = teacher_link.split("token=")[1]
    db = ClassDB(database)
    try:
        view = db.class_view(token)
        stored = db.class_csv(token)
    finally:
        db.close()
    got = {e.exercise_id: e for e in view.exercises}
    for key, w in want.items():  # the database holds the pattern
        e = got[key]
        assert (e.students, e.right_first, e.common_wrong, e.common_wrong_count) == (
            w["students"], w["right"], *w["wrong"],
        )  # fmt: skip
    assert len(view.students) == students and len(stored.splitlines()) == 1 + finished

    expect(metric(teacher, "Students in the class")).to_have_text(
        str(students), timeout=30_000
    )  # live, no reload
    expect(metric(teacher, "Exercises finished")).to_have_text(str(finished))
    table = main(teacher).locator('[data-testid="stDataFrame"]').first
    for key, title in (("basics.scores", "1. Scores"), ("basics.scaling", "2. Scaling")):
        # the grid's accessible table is rebuilt after the metrics are drawn: wait for its counts
        row = table.locator("tr").filter(has_text=title)
        expect(row.locator("td").nth(2)).to_have_text(str(want[key]["students"]), timeout=30_000)
    rows = {r[0]: r for r in grid(teacher, 0)}  # Step, Share, Answered, Right, Most common wrong, Gave it
    for key, title in (("basics.scores", "1. Scores"), ("basics.scaling", "2. Scaling")):
        w, row = want[key], rows[title]
        assert float(row[1]) == pytest.approx(w["share"])
        assert (int(row[2]), int(row[3])) == (w["students"], w["right"])
        assert (row[4], int(row[5])) == (w["wrong"][0], w["wrong"][1])
    rows_of_students = grid(teacher, 1)
    assert [r[0] for r in rows_of_students] == [f"Student {i:02d}" for i in range(students)][
        : len(rows_of_students)
    ]
    with teacher.expect_download() as download:
        main(teacher).get_by_role("button", name="Every answer (CSV)").click()
    assert download.value.path().read_bytes().decode() == stored
    for width, height in (DESKTOP, PHONE):
        teacher.set_viewport_size({"width": width, "height": height})
        main(teacher).locator("h2").first.scroll_into_view_if_needed()  # the class's name, at the top
        painted(teacher)
        shot(teacher, f"class-{backend}-view-{width}")


def test_the_class_keys_hold_on_a_live_server(tmp_path, new_page):
    """A student link cannot read the teacher view; a wrong token reads nothing; a nickname of HTML and
    markdown is shown as text; a repeated submission is refused and the stored answer stays; a browser
    that joined is back in after a reload, and cannot join again under another nickname."""
    url = f"sqlite:///{tmp_path / 'classes.sqlite'}"
    db = ClassDB(url)
    info = db.create_class("Secret class", lessons={"basics": list(lessons.lesson("basics").exercise_ids())})
    srv = Server(env={"ATTNVIZ_CLASS_DB": url})
    alerts = []
    try:
        first, again = new_page(DESKTOP), new_page(PHONE)
        for page in (first, again):
            page.on("dialog", lambda d: (alerts.append(d.message), d.dismiss()))
            page.goto(f"{srv.url}/lesson?class={info.code}&lesson=basics&seed=4")
            settle(page)
            join(page, HOSTILE)
            assert HOSTILE in joined(page).inner_text()  # the nickname as typed, as text
        drawn = instance_seed(db, info.code, 4)  # the class's numbers for seed 4, not seed 4's public ones
        answer(first, 0, drawn, right_first=True)
        answer(again, 0, drawn, right_first=False)  # the same student, another tab: wrong first this time
        expect(main(again).get_by_text("was stored already: it counts")).to_be_visible()
        shot(again, "class-repeated-390")
        view = db.class_view(info.teacher_token)
        assert (view.exercises[0].students, view.exercises[0].right_first) == (1, 1)  # the first answer stays

        teacher = new_page(DESKTOP)
        teacher.on("dialog", lambda d: (alerts.append(d.message), d.dismiss()))
        teacher.goto(f"{srv.url}/teacher?token={info.teacher_token}")
        settle(teacher)
        assert grid(teacher, 1)[0][0] == HOSTILE  # the nickname cell: text
        for page in (first, again, teacher):
            assert page.locator('img[src="x"]').count() == 0 and page.locator('a[href="/x"]').count() == 0

        for query in (f"class={info.code}&lesson=basics", f"token={info.code}", "token=" + "A" * 43):
            teacher.goto(f"{srv.url}/teacher?{query}")
            settle(teacher)
            text = main(teacher).inner_text()
            assert "Secret class" not in text and HOSTILE not in text
            expect(main(teacher).locator('[data-testid="stDataFrame"]')).to_have_count(0)
            if query.startswith("token"):
                assert (
                    "teacher_token"
                    in main(teacher).locator('[data-testid="stAlertContentError"]').inner_text()
                )
            else:
                expect(main(teacher).get_by_role("button", name="Create the class")).to_be_visible()
        # A reload is a new session, as a server restart is: the browser that joined is back in without
        # Join (the final walk of 28 Nov 2026 saw the first click after a restart land on the join form).
        first.reload()
        settle(first)
        expect(joined(first)).to_contain_text(HOSTILE)
        # One browser joins a class once, reloaded too: each load masks the XSRF cookie anew (the final walk
        # of 28 Nov 2026 joined one browser under two nicknames by reloading the class link).
        first.goto(f"{srv.url}/lesson?class={info.code}&lesson=basics&seed=4")
        settle(first)
        main(first).get_by_label("Nickname").fill("Someone else")
        refused = main(first).get_by_text("one browser joins a class once")
        submit(first, main(first).get_by_role("button", name="Join the class"), refused)
        assert [s.nickname for s in db.class_view(info.teacher_token).students] == [HOSTILE]
        assert alerts == []
    finally:
        srv.stop()
        db.close()
