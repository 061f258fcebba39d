"""The FlashAttention tiles page on SmolLM2-135M-Instruct: the tile it draws, the running max and denominator
and the KV-cache table, checked against the model's own full attention (its recorded `scaled` scores) and its
config, in both frameworks; a link reopens the same tile. Slow: a 30-layer model runs."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.frameworks import label
from tests.app.conftest import SMOLLM2, array, chart, errors, open_page, warnings

NAME, TEXT = SMOLLM2, "The cat sat on the mat."
if NAME not in pretrained.local_checkpoints():
    pytest.skip(f"{NAME} is not installed here: {pretrained.not_installed()[NAME]}", allow_module_level=True)
pytest.importorskip("gguf", reason="the gguf package (dev extra) converts SmolLM2's file")
pytestmark = pytest.mark.slow
LAYER, HEAD, BQ, BK = 3, 4, 3, 2
ATOL_SCORE = 1e-4  # a float32 score tile against the model's float32 scores, summed in another order


def page(framework: str, **extra: str):
    query = {"tiles.checkpoint": NAME, "tiles.text": TEXT, "tiles.layer": str(LAYER), "tiles.head": str(HEAD),
             "tiles.bq": str(BQ), "tiles.bk": str(BK), "tiles.framework": label(framework), **extra}  # fmt: skip
    return open_page("tiles", query)


@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
def test_a_diagonal_tile_and_its_running_max_and_sum_equal_the_models_scores(smol, framework):
    out = smol.run(TEXT, framework, capture_layer=LAYER)
    scores = next(s.value for s in out.steps if s.name == "masked")[
        0, HEAD
    ]  # (L, L), −inf above the diagonal
    L = scores.shape[0]
    n_k = -(-L // BK)
    rows, keys = range(BQ, 2 * BQ), range(2 * BK, 3 * BK)  # tile (1, 2): the diagonal cuts it
    at = page(framework, **{"tiles.step": str(n_k + 3)})  # 1-based: query block 1, key block 2
    assert not errors(at) and not errors(at, "sidebar"), errors(at)
    assert at.slider(key="tiles.step").value == n_k + 3  # the link's tile, reopened
    held = scores[rows.start : rows.stop, keys.start : keys.stop]
    (drawn,) = [t for t in chart(at, "tiles.grid")["data"] if t["type"] == "heatmap" and t.get("colorbar")]
    z = array(drawn["z"])
    assert np.array_equal(np.isnan(z), np.isinf(held)) and np.isinf(held).any()
    np.testing.assert_allclose(z[np.isfinite(held)], held[np.isfinite(held)], atol=ATOL_SCORE)
    seen = np.where(np.arange(L) < keys.stop, scores, -np.inf)[rows.start : rows.stop]  # keys up to this tile
    m = seen.max(axis=1)
    bars = [
        t for t in chart(at, "tiles.stats")["data"] if t["type"] == "bar" and t["name"] == "after this tile"
    ]
    np.testing.assert_allclose(array(bars[0]["x"]), m, atol=ATOL_SCORE)  # running max
    np.testing.assert_allclose(array(bars[1]["x"]), np.exp(seen - m[:, None]).sum(axis=1), rtol=ATOL_SCORE)


def test_kv_cache_table_reads_the_config_and_a_bad_tile_in_the_link_is_named(smol):
    at = page("torch", **{"tiles.step": "999"})
    assert "tiles.step='999' ignored" in warnings(at), warnings(at)
    assert at.slider(key="tiles.step").value == 1
    (table,) = [d.value for d in at.dataframe]
    row = table.set_index("model").loc[NAME]
    assert row["layout"] == "GQA: 9 query heads on 3 K/V heads"
    # 2 (K, V) × 30 layers × 3 K/V heads × 64 × 4 bytes = 46,080 B a token; MHA: 9 K/V heads, 3×.
    assert (row["per token"], row["at 4k"], row["at 4k if MHA"], row["at 32k"]) == (
        "45 KiB",
        "180 MiB",
        "540 MiB",
        "1.41 GiB",
    )
