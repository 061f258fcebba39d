"""Fuzzing: random field values, valid and invalid, through run_attention in both frameworks.

Every attempt either returns finite results whose weight rows sum to 1 (0 for rows with no
allowed key) or raises ValueError / TypeError with a message — nothing else, no NaN, no hang.
"""

import math
import os

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from attnviz import AttentionSpec, run_attention
from attnviz.frameworks import is_installed

JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=5),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**12), 10**12),
    st.lists(st.integers(-3, 3), max_size=3),
    st.just(np.array([[1, 0]])),
)
BAD_SIZE = st.one_of(st.integers(-2, 0), st.sampled_from([10**6, 10**9, 2**40]), JUNK)
SIZE = st.integers(1, 6)
OPTIONAL_SIZE = st.one_of(st.none(), SIZE)
MASKS = st.integers(1, 6).flatmap(
    lambda n: st.lists(st.lists(st.booleans(), min_size=n, max_size=n), min_size=1, max_size=6)
)
# Field → (valid values, invalid values). Valid values can still combine into an invalid spec.
FIELDS = {
    "batch": (SIZE, BAD_SIZE),
    "len_q": (SIZE, BAD_SIZE),
    "len_kv": (OPTIONAL_SIZE, BAD_SIZE),
    "d_model": (st.sampled_from([4, 8, 12]), BAD_SIZE),
    "n_heads": (st.integers(1, 4), BAD_SIZE),
    "d_k": (OPTIONAL_SIZE, BAD_SIZE),
    "d_v": (OPTIONAL_SIZE, BAD_SIZE),
    "mode": (st.sampled_from(["self", "cross"]), JUNK),
    "d_kv_in": (OPTIONAL_SIZE, BAD_SIZE),
    "mask": (st.sampled_from(["none", "causal", "padding", "custom"]), JUNK),
    "valid_kv_len": (
        st.one_of(st.none(), st.integers(-1, 7), st.lists(st.integers(-1, 7), max_size=4)),
        JUNK,
    ),
    "custom_mask": (st.one_of(st.none(), MASKS), JUNK),
    "bias": (st.booleans(), JUNK),
    "dropout": (st.sampled_from([0.0, 0.5, 0.99]), JUNK),
    "training": (st.booleans(), JUNK),
    "scale": (st.one_of(st.none(), st.floats(1e-3, 1e3)), JUNK),
    "residual_norm": (st.booleans(), JUNK),
    "dtype": (st.sampled_from(["float32", "float64"]), JUNK),
    "seed": (st.integers(0, 100), JUNK),
    "n_kv_heads": (OPTIONAL_SIZE, BAD_SIZE),
    "rope_base": (st.one_of(st.none(), st.sampled_from([10.0, 1e4, 5e5])), JUNK),
    "window": (OPTIONAL_SIZE, BAD_SIZE),
}


@st.composite
def spec_kwargs(draw) -> dict:
    """Some fields with valid values; a third of the time one field gets an invalid one."""
    kwargs = draw(st.fixed_dictionaries({}, optional={k: valid for k, (valid, _) in FIELDS.items()}))
    if draw(st.integers(0, 2)) == 0:
        field = draw(st.sampled_from(list(FIELDS)))
        kwargs[field] = draw(FIELDS[field][1])
    return kwargs


FRAMEWORKS = [fw for fw in ("torch", "tensorflow") if is_installed(fw)]


def _check(result) -> None:
    w = result.weights
    assert np.isfinite(w).all() and np.isfinite(result.output).all()
    assert ((w >= 0) & (w <= 1)).all()
    expected = np.where(result.empty_rows, 0.0, 1.0)[:, None, :]
    np.testing.assert_allclose(w.sum(-1), np.broadcast_to(expected, w.shape[:-1]), atol=1e-5)
    for step in result.steps:
        assert not np.isnan(step.value).any(), step.name


@pytest.mark.timeout(600)
@settings(max_examples=int(os.environ.get("ATTNVIZ_FUZZ_EXAMPLES", "200")), deadline=None)
@given(kwargs=spec_kwargs(), framework=st.sampled_from(FRAMEWORKS))
def test_any_values_give_a_result_or_a_clear_error(kwargs, framework):
    try:
        spec = AttentionSpec(**kwargs)
        result = run_attention(spec, framework)
    except (ValueError, TypeError) as error:
        message = str(error)
        assert len(message) > 20 and ("got" in message or "allowed" in message), message
        event(f"refused: {message.split(':')[0]}")
        return
    event("ran")
    _check(result)


def test_far_over_budget_is_refused_in_well_under_a_second():
    import time

    spec = AttentionSpec(batch=8, n_heads=64, d_model=64, len_q=200_000)
    start = time.perf_counter()
    for framework in FRAMEWORKS:
        with pytest.raises(ValueError, match="memory budget"):
            run_attention(spec, framework)
    assert time.perf_counter() - start < 0.5
    assert math.isfinite(spec.head_scale)
