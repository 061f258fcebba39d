"""Each step's code is the backend's own source, and running it reproduces the step it is shown for."""

import numpy as np
import pytest

from attnviz import AttentionSpec, expected_steps, masks, run_attention
from attnviz.frameworks import backend, step_code
from tests.conftest import RTOL_F64, assert_close

FULL = AttentionSpec(
    len_q=4, d_model=8, n_heads=2, mask="causal", dropout=0.5, training=True, residual_norm=True
)
MODERN = AttentionSpec(
    len_q=6, d_model=16, n_heads=4, n_kv_heads=2, rope_base=100.0, mask="causal", window=3, dtype="float64"
)
# What each step's code reads, taken from the run's earlier steps (the name in the code → the step).
INPUTS = {
    "q_rope": {"q": "q_heads"},
    "k_rope": {"k": "k_heads"},
    "k_repeated": {"k": "k_rope"},
    "v_repeated": {"v": "v_heads"},
    "scores": {"q": "q_rope", "k": "k_repeated"},
    "scaled": {"scores": "scores"},
    "masked": {"logits": "scaled"},
    "context": {"attended": "softmax", "v": "v_repeated"},
}


@pytest.mark.parametrize("spec", [FULL, MODERN], ids=["classic", "modern"])
def test_every_recorded_step_has_its_code(framework, spec):
    code = step_code(framework)
    result = run_attention(spec, framework)
    assert [s.name for s in result.steps] == expected_steps(spec)
    for s in result.steps:
        assert s.code == code[s.name] and s.code.strip(), s.name


@pytest.mark.parametrize("name", list(INPUTS))
def test_running_a_steps_code_reproduces_the_step(framework, name):
    """The shown lines, executed in the backend module on the earlier steps' values, give the step's value."""
    be = backend(framework)
    result = run_attention(MODERN, framework)
    H, Hkv, Dk = MODERN.n_heads, MODERN.n_kv_heads, MODERN.d_k
    mask = be.to_tensor(masks.from_spec(MODERN)[:, None], be.resolve_device("cpu"))
    local = {
        "self": type("Layer", (), {"rope_base": MODERN.rope_base}),
        "H": H,
        "Hkv": Hkv,
        "Dk": Dk,
        "start": 0,  # a full pass: positions from 0
        "scale": MODERN.head_scale,
        "mask": mask,
    }
    for variable, step in INPUTS[name].items():
        local[variable] = be.to_tensor(result.step(step).value, be.resolve_device("cpu"))
    exec(result.step(name).code, vars(be.attention).copy(), local)
    variable = result.step(name).code.splitlines()[-1].split("=")[0].strip()
    produced = be.to_numpy(local[variable])
    expected = result.step(name).value
    finite = np.isfinite(expected)
    assert (np.isfinite(produced) == finite).all()
    assert_close(produced[finite], expected[finite], RTOL_F64, f"{framework} {name}")


def test_step_code_reads_like_the_textbook(framework):
    """No speed tricks in what learners read: no in-place ops, no `out=`, no branch on a flag."""
    for name, lines in step_code(framework).items():
        for trick in ("in_place", "_(", "out=", " if "):
            assert trick not in lines, (framework, name, trick)
