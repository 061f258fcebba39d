"""FlashAttention's tiles (`attnviz.kernels`) against the float64 NumPy oracle: the output, each tile's
running max and denominator, which tiles a causal mask skips, the memory it reports, and the refusals."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from attnviz import masks, reference
from attnviz.errors import SpecError
from attnviz.frameworks import FRAMEWORKS
from attnviz.kernels import kv_cache_size, replay, tiled_attention
from attnviz.kernels.tiles import TWINS
from tests.conftest import RTOL_F32, RTOL_F64, SEED, assert_close, requires

# (B, H, Lq, Lk, Dk, Dv, block_q, block_k): blocks that divide, that do not, Lq ≠ Lk both ways, one block,
# blocks of one, blocks longer than the sequence.
SHAPES = [
    (1, 1, 8, 8, 4, 4, 4, 4),
    (2, 3, 7, 7, 5, 3, 3, 2),
    (1, 2, 5, 11, 6, 6, 2, 4),
    (2, 1, 13, 6, 4, 7, 5, 3),
    (1, 1, 9, 9, 3, 3, 1, 1),
    (1, 2, 6, 10, 4, 4, 16, 32),
]
IDS = ["divides", "ragged", "Lq<Lk", "Lq>Lk", "blocks-of-1", "one-block"]


def inputs(B, H, Lq, Lk, Dk, Dv, dtype=np.float64):
    rng = np.random.default_rng(SEED)
    q, k = rng.standard_normal((B, H, Lq, Dk)) * 2, rng.standard_normal((B, H, Lk, Dk)) * 2
    return q.astype(dtype), k.astype(dtype), rng.standard_normal((B, H, Lk, Dv)).astype(dtype)


def oracle(q, k, v, causal):
    """(output, scaled masked scores) in float64."""
    mask = masks.causal(q.shape[2], k.shape[2]) if causal else None
    out, _, steps = reference.scaled_dot_product_attention(q, k, v, mask)
    return out, steps["masked" if causal else "scaled"]


@pytest.fixture(params=SHAPES, ids=IDS)
def shape(request):
    return request.param


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_output_equals_softmax_qk_v_in_float64(framework, shape, causal):
    *dims, bq, bk = shape
    q, k, v = inputs(*dims)
    got = tiled_attention(q, k, v, block_q=bq, block_k=bk, causal=causal, framework=framework)
    assert got.output.dtype == np.float64 and got.framework == framework
    assert_close(got.output, oracle(q, k, v, causal)[0], RTOL_F64, f"{framework} output")


def test_progress_counts_every_tile_and_what_it_raises_ends_the_pass(framework):
    """`progress(done, total)` after each tile, 1…total where total is the tiles recorded (skipped ones
    too); an exception from it ends the pass there (how a worker's task stops between two tiles)."""
    q, k, v = inputs(1, 2, 9, 9, 3, 3)
    seen = []
    got = tiled_attention(
        q, k, v, block_q=2, block_k=3, causal=True, framework=framework,
        progress=lambda done, total: seen.append((done, total)),
    )  # fmt: skip
    total = len(got.tiles)
    assert seen == [(i, total) for i in range(1, total + 1)] and total == 5 * 3

    class Enough(Exception):
        pass

    def stop_at_4(done, _total):
        if done == 4:
            raise Enough

    with pytest.raises(Enough):
        tiled_attention(q, k, v, block_q=2, block_k=3, causal=True, framework=framework, progress=stop_at_4)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_final_m_and_l_are_each_rows_max_and_sum_of_exp(framework, shape, causal):
    *dims, bq, bk = shape
    q, k, v = inputs(*dims)
    got = tiled_attention(q, k, v, block_q=bq, block_k=bk, causal=causal, framework=framework)
    scores = oracle(q, k, v, causal)[1]  # (B, H, Lq, Lk), −inf where blocked
    row_max = scores.max(axis=-1)
    row_sum = np.exp(scores - row_max[..., None]).sum(axis=-1)
    n_q, n_k = got.n_blocks
    for i in range(n_q):
        last = got.tile(i, n_k - 1)
        rows = list(last.queries)
        assert_close(last.m_after, row_max[:, :, rows], RTOL_F64, f"m of query block {i}")
        assert_close(last.l_after, row_sum[:, :, rows], RTOL_F64, f"l of query block {i}")
        assert_close(last.output, got.output[:, :, rows], 0.0, f"output so far of query block {i}")


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_each_tile_rescales_by_exp_of_the_max_it_raised(framework, shape, causal):
    """l_after = exp(m_before − m_after)·l_before + Σ exp(scores − m_after), recomputed from the tile's own
    record; m never falls; the tile's scores are the oracle's scores for its queries and keys."""
    *dims, bq, bk = shape
    q, k, v = inputs(*dims)
    got = tiled_attention(q, k, v, block_q=bq, block_k=bk, causal=causal, framework=framework)
    scores = oracle(q, k, v, causal)[1]
    for tile in got.tiles:
        assert np.all(tile.m_after >= tile.m_before)
        if tile.skipped:
            assert tile.scores is None
            assert np.array_equal(tile.m_after, tile.m_before) and np.array_equal(tile.l_after, tile.l_before)
            continue
        expected = scores[:, :, tile.queries.start : tile.queries.stop, tile.keys.start : tile.keys.stop]
        assert np.array_equal(np.isinf(tile.scores), np.isinf(expected))
        finite = np.isfinite(expected)
        assert_close(tile.scores[finite], expected[finite], RTOL_F64, "score tile")
        summed = np.exp(tile.scores - tile.m_after[..., None]).sum(axis=-1)
        rescale = np.exp(tile.m_before - tile.m_after)
        assert_close(tile.l_after, rescale * tile.l_before + summed, RTOL_F64, "l update")


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_tiles_cover_every_pair_once_and_skip_exactly_those_above_the_diagonal(shape, causal):
    B, H, Lq, Lk, Dk, Dv, bq, bk = shape
    got = tiled_attention(*inputs(B, H, Lq, Lk, Dk, Dv), block_q=bq, block_k=bk, causal=causal)
    allowed = masks.causal(Lq, Lk) if causal else np.ones((Lq, Lk), bool)
    covered = np.zeros((Lq, Lk), int)
    for tile in got.tiles:
        covered[tile.queries.start : tile.queries.stop, tile.keys.start : tile.keys.stop] += 1
        cell = allowed[tile.queries.start : tile.queries.stop, tile.keys.start : tile.keys.stop]
        assert tile.skipped == (not cell.any()), (tile.q_block, tile.k_block)
        assert len(tile.queries) <= bq and len(tile.keys) <= bk
    assert np.all(covered == 1)
    assert len(got.tiles) == -(-Lq // bq) * -(-Lk // bk)


def test_a_causal_square_in_2_x_2_blocks_skips_the_top_right_tile_only():
    got = tiled_attention(*inputs(1, 1, 8, 8, 2, 2), block_q=4, block_k=4, causal=True)
    assert [(t.q_block, t.k_block) for t in got.tiles if t.skipped] == [(0, 1)]


@requires("torch", "tensorflow")
def test_both_frameworks_record_the_same_tiles():
    q, k, v = inputs(2, 2, 9, 12, 4, 5)
    pt, tf = (tiled_attention(q, k, v, block_q=4, block_k=5, causal=True, framework=fw) for fw in FRAMEWORKS)
    assert [(t.q_block, t.k_block, t.skipped) for t in pt.tiles] == [
        (t.q_block, t.k_block, t.skipped) for t in tf.tiles
    ]
    for a, b in zip(pt.tiles, tf.tiles, strict=True):
        assert_close(a.m_after, b.m_after, RTOL_F64, "m")
        assert_close(a.l_after, b.l_after, RTOL_F64, "l")
        assert_close(a.output, b.output, RTOL_F64, "output so far")


def test_float32_inputs_compute_in_float32(framework):
    q, k, v = inputs(1, 2, 10, 10, 8, 8, dtype=np.float32)
    got = tiled_attention(q, k, v, block_q=3, block_k=4, causal=True, framework=framework)
    assert got.output.dtype == np.float32 and got.tiles[0].m_after.dtype == np.float32
    assert got.memory.full == 1 * 2 * 10 * 10 * 4
    assert_close(got.output, oracle(q, k, v, True)[0], RTOL_F32, "float32 output")


def test_memory_counts_the_tiles_held_and_does_not_grow_with_length():
    B, H, Dk, Dv, bq, bk = 1, 2, 4, 3, 4, 8
    short, long = (
        tiled_attention(*inputs(B, H, n, n, Dk, Dv), block_q=bq, block_k=bk).memory for n in (32, 64)
    )
    held = bq * Dk + bk * Dk + bk * Dv + bq * bk + bq * Dv + 2 * bq
    assert short.tiled == long.tiled == B * H * held * 8 == sum(short.parts.values())
    assert (short.full, long.full) == (B * H * 32 * 32 * 8, B * H * 64 * 64 * 8)
    assert long.ratio == 4 * short.ratio
    clipped = tiled_attention(*inputs(B, H, 3, 5, Dk, Dv), block_q=bq, block_k=bk).memory
    assert clipped.parts["score tile (bq × bk)"] == B * H * 3 * 5 * 8  # a block longer than L holds L


@pytest.mark.parametrize("field", ["block_q", "block_k"])
@pytest.mark.parametrize("bad", [0, -2, 2.5, 4.0, "4", True, None], ids=repr)
def test_a_block_size_that_is_not_an_integer_at_least_1_is_refused_by_name(field, bad):
    blocks = {"block_q": 2, "block_k": 2, field: bad}
    with pytest.raises(SpecError) as caught:
        tiled_attention(*inputs(1, 1, 4, 4, 2, 2), **blocks)
    assert caught.value.field == field and caught.value.value is bad
    assert field in str(caught.value) and "integer ≥ 1" in str(caught.value)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"q": np.zeros((4, 2))}, "q"),
        ({"k": np.zeros((1, 1, 4, 3))}, "k"),
        ({"v": np.zeros((1, 1, 5, 2))}, "v"),
        ({"q": np.zeros((1, 1, 4, 2), np.int64)}, "q"),
        ({"k": np.zeros((1, 1, 4, 2), np.float32)}, "k"),
        ({"causal": "yes"}, "causal"),
        ({"framework": "jax"}, "framework"),
    ],
    ids=["q-2d", "k-width", "v-length", "int", "mixed-dtype", "causal", "framework"],
)
def test_bad_inputs_are_refused_by_name(change, field):
    q, k, v = inputs(1, 1, 4, 4, 2, 2)
    args = {"q": q, "k": k, "v": v, "block_q": 2, "block_k": 2, **change}
    with pytest.raises(SpecError) as caught:
        tiled_attention(**args)
    assert caught.value.field == field


