"""Each step's code line is the backend's own source, verbatim (it drifted when it was written twice)."""

import numpy as np
import pytest

from attnviz import AttentionSpec, expected_steps, run_attention
from attnviz.code import source_path, step_code

FULL = AttentionSpec(
    len_q=4, d_model=8, n_heads=2, mask="causal", dropout=0.5, training=True, residual_norm=True
)


@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
def test_every_step_has_code_that_is_verbatim_source(framework):
    source = source_path(framework).read_text()
    code = step_code(framework)
    assert set(code) == set(expected_steps(FULL))
    for step, lines in code.items():
        assert lines.strip(), step
        for line in lines.splitlines():
            assert line.strip() in source, (step, line)


def test_recorded_steps_carry_that_code(framework):
    result = run_attention(FULL, framework)
    assert [s.name for s in result.steps] == expected_steps(FULL)
    for s in result.steps:
        assert s.code == step_code(framework)[s.name]
    assert "softmax" in result.step("softmax").code
    assert np.isfinite(result.output).all()
