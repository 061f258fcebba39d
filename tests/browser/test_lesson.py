"""The Lesson page in headless Chromium at 1440 × 900 and on a phone (390 × 844).

The whole path: a wrong answer shows the explanation, the right one the reveal; a reload keeps the
progress; two seeds show different numbers and both grade right; on a phone nothing scrolls
sideways and every input is big enough to tap. Answers come from `attnviz.lessons` (checked against
independent oracles in tests/lessons/test_lessons.py). Screenshots land in test-artifacts/lesson-*.png.
"""

import re

import numpy as np
import pytest
from playwright.sync_api import expect

from attnviz import lessons
from tests.browser.conftest import assert_no_exception, click_and_settle, settle, shot

pytestmark = pytest.mark.browser

N = len(lessons.STEPS)
PHONE, DESKTOP = (390, 844), (1440, 900)
MIN_TAP_PX = 24  # WCAG 2.2 target size (minimum), CSS pixels


def main(page):
    return page.locator('[data-testid="stMain"]')


def header(page, text: str) -> None:
    expect(page.locator("h2").filter(has_text=text)).to_be_visible(timeout=120_000)
    settle(page)


def fill(page, ex, responses) -> None:
    """Enter one response per part the way a student does (click, type, tap), then press Check."""
    form = main(page).locator('[data-testid="stForm"]')
    numbers = form.locator('[data-testid="stNumberInput"] input')
    texts = form.locator('[data-testid="stTextInput"] input')
    pills = form.locator('[data-testid="stButtonGroup"]')
    n_pills = n_text = 0
    for part, value in zip(ex.parts, responses, strict=True):
        if part.kind == lessons.CHOICE:
            exact = re.compile("^" + re.escape(part.options[value]) + "$")
            pills.nth(n_pills).locator("button").filter(has_text=exact).click()
            n_pills += 1
        elif part.kind == lessons.NUMBERS:
            for i, v in enumerate(value):
                numbers.nth(i).fill(f"{v:.2f}")
        elif part.kind == lessons.SHAPE:
            texts.nth(n_text).fill(value)
            n_text += 1
        else:
            for r, row in enumerate(np.asarray(value)):
                buttons = pills.nth(n_pills + r).locator("button")
                for i, on in enumerate(row):
                    active = buttons.nth(i).get_attribute("aria-pressed") == "true"
                    if active != bool(on):  # a tap toggles
                        buttons.nth(i).click()
            n_pills += len(part.rows)
    click_and_settle(page, form.get_by_role("button", name="Check"))
    assert_no_exception(page)


def right(ex):
    return [p.answer if p.kind != lessons.SHAPE else str(p.answer) for p in ex.parts]


def wrong(ex):
    out = []
    for p in ex.parts:
        if p.kind == lessons.CHOICE:
            out.append((p.answer + 1) % len(p.options))
        elif p.kind == lessons.NUMBERS:
            out.append(tuple(1 / len(p.options) for _ in p.options))
        elif p.kind == lessons.SHAPE:
            out.append(str(tuple(reversed(p.answer))))
        else:
            out.append(np.asarray(p.answer).T)  # the past blocked instead of the future
    return out


def reveal(page):
    return main(page).locator("h3").filter(has_text="Why")


def no_sideways_scroll(page) -> None:
    widths = page.evaluate(
        "() => [document.documentElement.scrollWidth,"
        " document.querySelector('[data-testid=\"stMain\"]').scrollWidth]"
    )
    assert max(widths) <= page.viewport_size["width"], widths