def test_every_framework_has_its_twin_with_the_same_names():
    assert set(TWINS) == set(FRAMEWORKS)


# -- Reading a pass step by step (attnviz.kernels.replay) and the KV cache's size -------------------


def test_status_marks_each_cell_once_held_dropped_skipped_or_masked():
    got = tiled_attention(*inputs(1, 1, 7, 7, 2, 2), block_q=3, block_k=2, causal=True)
    for step, tile in enumerate(got.tiles):
        grid = replay.status(got, step)
        allowed = masks.causal(7)
        held = grid[tile.queries.start : tile.queries.stop, tile.keys.start : tile.keys.stop]
        if not tile.skipped:
            assert set(np.unique(held)) <= {replay.CURRENT, replay.MASKED}
        assert np.all(grid[allowed] != replay.MASKED) and np.all(grid[allowed] != replay.SKIPPED)
        assert np.all(np.isin(grid[~allowed], (replay.MASKED, replay.SKIPPED, replay.TODO)))
        assert (grid == replay.CURRENT).sum() == (0 if tile.skipped else (held == replay.CURRENT).sum())
    assert not np.any(replay.status(got, len(got.tiles) - 1) == replay.TODO)


def test_distance_to_the_full_softmax_ends_at_rounding_for_every_query_block(framework):
    q, k, v = inputs(1, 2, 9, 9, 4, 4)
    got = tiled_attention(q, k, v, block_q=4, block_k=3, causal=True, framework=framework)
    full = oracle(q, k, v, True)[0]
    distance = replay.distance(got, full)
    for i in range(got.n_blocks[0]):
        steps = [n for n, t in enumerate(got.tiles) if t.q_block == i]
        assert replay.block_steps(got, steps[-1]) == steps
        rows = len(got.tiles[steps[-1]].queries)
        assert np.nanmax(distance[steps[-1], :rows]) <= RTOL_F64
    assert np.nanmax(distance) > 1e-3  # before its last key block a row is really elsewhere


