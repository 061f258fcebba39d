"""Heavy doors within their budgets (issue 26 §1): the logit lens read chunk by chunk equals the whole
lens; each door's estimate is checked before running; at the largest input each door accepts,
SmolLM2-135M's measured peak stays within the per-run budget.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys

import numpy as np
import pytest

from attnviz import formats, pretrained
from attnviz.errors import BudgetError
from attnviz.exec.monitor import Monitor, Stop
from attnviz.interp import lens, roles
from attnviz.pretrained import budget
from attnviz.settings import APP_MEMORY_BUDGET
from tests.conftest import ATOL_F64, RTOL_F32
from tests.live import ROOT
from tests.pretrained.test_gpt2 import make_tiny_gpt2

TEXT = "The cat sat on the mat. The dog sat on the log."


@pytest.fixture(scope="module")
def gpt(tmp_path_factory):
    return pretrained.load(make_tiny_gpt2(tmp_path_factory.mktemp("tiny-gpt2"), seed=5))


@pytest.mark.parametrize("chunk_bytes", [1, 10**9], ids=["one-position-chunks", "one-chunk"])
def test_lens_read_chunk_by_chunk_equals_the_whole_lens(gpt, framework, chunk_bytes, monkeypatch):
    monkeypatch.setattr(budget, "LENS_CHUNK_BYTES", chunk_bytes)
    out = gpt.run(TEXT, framework)
    whole = lens.top_tokens(gpt, gpt.logit_lens(out), 5)  # the (L + 1, T, V) array, then the top 5
    seen = []
    read = lens.read(gpt, out, 5, monitor=Monitor(lambda done, total, _: seen.append((done, total))))
    np.testing.assert_array_equal(read.ids, whole.ids)
    np.testing.assert_allclose(read.probs, whole.probs, rtol=RTOL_F32, atol=ATOL_F64)
    np.testing.assert_array_equal(read.labels, whole.labels)
    rows = gpt.config.num_hidden_layers + 1
    assert seen == [(i, rows) for i in range(1, rows + 1)]  # once per layer: where a closed tab stops it


def test_lens_stops_where_its_monitor_says(gpt):
    out, seen = gpt.run(TEXT), []
    monitor = Monitor(lambda done, total, _: (seen.append(done), done == 2 and monitor.stop()))
    with pytest.raises(Stop):
        lens.read(gpt, out, 5, monitor=monitor)
    assert seen == [1, 2]  # not one layer past the stop


def test_generation_reports_each_token_and_stops_where_its_monitor_says(gpt):
    seen = []
    whole = gpt.generate(
        TEXT, max_new_tokens=4, temperature=0.0, monitor=Monitor(lambda *a: seen.append(a[:2]))
    )
    assert seen == [(i, 4) for i in range(1, 5)]  # once per token: where a closed tab stops it
    monitor = Monitor(lambda done, total, _: done == 2 and monitor.stop())
    stopped = gpt.generate(TEXT, max_new_tokens=4, temperature=0.0, monitor=monitor)
    assert stopped.ended == "stopped" and stopped.new_ids == whole.new_ids[:2]
    assert len(whole.probabilities) == 4


def test_role_scan_per_sequence_equals_the_stacked_scores(gpt, framework):
    """The scan keeps one sequence's attention at a time; its scores equal those of all N stacked."""
    scan = roles.scan(gpt, framework, half=6, n=3, seed=2)
    stacked = np.stack(
        [gpt.run_ids([int(t) for t in row], framework).attentions for row in scan.ids], axis=2
    ).astype(np.float64)  # (L, H, N, T, T)
    for role, grid in roles.role_scores(stacked).items():
        np.testing.assert_allclose(scan.scores[role], grid, rtol=1e-12, atol=ATOL_F64, err_msg=role)
    np.testing.assert_allclose(scan.attentions, stacked[:, :, 0], rtol=0, atol=0)


def test_check_names_the_estimate_the_budget_and_what_fits(gpt):
    need = functools.partial(budget.lens_bytes, gpt.config)
    small = need(40) - 1  # a budget that 40 tokens just miss
    fits = budget.largest(need, small, 40)
    assert need(fits) <= small < need(fits + 1) and fits == 39
    with pytest.raises(BudgetError) as caught:
        budget.check("The logit lens", need, 40, small)
    message = str(caught.value)
    assert formats.size(need(40)) in message and "at most 39 tokens fit" in message
    assert caught.value.need == need(40) and caught.value.budget == small
    assert budget.check("The logit lens", need, 39, small) == need(39)


def test_each_estimate_grows_with_its_input(gpt):
    cfg = gpt.config
    for need in (
        functools.partial(budget.forward_bytes, cfg),
        functools.partial(budget.lens_bytes, cfg),
        functools.partial(budget.generation_bytes, cfg, new_tokens=20),
        functools.partial(budget.sweep_bytes, cfg),
        functools.partial(budget.importance_bytes, cfg),
        functools.partial(budget.scan_bytes, cfg),
    ):
        sizes = [need(n) for n in (1, 2, 8, 64, 512)]
        assert sizes == sorted(sizes) and sizes[0] < sizes[-1]


@pytest.mark.slow
def test_every_door_at_its_largest_accepted_input_stays_within_the_budget():
    """SmolLM2-135M in a fresh process (tests/door_peaks.py): each door at the largest input its check
    accepts (one more is refused), its measured peak above the loaded model within the per-run budget
    and within its estimate."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.door_peaks"], cwd=ROOT, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(found) == {"lens", "generation", "patching", "importance", "role scan", "toy to real"}
    for door, row in found.items():
        assert row["n"] >= 8, (door, row)  # a useful input fits
        assert row["estimate"] <= APP_MEMORY_BUDGET, (door, row)
        assert row["peak"] <= row["estimate"], (door, row)