def tap_targets_ok(page) -> None:
    """Every input of the exercise is at least MIN_TAP_PX tall and wide, and inside the screen."""
    width = page.viewport_size["width"]
    targets = main(page).locator(
        '[data-testid="stForm"] button, [data-testid="stForm"] input, '
        '[data-testid="stMain"] [data-testid="stButton"] button'
    )
    for i in range(targets.count()):
        box = targets.nth(i).bounding_box()
        if box is None or box["height"] == 0:
            continue  # not rendered (e.g. a collapsed label)
        assert box["height"] >= MIN_TAP_PX and box["width"] >= MIN_TAP_PX, (targets.nth(i).inner_text(), box)
        assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1, (targets.nth(i).inner_text(), box)


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_whole_lesson_wrong_then_right(server, new_page, size):
    seed = 6
    page = new_page(size)
    page.goto(f"{server.url}/lesson?seed={seed}")
    for step in range(N):
        ex = lessons.exercise(step, seed)
        header(page, f"{step + 1}. {ex.title}")
        name = f"lesson-{size[0]}-{step + 1}-{ex.key}"
        if size == PHONE:
            no_sideways_scroll(page)
            tap_targets_ok(page)
        fill(page, ex, wrong(ex))
        errors = main(page).locator('[data-testid="stAlertContentError"]')
        expect(errors.first).to_be_visible()
        texts = errors.all_inner_texts()
        assert all(len(t) > 40 for t in texts), texts  # the why, not just ✗
        expect(reveal(page)).to_have_count(0)
        shot(page, name + "-wrong")
        fill(page, ex, right(ex))
        expect(reveal(page)).to_be_visible()
        expect(main(page).locator('[data-testid="stAlertContentSuccess"]').first).to_be_visible()
        chart = main(page).locator('[data-testid="stPlotlyChart"]').last
        chart.scroll_into_view_if_needed()
        expect(chart).to_be_visible()
        if ex.link is not None:
            href = main(page).locator('[data-testid="stLinkButton"] a').get_attribute("href")
            assert href.split("?")[0].endswith(ex.link.page)
        if size == PHONE:
            no_sideways_scroll(page)
        shot(page, name + "-reveal")
        main(page).get_by_role("button", name="Summary →" if step == N - 1 else "Next →").click()
    header(page, "Summary")
    expect(main(page)).to_contain_text("0 of 8")
    shot(page, f"lesson-{size[0]}-summary")


def test_reload_keeps_progress(server, new_page):
    seed = 8
    page = new_page(DESKTOP)
    page.goto(f"{server.url}/lesson?seed={seed}")
    ex = lessons.exercise(0, seed)
    header(page, "1. Scores")
    fill(page, ex, right(ex))
    expect(reveal(page)).to_be_visible()  # what the student sees before pressing Next
    main(page).get_by_role("button", name="Next →").click()
    header(page, "2. Scaling")
    assert "&step=2" in page.url and "lesson=basics" in page.url and "lesson.log=0r" in page.url
    page.reload()
    header(page, "2. Scaling")
    icon = '[data-testid="stIconMaterial"]'
    first = main(page).locator(".st-key-lesson-go-0 button").first
    expect(first.locator(icon)).to_have_text("check")  # step 1 answered right
    expect(main(page).locator(".st-key-lesson-go-1 button").first.locator(icon)).to_have_count(0)
    first.click()
    header(page, "1. Scores")
    expect(reveal(page)).to_be_visible()  # solved before the reload: still solved


def test_two_seeds_show_different_numbers_and_both_grade_right(server, new_page):
    shown = []
    for seed in (3, 4):
        page = new_page(PHONE)
        page.goto(f"{server.url}/lesson?seed={seed}&lesson.step=3&lesson.log={'0o' * N}")
        ex = lessons.exercise(2, seed)
        header(page, "3. Softmax")
        shown.append(main(page).locator("table").first.inner_text())
        fill(page, ex, right(ex))
        expect(reveal(page)).to_be_visible()
        expect(main(page).locator('[data-testid="stAlertContentError"]')).to_have_count(0)
    assert shown[0] != shown[1]


def test_browser_back_and_forward_move_between_steps(server, new_page):
    """Issue 46, point 6: eight Backs stayed on step 7; in basics the third Back left the lesson. And one
    history entry per action (the final walk of 28 Nov 2026: opening and each Check pushed two, one per
    key written, so an answered step took three Backs to leave)."""
    page = new_page(DESKTOP)
    page.goto(f"{server.url}/lesson?seed=2")
    header(page, "1. Scores")
    expect(page).to_have_url(re.compile(r"lesson\.log="))
    opened = page.evaluate("history.length")
    ex = lessons.exercise(0, 2)
    fill(page, ex, right(ex))
    expect(reveal(page)).to_be_visible()
    expect(page).to_have_url(re.compile(r"lesson\.answers="))
    assert page.evaluate("history.length") == opened + 1, "a Check is one entry"
    for step in range(1, 4):  # Next three times: steps 2, 3, 4
        main(page).get_by_role("button", name="Next →").click()
        header(page, f"{step + 1}. {lessons.STEPS[step][1]}")
    assert page.evaluate("history.length") == opened + 4
    for step in (2, 1, 0, 0):  # Back four times: 3, 2, 1 answered, 1 as opened; still the lesson
        page.go_back()
        header(page, f"{step + 1}. {lessons.STEPS[step][1]}")
        assert f"step={step + 1}" in page.url and "/lesson" in page.url
    page.go_forward()
    header(page, "1. Scores")
    page.go_forward()
    header(page, "2. Scaling")
    assert_no_exception(page)