@pytest.mark.parametrize(
    ("heads", "kv_heads", "layout"), [(9, 3, "GQA"), (12, 12, "MHA"), (8, 1, "MQA")], ids=str
)
def test_kv_cache_bytes_from_the_config(heads, kv_heads, layout):
    config = SimpleNamespace(num_hidden_layers=30, num_attention_heads=heads, num_key_value_heads=kv_heads,
                             head_dim=64)  # fmt: skip
    size = kv_cache_size(config)
    assert size.layout == layout
    assert size.per_token == 2 * 30 * kv_heads * 64 * 4  # K and V, every layer, one row per K/V head
    assert size.per_token_mha == 2 * 30 * heads * 64 * 4
    assert size.at(4096) == 4096 * size.per_token and size.at(4096, mha=True) == 4096 * size.per_token_mha
    assert kv_cache_size(config, itemsize=2).per_token * 2 == size.per_token


def test_kv_cache_of_a_config_without_grouped_heads_is_mha():
    config = SimpleNamespace(num_hidden_layers=2, num_attention_heads=4, head_dim=8)  # GPT-2's fields
    assert kv_cache_size(config).layout == "MHA" and kv_cache_size(config).per_token == 2 * 2 * 4 * 8 * 4


def test_importing_kernels_imports_no_framework_and_a_missing_one_is_named_with_its_install():
    script = (
        "import sys; from tests.blocking import block; block('tensorflow')\n"
        "import numpy as np, attnviz.kernels as K\n"
        "assert 'torch' not in sys.modules and sys.modules.get('tensorflow') is None\n"
        "x = np.zeros((1, 1, 2, 2))\n"
        "try:\n"
        "    K.tiled_attention(x, x, x, block_q=1, block_k=1, framework='tensorflow')\n"
        "except ValueError as e:\n"
        "    print(e.field, 'pip install' in str(e))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parents[2])  # fmt: skip
    assert done.stdout.split() == ["framework", "True"], done.stderr[-2000:]
