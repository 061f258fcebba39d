"""The speech lesson (issue 43's lesson step): which part of the sound does a word read?

The key is checked against the model itself: each clip is transcribed here, in each framework, by
`attnviz.pretrained.load("whisper-tiny.en").transcribe` (not through the lesson's cache), and the
offered spans, the asked word and the answer must be that transcript's word timing. The revealed row
is checked against what it claims to be — the row Whisper's timing aligns with the word — by where
its weight falls. The real-model tests are `slow`; a missing Whisper leaves the step out with a note.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnviz import lessons, pretrained
from attnviz.audio import read_wav
from attnviz.errors import SpecError
from attnviz.lessons import checkpoints, problem_set
from attnviz.lessons.speech import spans
from tests.conftest import requires

SPEECH = lessons.LESSONS["speech"]
SEEDS = (2, 3, 8, 17, 18, 19)  # six words of one clip (lesson): one transcription by the lesson, one here
FRAMEWORKS = [pytest.param("torch"), pytest.param("tensorflow", marks=requires("tensorflow"))]
whisper = pytest.mark.skipif(
    not checkpoints.available(spans.MODEL), reason=f"{spans.MODEL} is not installed here"
)


@pytest.fixture(scope="module")
def transcribed():
    """(clip, framework) → the model's transcript, computed here once."""
    model, done = pretrained.load(spans.MODEL), {}

    def get(clip: str, framework: str):
        if (clip, framework) not in done:
            done[clip, framework] = model.transcribe(
                read_wav(spans.CLIPS / f"{clip}.wav"), framework=framework
            )
        return done[clip, framework]

    return get


@whisper
@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_key_is_the_model_s_own_word_timing(transcribed, framework):
    seeds = SEEDS if framework == "torch" else SEEDS[:1]
    for seed in seeds:
        ex = spans.span(seed, 0, framework=framework)
        t = transcribed(ex.link.page_keys["speech.clip"], framework)
        timed = [(w.text.strip(), round(w.start, 2), round(w.end, 2)) for w in t.words]
        part = ex.parts[0]
        offered = [timed[[(round(a, 2), round(b, 2)) for _, a, b in timed].index((round(a, 2), round(b, 2)))]
                   for a, b in ex.data["spans"]]  # fmt: skip
        assert [w for w, *_ in offered].count(ex.data["word"]) == 1
        assert offered[part.answer][0] == ex.data["word"] and ex.data["word"] in part.prompt
        assert sorted(offered, key=lambda w: w[1]) == offered and len(set(offered)) == len(offered) == 4
        assert t.text.strip() in ex.given and ex.link.page_keys["speech.framework"] == framework
        assert lessons.grade(ex, [part.answer]).right
        for wrong in set(range(len(part.options))) - {part.answer}:
            ok, why = part.check(wrong)
            assert not ok and part.answer_text not in why and offered[wrong][0] in why


@whisper
@pytest.mark.slow
def test_the_revealed_row_reads_the_word_s_span(transcribed):
    """The row drawn over the spectrogram is the alignment heads' row of the decoder step that wrote
    the word: its weight falls in the word's timed span several times more than time alone would
    give it, and more than in any other offered span for most words (the row where the word is the
    query — it writes the next word — did neither: a median of 13 % in the span on the lesson clip)."""
    inside, ahead = [], []
    for seed in SEEDS:
        ex = spans.span(seed, 0)
        d = ex.data
        row, seconds = d["row"], d["mel"].shape[1] / 100
        assert row.shape == (d["mel"].shape[1] // 2,) and np.isclose(row.sum(), 1.0, atol=1e-5)
        weight = [spans._share(row, a, b) for a, b in d["spans"]]
        a, b = d["spans"][d["answer"]]
        inside.append(weight[d["answer"]] / ((b - a) / seconds))
        ahead.append(weight[d["answer"]] == max(weight))
    assert np.median(inside) > 3 and np.mean(ahead) >= 0.8, (inside, ahead)


@whisper
@pytest.mark.slow
def test_a_seed_gives_the_same_exercise_and_the_worksheet_prints_it():
    a, b = spans.span(3, 0), spans.span(3, 0)
    assert a.parts[0].options == b.parts[0].options and np.array_equal(a.data["row"], b.data["row"])
    assert len({spans.span(s, 0).parts[0].prompt for s in SEEDS}) >= 4
    sheet, _ = problem_set.both((3,), ("speech",))
    assert a.parts[0].prompt in sheet and all(o in sheet for o in a.parts[0].options)
    assert a.parts[0].answer_text in sheet.split("Answer key")[-1]


def test_without_whisper_the_step_is_left_out_with_a_note(monkeypatch):
    monkeypatch.setattr(checkpoints, "available", lambda name: name != spans.MODEL)
    assert SPEECH.steps == () and SPEECH.exercise_ids() == ()
    assert any(spans.MODEL in note for note in SPEECH.notes)
    with pytest.raises(SpecError) as info:  # a link to it opens the basics lesson, saying why
        lessons.lesson("speech")
    assert info.value.field == "lesson" and "speech" not in lessons.registry.runnable()
