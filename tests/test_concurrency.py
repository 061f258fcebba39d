"""Shared framework objects under concurrent use: each caller gets its own correct result."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from attnviz import AttentionSpec, run_attention


def _jobs(framework):
    specs = [
        AttentionSpec(
            n_heads=h,
            len_q=4 + i,
            seed=i,
            mask=mask,
            valid_kv_len=(2 + i if mask == "padding" else None),
            mode=mode,
            len_kv=(6 + i if mode == "cross" else None),
            training=True,
            dropout=0.25,
        )
        for i, (h, mask, mode) in enumerate(
            [
                (h, mask, mode)
                for h in (1, 2, 4, 8)
                for mask in ("none", "padding")
                for mode in ("self", "cross")
            ]
        )
    ]
    return [(spec, framework) for spec in specs]


def test_concurrent_runs_match_single_threaded(framework):
    jobs = _jobs(framework) * 3  # each spec several times, interleaved across threads
    expected = {spec: run_attention(spec, framework) for spec, _ in _jobs(framework)}  # one thread
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda job: (job[0], run_attention(*job)), jobs))
    assert len(results) == len(jobs)
    for spec, result in results:
        ref = expected[spec]
        # float32 tolerance: the intra-op thread count (which the app sets) changes summation order
        np.testing.assert_allclose(result.weights, ref.weights, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(
            result.output, ref.output, rtol=1e-5, atol=1e-7
        )  # dropout is seeded per run
        assert [s.name for s in result.steps] == [s.name for s in ref.steps]
