"""Both backends against the float64 NumPy reference, at every captured step."""

import numpy as np
import pytest

from attnviz import AttentionSpec, expected_steps, init_params, make_inputs, run_attention
from attnviz.reference import multi_head_attention
from tests.conftest import RTOL_F64, assert_close, gpu_params, requires, skip_without_gpu

RNG = np.random.default_rng(7)
SPECS = {
    "self-default": AttentionSpec(dtype="float64"),
    "self-causal-bias-off": AttentionSpec(dtype="float64", mask="causal", bias=False, n_heads=2),
    "dk!=dv": AttentionSpec(dtype="float64", d_model=24, n_heads=3, d_k=5, d_v=11),
    "cross-padding": AttentionSpec(
        dtype="float64",
        mode="cross",
        batch=3,
        len_q=4,
        len_kv=6,
        d_kv_in=10,
        mask="padding",
        valid_kv_len=(6, 2, 0),
    ),
    "cross-custom-3d": AttentionSpec(
        dtype="float64",
        mode="cross",
        batch=2,
        len_q=5,
        len_kv=3,
        n_heads=8,
        mask="custom",
        custom_mask=RNG.random((2, 5, 3)) < 0.6,
    ),
    "residual-norm-scale": AttentionSpec(dtype="float64", residual_norm=True, scale=0.05, n_heads=1),
    "training-no-dropout": AttentionSpec(dtype="float64", training=True, dropout=0.0),
    "gqa-rope-window": AttentionSpec(
        dtype="float64", len_q=9, n_heads=4, n_kv_heads=2, rope_base=10000.0, mask="causal", window=4
    ),
    "mqa-cross-rope": AttentionSpec(
        dtype="float64", mode="cross", len_q=5, len_kv=7, d_kv_in=6, n_heads=8, n_kv_heads=1, rope_base=50.0
    ),
}


@pytest.mark.parametrize("device", gpu_params())
@pytest.mark.parametrize("name", list(SPECS))
def test_every_step_matches_reference_float64(framework, device, name):
    skip_without_gpu(framework, device)
    spec = SPECS[name]
    params, (x_q, x_kv) = init_params(spec), make_inputs(spec)
    ref = multi_head_attention(spec, params, x_q, x_kv)
    result = run_attention(spec, framework, device)
    assert [s.name for s in result.steps] == expected_steps(spec) == list(ref)
    for step in result.steps:
        assert step.value.dtype == np.float64 and step.shape == ref[step.name].shape
        finite = np.isfinite(ref[step.name])
        assert (np.isfinite(step.value) == finite).all(), step.name  # -inf exactly where blocked
        assert_close(step.value[finite], ref[step.name][finite], RTOL_F64, f"{framework} {step.name}")
        assert step.code.strip()
    final = ref["residual_norm" if spec.residual_norm else "output_proj"]
    assert_close(result.output, final, RTOL_F64, "output")
    assert_close(result.weights, ref["softmax"], RTOL_F64, "weights")


@requires("torch", "tensorflow")
def test_step_names_and_shapes_are_the_same_in_both_frameworks():
    spec = AttentionSpec(mode="cross", len_q=3, len_kv=5, d_k=6, d_v=2, mask="padding", valid_kv_len=4)
    a, b = run_attention(spec, "torch"), run_attention(spec, "tensorflow")
    assert [(s.name, s.shape) for s in a.steps] == [(s.name, s.shape) for s in b.steps]
    shapes = {s.name: s.shape for s in a.steps}
    assert shapes["q_proj"] == (1, 3, 24) and shapes["v_proj"] == (1, 5, 8)
    assert shapes["k_heads"] == (1, 4, 5, 6) and shapes["masked"] == (1, 4, 3, 5)
    assert shapes["context"] == (1, 4, 3, 2) and shapes["merged"] == (1, 3, 8)
    assert shapes["output_proj"] == (1, 3, 32)
    for sa, sb in zip(a.steps, b.steps, strict=True):  # each framework shows its own code
        assert "tf." not in sa.code and "torch." not in sb.code, sa.name
    assert a.step("scores").code != b.step("scores").code


@pytest.mark.parametrize("device", gpu_params())
@pytest.mark.parametrize("name", ["self-default", "gqa-rope-window", "mqa-cross-rope"])
def test_fast_path_gives_the_captured_numbers(framework, device, name):
    """`capture=False` (PyTorch: in place, one grid) returns what the recorded textbook path returns."""
    skip_without_gpu(framework, device)
    spec = SPECS[name]
    slow, fast = run_attention(spec, framework, device), run_attention(spec, framework, device, capture=False)
    assert fast.steps == [] and slow.steps
    assert_close(fast.output, slow.output, RTOL_F64, "output")
    assert_close(fast.weights, slow.weights, RTOL_F64, "weights")
