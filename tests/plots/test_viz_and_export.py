"""Figure builders, summaries, downloads and the URL round trip, against direct computations."""

import io
import json
import re

import numpy as np
import pytest

from attnviz import AttentionSpec, masks, run_attention, settings
from attnviz.interp.scores import head_summary
from attnviz.plots import heatmaps
from attnviz.plots.cells import MAX_CELLS_PER_FIGURE, block_mean
from attnviz.result import config_json, steps_npz, weights_csv
from tests.conftest import requires


def test_block_mean_averages_blocks_including_ragged_edges():
    x = np.arange(7 * 5, dtype=float).reshape(7, 5)
    reduced, br, bc = block_mean(x, 3, 2)
    assert (br, bc) == (3, 3) and reduced.shape == (3, 2)
    assert reduced[0, 0] == x[:3, :3].mean() and reduced[2, 1] == x[6:, 3:].mean()
    same, *_ = block_mean(x, 10, 10)
    assert same is x


def test_head_grid_downsamples_large_maps_and_says_so():
    w = np.random.default_rng(0).random((16, 512, 512))
    fig = heatmaps.head_grid(w)
    assert len(fig.data) == 16 and fig.layout.meta["downsampled"] != [1, 1]
    cells = sum(np.asarray(t.z).size for t in fig.data)
    assert cells <= MAX_CELLS_PER_FIGURE
    br, bc = fig.layout.meta["downsampled"]
    assert np.isclose(np.asarray(fig.data[3].z)[0, 0], w[3, :br, :bc].mean())
    assert "block-averaged" in fig.layout.title.text.lower()


def test_head_grid_shares_one_colour_scale():
    w = np.random.default_rng(1).random((4, 6, 6))
    fig = heatmaps.head_grid(w)
    assert {t.coloraxis for t in fig.data} == {"coloraxis"}
    assert fig.layout.coloraxis.cmax == pytest.approx(w.max())


def test_matrix_marks_blocked_cells():
    values = np.array([[1.0, -np.inf], [0.5, 2.0]])
    fig = heatmaps.matrix(values)
    assert fig.data[0].z[0][1] is None and fig.layout.meta["blocked"] == 1
    assert fig.data[1].name == "blocked (−∞)" and list(fig.data[1].x) == [None]  # its legend entry
    assert np.array(fig.data[0].text, dtype=object)[0, 1] == "blocked (−∞)"  # what the hover says


def test_head_summary_matches_a_direct_computation():
    w = np.array([[[0.5, 0.5, 0.0], [0.1, 0.1, 0.8]], [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]])
    s0, s1 = head_summary(w, ["a", "b", "c"])
    expected = (-(0.5 * np.log(0.5)) * 2 - (0.1 * np.log(0.1) * 2 + 0.8 * np.log(0.8))) / 2
    assert s0["entropy"] == pytest.approx(expected) and s0["max_weight"] == 0.8
    assert s0["top_key"] == "c" and s0["top_key_share"] == pytest.approx(0.8 / 2)
    assert s1["entropy"] == 0.0 and s1["top_key"] == "a"  # the empty row is left out
    assert (s0["top_key_ties"], s1["top_key_ties"]) == (1, 1)


def test_head_summary_says_a_tie_instead_of_naming_the_first_key():
    """A head spread evenly over its keys (the hand-built "same position" head under a causal mask
    gives every key the same total) looks at no single key: the summary says the tie."""
    from attnviz.interp.scores import looks_most_at

    even = np.full((1, 4, 4), 0.25)
    near = np.array([[[0.5, 0.498, 0.002], [0.5, 0.5, 0.0]]])  # shares 0.5, 0.499, 0.001
    one = np.array([[[0.6, 0.4, 0.0], [0.6, 0.4, 0.0]]])
    (r_even,), (r_near,), (r_one,) = (
        head_summary(w, ["x", "y", "z", "w"][: w.shape[-1]]) for w in (even, near, one)
    )
    assert (r_even["top_key_ties"], r_near["top_key_ties"], r_one["top_key_ties"]) == (4, 2, 1)
    assert looks_most_at(r_even) == "no single key: 4 tie at 25% each"
    assert looks_most_at(r_one) == "“x” (position 0)"


@requires("torch")
def test_downloads_round_trip():
    spec = AttentionSpec(batch=2, len_q=3, mask="causal")
    result = run_attention(spec, "torch")
    archive = np.load(io.BytesIO(steps_npz(result)), allow_pickle=False)
    assert archive.files[0] == "00_q_proj" and len(archive.files) == len(result.steps) + 2
    np.testing.assert_array_equal(archive["weights"], result.weights)
    lines = weights_csv(result, ["x", "y", "z"], ["x", "y", "z"]).decode().splitlines()
    assert lines[0] == "batch,head,query_pos,query,key_pos,key,weight" and len(lines) == 1 + 2 * 4 * 3 * 3
    assert json.loads(config_json(spec, framework="torch"))["mask"] == "causal"


def test_url_round_trip_keeps_every_non_default_value():
    cfg = {**settings.DEFAULTS, "n_heads": 2, "mask": "custom", "custom_mask": "10.11", "bias": False,
           "scale": 0.25, "sentence": "a & b", "framework": "tensorflow"}  # fmt: skip
    query = settings.to_query(cfg)
    assert set(query) == {"n_heads", "mask", "custom_mask", "bias", "scale", "sentence", "framework"}
    restored, problems = settings.from_query(query)
    assert restored == cfg and problems == []


def test_custom_mask_code_resizes():
    mask = masks.decode_mask("10.11", 3, 3)
    assert mask.tolist() == [[True, False, True], [True, True, True], [True, True, True]]
    assert masks.encode_mask(mask) == "101.111.111"
    assert masks.decode_mask("", 2, 3).tolist() == np.tril(np.ones((2, 3), bool)).tolist()


def test_app_budget_suggests_what_fits():
    spec = AttentionSpec(batch=4, len_q=512, n_heads=16, d_model=1024)
    with pytest.raises(ValueError, match=r"len_q = len_kv ≤ (\d+) fits") as info:
        settings.check_fits(spec)
    fits = int(re.search(r"≤ (\d+) fits", str(info.value)).group(1))
    settings.check_fits(spec.replace(len_q=fits))  # the suggestion really fits
    with pytest.raises(ValueError):
        settings.check_fits(spec.replace(len_q=fits + 1))


def test_head_summary_leaves_out_rows_with_one_allowed_key():
    """Issue 46, point 10: under a causal mask row 0 holds a single weight 1 whatever the head does;
    it made every head's max weight 1 and pulled the top key to position 0."""
    w = np.array([[[1.0, 0.0, 0.0], [0.3, 0.7, 0.0], [0.2, 0.6, 0.2]]])  # (1, 3, 3) one head, causal
    allowed = np.tril(np.ones((3, 3), bool))
    (r,) = head_summary(w, ["a", "b", "c"], allowed)
    rows = w[0, 1:]  # the rows with two or more allowed keys
    assert r["max_weight"] == pytest.approx(rows.max()) and r["max_weight"] < 1
    assert r["top_key"] == "b" and r["top_key_share"] == pytest.approx(rows.sum(0)[1] / rows.sum())
    assert r["single_key_rows"] == 1
    (unmasked,) = head_summary(w, ["a", "b", "c"])  # no mask said: every row counts, none left out
    assert unmasked["max_weight"] == 1.0 and unmasked["single_key_rows"] == 0
