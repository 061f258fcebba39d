"""The speech lesson's step on the Lesson page (AppTest): built in a worker through the page's door,
a wrong answer explained and not revealed, then the right one revealed — the word's cross-attention row
over the clip's spectrogram, in the Speech page's colours — each compared with the library's exercise
(`attnviz.lessons.speech`, whose key tests/lessons/test_lessons_speech.py checks against the model itself)."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pytest

from attnviz import lessons
from attnviz.app.speech.figures import SOUND_SCALE
from attnviz.lessons import checkpoints
from attnviz.lessons.speech import spans
from tests.app.conftest import array, assert_clean, figures, open_directly, plain
from tests.app.test_lesson import _query, answer, reveal_shown, right, wrong

if not checkpoints.available(spans.MODEL):
    pytest.skip(f"{spans.MODEL} is not installed here", allow_module_level=True)


def test_wrong_then_right_reveals_the_word_s_row_over_the_spectrogram():
    seed = 2
    ex = lessons.lesson("speech").exercise("span", seed)  # the library, in this process
    at = open_directly("lesson", {"lesson": "speech", "step": "1", "seed": str(seed)})
    assert_clean(at)
    assert at.header[0].value == f"1. {ex.title}" and not reveal_shown(at)
    [question] = figures(at)
    [mel] = [t for t in question["data"] if t["type"] == "heatmap"]
    assert np.allclose(array(mel["z"]), ex.data["mel"], atol=1e-6)
    assert [list(stop) for stop in mel["colorscale"]] == [list(stop) for stop in SOUND_SCALE]
    assert len([s for s in question["layout"]["shapes"] if s["type"] == "rect"]) == len(ex.parts[0].options)

    answer(at, ex, wrong(ex))
    assert [plain(e.value) for e in at.error] == [plain(ex.parts[0].check(wrong(ex)[0])[1])]
    assert not reveal_shown(at)
    answer(at, ex, right(ex))
    assert any(plain(s.value).startswith("Right") for s in at.success) and reveal_shown(at)
    assert _query(at)["lesson.log"] == "1r"  # one wrong try, then right

    reveal = figures(at)[-1]
    [row] = [t for t in reveal["data"] if t["type"] == "scatter"]
    assert np.allclose(array(row["y"]), ex.data["row"], atol=1e-6)
    key = [s for s in reveal["layout"]["shapes"] if s["line"]["dash"] == "solid"]
    assert [(k["x0"], k["x1"]) for k in key] == [ex.data["spans"][ex.parts[0].answer]]
    link = at.link_button[0].proto.url
    assert urlsplit(link).path == "speech" and dict(parse_qsl(urlsplit(link).query)) == ex.link.page_keys
    speech = open_directly("speech", ex.link.page_keys)  # the link opens the same clip and word there
    assert_clean(speech)
    assert speech.selectbox(key="speech.clip").value == ex.link.page_keys["speech.clip"]
    assert speech.selectbox(key="speech.word").value == ex.link.page_keys["speech.word"]
