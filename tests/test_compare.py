"""compare_frameworks: step-by-step differences, the verdict, and the timings."""

import numpy as np

from attnviz import AttentionSpec, expected_steps
from attnviz.compare import TOLERANCE, compare_frameworks, differences, weight_differences
from tests.conftest import requires


@requires("torch", "tensorflow")
def test_frameworks_agree_step_by_step():
    spec = AttentionSpec(mode="cross", len_q=5, len_kv=7, d_kv_in=12, mask="padding", valid_kv_len=4)
    c = compare_frameworks(spec, timing_repeats=3)
    assert [r["step"] for r in c.rows] == expected_steps(spec)
    assert c.agree and c.comparable and c.tolerance == TOLERANCE["float32"]
    assert all(r["rel"] <= 1e-5 and r["max_abs"] < 1e-4 for r in c.rows)
    assert set(c.median_s) == {"torch", "tensorflow"} and all(t > 0 for t in c.median_s.values())
    diff = weight_differences(c)
    assert diff.shape == (4, 5, 7) and diff.max() < 1e-6


@requires("torch", "tensorflow")
def test_dropout_in_training_is_flagged_not_compared():
    c = compare_frameworks(AttentionSpec(dropout=0.5, training=True), timing_repeats=1)
    assert not c.comparable and c.agree  # the steps before dropout still agree


def test_differences_treat_blocked_cells_as_equal_only_when_both_blocked():
    a = np.array([[1.0, -np.inf], [0.5, 0.25]])
    assert differences(a, a.copy()) == {"max_abs": 0.0, "rel": 0.0}
    b = a.copy()
    b[0, 1] = 0.0
    assert differences(a, b)["rel"] == float("inf")
