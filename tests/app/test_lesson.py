"""The Lesson page under AppTest: the whole path, wrong then right, reload, seeds, the teacher's export.

Answers come from `attnviz.lessons` (checked against independent oracles in tests/lessons/test_lessons.py);
here the page must grade them the same way, explain a wrong one, reveal after a right one, and keep
progress in the URL.
"""

import functools
import re

import numpy as np
import pytest

from attnviz import lessons
from tests.app.conftest import array, assert_clean, figures, open_page, plain

N = len(lessons.STEPS)


def _key(ex, k, sheet=None):
    """Part k's widget key: named by the link's seed, `sheet` (in a class the exercise is drawn from the
    class's instance of it, which the page never shows; tests/app/test_class_control.py)."""
    return f"lesson.{ex.lesson}.{ex.seed if sheet is None else sheet}.{ex.step}.{k}"


def answer(at, ex, responses, *, sheet=None):
    """Fill each part's input with `responses[k]` (in the part's form) and press Check (`sheet`: the
    link's seed when it is not the exercise's, in a class)."""
    key = functools.partial(_key, sheet=sheet)
    for k, (part, value) in enumerate(zip(ex.parts, responses, strict=True)):
        if part.kind == lessons.CHOICE:
            at.pills(key=key(ex, k)).set_value(value)
        elif part.kind == lessons.NUMBERS:
            for i, v in enumerate(value):
                at.number_input(key=f"{key(ex, k)}.{i}").set_value(round(float(v), 2))
        elif part.kind == lessons.SHAPE:
            at.text_input(key=key(ex, k)).input(value)
        else:
            for r, row in enumerate(np.asarray(value)):
                at.pills(key=f"{key(ex, k)}.{r}").set_value(
                    [c for c, on in zip(part.options, row, strict=True) if on]
                )
    at.form_submit_button(key="lesson.check").click().run()
    assert_clean(at)


def right(ex):
    return [p.answer if p.kind != lessons.SHAPE else str(p.answer) for p in ex.parts]


def wrong(ex):
    out = []
    for p in ex.parts:
        if p.kind == lessons.CHOICE:
            out.append((p.answer + 1) % len(p.options))
        elif p.kind == lessons.NUMBERS:
            out.append(tuple(1.0 / len(p.options) for _ in p.options))  # uniform: never the row here
        elif p.kind == lessons.SHAPE:
            out.append(str(tuple(reversed(p.answer))))
        else:
            out.append(~np.asarray(p.answer))
    return out


def reveal_shown(at) -> bool:
    return any(s.value in ("Why", "The answer") for s in at.subheader)


def test_whole_lesson_wrong_then_right_then_summary():
    seed = 5
    at = open_page("lesson", {"seed": str(seed)})
    for step in range(N):
        ex = lessons.exercise(step, seed)
        assert at.header[0].value == f"{step + 1}. {ex.title}"
        assert not reveal_shown(at)
        if step == 0:  # right first time
            answer(at, ex, right(ex))
        else:
            answer(at, ex, wrong(ex))
            alerts = [plain(e.value) for e in at.error]
            assert alerts and all(len(a) > 40 for a in alerts), alerts  # says why, not just ✗
            assert not reveal_shown(at)
            assert any(e.label == "Hint" for e in at.expander)
            answer(at, ex, right(ex))
        assert any(plain(s.value).startswith(("Right", "(a) Right")) for s in at.success)
        assert reveal_shown(at)
        if ex.key not in ("shapes",):
            assert figures(at), f"step {step} reveals a figure"
        if ex.link is not None:
            url = at.link_button[0].proto.url
            assert url.startswith(ex.link.page + "?")
            assert f"seed={ex.link.config.get('seed', 0)}" in url or "seed" not in ex.link.config
        assert _query(at)["step"] == str(step + 1) and _query(at)["lesson"] == "basics"
        at.button(key="lesson.next").click().run()
        assert_clean(at)
    assert at.header[0].value == "Summary"
    assert any("**1 of 8** right first time" in m.value for m in at.markdown)
    first, *others = list(at.table[0].value["Result"])
    assert first.endswith("right first time")
    assert all(r.startswith("right after 1 wrong try") for r in others)


def _query(at) -> dict:
    return {k: (v[-1] if isinstance(v, list) else v) for k, v in dict(at.query_params).items()}


def test_reload_lands_where_the_student_was():
    seed = 9
    at = open_page("lesson", {"seed": str(seed)})
    ex = lessons.exercise(0, seed)
    answer(at, ex, wrong(ex))
    answer(at, ex, right(ex))
    at.button(key="lesson.next").click().run()
    ex1 = lessons.exercise(1, seed)
    answer(at, ex1, wrong(ex1))  # step 2 open, one wrong try
    query = _query(at)
    assert query["step"] == "2" and query["lesson.log"].startswith("1r1o")

    again = open_page("lesson", query)  # a new session from the same URL: the reload
    assert again.header[0].value == f"2. {ex1.title}"
    assert not reveal_shown(again)
    assert again.button(key="lesson.show")  # one wrong try: the answer may be shown
    again.button(key="lesson.go.0").click().run()
    assert again.header[0].value == f"1. {ex.title}" and reveal_shown(again)  # solved stays solved


