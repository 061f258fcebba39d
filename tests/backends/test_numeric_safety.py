"""Issue 10 §2: finite, accepted input never gives NaN; bad arguments name themselves.

Each case gave NaN weights or a foreign message on the first version.
"""

import numpy as np
import pytest

from attnviz import AttentionSpec, init_params, make_inputs, run_attention
from attnviz.errors import BudgetError, SpecError
from tests.conftest import requires


def _outcome(spec, framework, **kwargs):
    """Either a finite result or a SpecError naming a field — never NaN."""
    try:
        result = run_attention(spec, framework, **kwargs)
    except SpecError as error:
        return error
    assert np.isfinite(result.output).all() and np.isfinite(result.weights).all()
    return result


@pytest.mark.parametrize(
    ("dtype", "value"), [("float32", 1e300), ("float32", 1e20), ("float64", 1e300), ("float64", 1e160)]
)
def test_huge_finite_inputs_are_refused_not_nan(framework, dtype, value):
    spec = AttentionSpec(len_q=4, d_model=8, n_heads=2, dtype=dtype)
    x = np.full((1, 4, 8), value)
    error = _outcome(spec, framework, x_q=x)
    assert isinstance(error, SpecError) and error.field == "x_q", error
    assert dtype in str(error)


def test_large_but_safe_inputs_still_run(framework):
    spec = AttentionSpec(len_q=4, d_model=8, n_heads=2, dtype="float32")
    x = make_inputs(spec)[0] * 1e3
    result = _outcome(spec, framework, x_q=x)
    assert not isinstance(result, Exception)
    np.testing.assert_allclose(result.weights.sum(-1), 1, atol=1e-5)


@pytest.mark.parametrize(("dtype", "scale"), [("float32", 1e39), ("float32", 1e20), ("float64", 1e308)])
def test_scale_beyond_the_dtype_range_is_refused_by_the_spec(dtype, scale):
    with pytest.raises(SpecError, match=f"for {dtype}") as info:
        AttentionSpec(dtype=dtype, scale=scale)
    assert info.value.field == "scale"


def test_large_scale_within_range_gives_finite_weights(framework):
    spec = AttentionSpec(len_q=4, d_model=8, n_heads=2, dtype="float32", scale=1e15)
    outcome = _outcome(spec, framework)
    if isinstance(outcome, SpecError):  # refused for overflowing products: also fine, never NaN
        assert outcome.field == "x_q"


def test_complex_input_is_refused_naming_it(framework):
    spec = AttentionSpec(len_q=4, d_model=8, n_heads=2)
    x = make_inputs(spec)[0] + 1j
    with pytest.raises(SpecError, match="x_q: got an array of dtype complex") as info:
        run_attention(spec, framework, x_q=x)
    assert info.value.field == "x_q"


@requires("torch")
def test_ragged_input_names_x_q():
    spec = AttentionSpec(batch=1, len_q=2, d_model=2, n_heads=1)
    with pytest.raises(SpecError, match="x_q: got a ragged sequence"):
        run_attention(spec, "torch", x_q=[[[1.0, 2.0], [3.0]]])


@requires("torch")
def test_complex_parameters_are_refused_naming_them():
    spec = AttentionSpec(len_q=4, d_model=8, n_heads=2)
    params = init_params(spec)
    params["W_q"] = params["W_q"] + 0j
    with pytest.raises(SpecError, match=r"params\['W_q'\]: got an array of dtype complex"):
        run_attention(spec, "torch", params=params)


@pytest.mark.parametrize("value", [{3: 1}, {"a": 2}, "3", [[1, 2]]])
def test_valid_kv_len_of_the_wrong_kind_is_refused(value):
    with pytest.raises(SpecError) as info:
        AttentionSpec(len_q=4, mask="padding", valid_kv_len=value)
    assert info.value.field == "valid_kv_len"


@pytest.mark.parametrize("budget", [float("nan"), None, -1, 0, "1GB", True])
@requires("torch")
def test_memory_budget_must_be_a_positive_number(budget):
    with pytest.raises(SpecError) as info:
        run_attention(AttentionSpec(), "torch", memory_budget=budget)
    assert info.value.field == "memory_budget"


@requires("torch")
def test_budget_message_uses_a_unit_that_shows_the_numbers():
    with pytest.raises(BudgetError) as info:
        run_attention(AttentionSpec(len_q=64), "torch", memory_budget=100)
    message = str(info.value)
    assert "0 MiB" not in message
    assert "100 B" in message and "KiB" in message
    assert info.value.need > info.value.budget == 100


@requires("torch")
def test_infinite_budget_means_no_limit():
    assert run_attention(AttentionSpec(), "torch", memory_budget=float("inf")).output.shape == (1, 8, 32)


def test_residual_norm_overflow_is_refused_not_nan(framework):
    spec = AttentionSpec(len_q=4, d_model=8, n_heads=2, dtype="float32", residual_norm=True)
    x = make_inputs(spec)[0] * 1e18  # fine for the scores' scale? LayerNorm squares ~1e37+: overflow
    outcome = _outcome(spec, framework, x_q=x)
    assert isinstance(outcome, SpecError) and outcome.field == "x_q"
