"""The Speech page (issue 43): Whisper tiny.en on a bundled clip through a worker; the transcript,
the spectrogram, the cross-attention heatmap (the alignment heads' average, or a head a link names),
the alignment heads on the layer × head grid and the words, read back against the library run in
this process. Bad audio sent to the page's task is refused with a SpecError naming the field."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.app.speech import tasks as speech
from attnviz.app.speech import work as ui
from attnviz.errors import SpecError
from tests.app.conftest import array, assert_clean, chart, heatmaps, open_directly, plain
from tests.app.test_fields import assert_widgets_within_the_guard
from tests.conftest import requires

if ui.MODEL not in pretrained.speech_choices():
    pytest.skip(ui.install_note(), allow_module_level=True)

CLIP = "fox"


@pytest.fixture(scope="module")
def heard():
    """The page's task, run in this process."""
    return speech.transcribe(ui.MODEL, ui.clip_bytes(CLIP), "torch")


def test_a_link_opens_a_head_and_every_figure_is_the_library_s(heard):
    at = open_directly(
        "speech", {"speech.clip": CLIP, "speech.average": "False", "speech.layer": "2", "speech.head": "5"}
    )
    assert_clean(at)
    assert_widgets_within_the_guard(at, ["speech.layer", "speech.head"])
    t = heard.transcript
    assert any(t.text in plain(m.value) for m in at.markdown)
    mel = heatmaps(chart(at, "speech.mel"))[0]
    assert np.allclose(array(mel["z"]), heard.mel, atol=1e-6)
    # Streamlit's theme repaints #000001 … #000020 anywhere in a figure (its template uses them as
    # placeholders): Magma's #000004 drew silence light pink
    assert not re.search(r"#0000(0[1-9]|1[0-9]|20)\b", json.dumps(chart(at, "speech.mel")["data"]), re.I)
    dark, light = (sum(map(int, re.findall(r"\d+", mel["colorscale"][i][1]))) for i in (0, -1))
    assert dark < 100 < 600 < light and mel["zmin"] == pytest.approx(heard.mel.max() - 2, abs=1e-5)
    assert mel["colorbar"]["ticktext"][-1].endswith("silent") and mel["zmax"] == pytest.approx(
        heard.mel.max()
    )
    cross = heatmaps(chart(at, "speech.cross"))[0]
    assert np.allclose(array(cross["z"]), ui.rows(t, 2, 5), atol=1e-6)
    assert list(cross["y"]) == ui.token_labels(t)
    grid = array(heatmaps(chart(at, "speech.grid"))[0]["z"])
    assert {(int(a), int(b)) for a, b in zip(*np.nonzero(grid), strict=True)} == set(t.alignment_heads)
    assert len(at.dataframe) == 1 and len(at.dataframe[0].value) == len(t.words)


def test_the_average_of_the_alignment_heads(heard):
    at = open_directly("speech", {"speech.clip": CLIP})
    assert_clean(at)
    cross = heatmaps(chart(at, "speech.cross"))[0]
    t = heard.transcript
    z = array(cross["z"])
    assert np.allclose(z, ui.rows(t, None, None), atol=1e-6)
    # each token's row is the step that wrote it: its weight falls in the token's timed span, several
    # times what time alone gives (the row where it is the query, which writes the next token: ~1×)
    P, lift = z.shape[1], []
    times = np.arange(P) * ui.SECONDS_PER_POSITION
    for i, (start, end) in enumerate(zip(t.token_times, t.token_ends, strict=True)):
        inside = (times >= start - 1e-9) & (times < end - 1e-9)
        if inside.sum() >= 5:
            lift.append(z[i, inside].sum() / (inside.sum() / P))
    assert np.median(lift) > 3, lift


@pytest.mark.parametrize("data", [b"not a wav file at all", b"RIFF\x00\x00\x00\x00WAVE"])
def test_bad_audio_is_refused_by_the_task(data):
    with pytest.raises(SpecError) as caught:
        speech.transcribe(ui.MODEL, data, "torch")
    assert caught.value.field == "audio"


def test_an_oversized_upload_is_refused_before_it_travels():
    with pytest.raises(SpecError, match="MiB"):
        ui.check_size(bytes(ui.MAX_BYTES + 1))


@pytest.mark.parametrize("mode", ["cross", "self"])
def test_cross_mode_points_to_the_speech_page_in_the_same_words(mode):
    at = open_directly("explorer", {"mode": mode})
    linked = any("Whisper" in link.proto.label for link in at.get("page_link"))
    at = open_directly("steps", {"mode": mode})
    explained = any("queries come from the decoder" in caption.value for caption in at.caption)
    assert linked == explained == (mode == "cross")


@requires("tensorflow")
def test_tensorflow_with_the_encoder_map_stays_in_the_run_budget(heard):
    """The encoder's self-attention comes back cut to the clip's positions: the whole 1500 × 1500
    map of every head (216 MB) and TensorFlow's intermediates went over the 512 MiB run budget."""
    at = open_directly(
        "speech", {"speech.clip": CLIP, "speech.encoder": "true", "speech.framework": "tensorflow"}
    )
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    P = heard.transcript.cross_attentions.shape[-1]
    assert array(heatmaps(chart(at, "speech.encoder_map"))[0]["z"]).shape == (P, P)