def test_show_the_answer_after_a_wrong_try_is_recorded():
    at = open_page("lesson", {"seed": "2"})
    ex = lessons.exercise(0, 2)
    answer(at, ex, wrong(ex))
    at.button(key="lesson.show").click().run()
    assert reveal_shown(at) and any(s.value == "The answer" for s in at.subheader)
    assert _query(at)["lesson.log"].startswith("1s")


@pytest.mark.parametrize("step", [0, 2, 5])
def test_two_seeds_give_different_numbers_and_both_grade_right(step):
    shown = []
    for seed in (3, 4):
        at = open_page("lesson", {"seed": str(seed), "lesson.step": str(step + 1), "lesson.log": "0o" * N})
        ex = lessons.exercise(step, seed)
        assert at.header[0].value == f"{step + 1}. {ex.title}"
        shown.append(" ".join(m.value for m in at.markdown))
        answer(at, ex, right(ex))
        assert reveal_shown(at) and not at.error
    assert shown[0] != shown[1]


def test_bad_progress_in_the_url_starts_from_the_beginning():
    at = open_page("lesson", {"lesson.step": "99", "lesson.log": "<script>"})
    assert at.header[0].value == "1. Scores"
    assert _query(at)["lesson.log"] == "0o" * N


def test_teacher_export_downloads_markdown_and_html_with_keys():
    at = open_page("lesson")
    at.number_input(key="lesson.first_seed").set_value(10)
    at.number_input(key="lesson.students").set_value(2)
    at.button(key="lesson.prepare").click().run()
    assert_clean(at)
    seeds, md, html = at.session_state["lesson.problem_set"]
    assert seeds == (10, 11)
    assert md == lessons.problem_set.markdown([10, 11]) and html == lessons.problem_set.html([10, 11])
    assert len(at.get("download_button")) == 3  # the links (CSV), the Markdown, the HTML


def _link_query(ex) -> dict:
    from urllib.parse import parse_qsl, urlsplit

    from attnviz.app.lesson.answers import link_url

    return dict(parse_qsl(urlsplit(link_url(ex.link)).query))


def test_scores_link_opens_step_by_step_on_the_same_numbers():
    ex = lessons.exercise(0, 5)
    at = open_page("steps", _link_query(ex))
    maps = [array(t["z"]) for f in figures(at) for t in f["data"] if t["type"] == "heatmap"]
    assert any(z.shape == (3, 3) and np.allclose(z, ex.data["scores"], atol=1e-9) for z in maps)


def test_heads_link_opens_the_explorer_on_the_same_heads():
    ex = lessons.exercise(4, 5)
    at = open_page("explorer", _link_query(ex))
    panels = [array(t["z"]) for t in figures(at)[0]["data"] if t["type"] == "heatmap"]
    assert len(panels) == 4
    for shown in ex.data["panels"]:
        assert any(np.allclose(shown, p, atol=1e-5) for p in panels)


def test_learned_link_opens_the_pretrained_page_on_the_same_sentence_layer_and_head():
    ex = lessons.exercise(7, 5)
    at = open_page("pretrained", _link_query(ex))
    layer = int(ex.link.page_keys["pre.layer"])
    assert at.text_input(key="pre.text").value in ex.given
    assert at.select_slider(key="pre.layer").value == layer
    assert at.multiselect(key="pre.view_heads").value == [ex.data["head"]]


@pytest.mark.parametrize(("raw", "used"), [("2147483647", 2147483647 % (lessons.MAX_SEED + 1)), ("abc", 0)])
def test_a_seed_outside_the_lessons_range_is_folded_or_refused_not_a_traceback(raw, used):
    at = open_page("lesson", {"seed": raw})
    assert at.progress[0].proto.text.startswith(f"Seed {used} ·")
    if raw.isdigit():
        assert any(f"seed {used:,}" in c.value for c in at.caption)
    ex = lessons.exercise(0, used)
    answer(at, ex, right(ex))
    assert reveal_shown(at)


def test_widget_labels_are_plain_text_and_no_placeholder_looks_like_an_answer():
    """Issue 46, point 18: aria-labels carried raw `**markdown**`; the shape field's placeholder was one
    digit from seed 1's answer."""
    at = open_page("lesson", {"seed": "1"})
    for step in range(len(lessons.STEPS) - 1):  # the last step runs MiniLM: its labels are built alike
        ex = lessons.exercise(step, 1)
        assert at.header[0].value == f"{step + 1}. {ex.title}"
        labels = [w.label for w in [*at.get("button_group"), *at.text_input, *at.number_input]]
        assert labels and not [t for t in labels if "**" in t or "`" in t or "\\" in t], labels
        for field in at.text_input:
            if field.key.startswith("lesson.basics."):
                assert not re.search(r"\d", field.placeholder or ""), field.placeholder
        at.button(key="lesson.next").click().run()
