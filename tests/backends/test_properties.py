"""Property tests over random valid specs, both frameworks."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from attnviz import AttentionSpec, expected_steps, masks, run_attention
from attnviz.result import STEP_DOCS
from tests.conftest import assert_close, requires


@st.composite
def specs(draw) -> AttentionSpec:
    batch, n_heads = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    len_q = draw(st.integers(1, 9))
    mode = draw(st.sampled_from(["self", "cross"]))
    len_kv = draw(st.integers(1, 9)) if mode == "cross" else len_q
    mask = draw(st.sampled_from(["none", "padding", "custom"] + (["causal"] if len_q == len_kv else [])))
    extra = {}
    if mask == "padding":
        extra["valid_kv_len"] = tuple(draw(st.lists(st.integers(0, len_kv), min_size=batch, max_size=batch)))
    if mask == "custom":
        shape = draw(st.sampled_from([(len_q, len_kv), (batch, len_q, len_kv)]))
        bits = draw(st.lists(st.booleans(), min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
        extra["custom_mask"] = np.array(bits).reshape(shape)
    if mask == "causal":
        extra["window"] = draw(st.one_of(st.none(), st.integers(1, len_q + 1)))
    extra["n_kv_heads"] = draw(
        st.sampled_from([None] + [d for d in range(1, n_heads + 1) if n_heads % d == 0])
    )
    d_model, d_k = n_heads * draw(st.integers(1, 4)), draw(st.one_of(st.none(), st.integers(1, 6)))
    if (d_model // n_heads if d_k is None else d_k) % 2 == 0:  # RoPE turns pairs
        extra["rope_base"] = draw(st.sampled_from([None, 10.0, 10000.0]))
    return AttentionSpec(
        batch=batch,
        len_q=len_q,
        n_heads=n_heads,
        mode=mode,
        mask=mask,
        **extra,
        len_kv=len_kv if mode == "cross" else None,
        d_model=d_model,
        d_k=d_k,
        d_v=draw(st.one_of(st.none(), st.integers(1, 6))),
        d_kv_in=draw(st.integers(1, 7)) if mode == "cross" else None,
        bias=draw(st.booleans()),
        residual_norm=draw(st.booleans()),
        dropout=draw(st.sampled_from([0.0, 0.3])),
        training=draw(st.booleans()),
        scale=draw(st.one_of(st.none(), st.floats(0.01, 10))),
        seed=draw(st.integers(0, 1000)),
    )


def _dims(spec) -> dict[str, int]:
    return {
        "B": spec.batch,
        "H": spec.n_heads,
        "Hkv": spec.n_kv_heads,
        "Lq": spec.len_q,
        "Lk": spec.len_kv,
        "Dk": spec.d_k,
        "Dv": spec.d_v,
        "D": spec.d_model,
    }


def _documented_shape(name, spec) -> tuple[int, ...]:
    dims = _dims(spec)
    parts = STEP_DOCS[name][1].strip("()").split(", ")
    return tuple(int(np.prod([dims[p] for p in part.split("*")])) for part in parts)


@requires("torch", "tensorflow")
@given(specs())
def test_invariants_hold_and_frameworks_agree(spec):
    results = [run_attention(spec, fw) for fw in ("torch", "tensorflow")]
    blocked = masks.from_spec(spec)
    for r in results:
        w = r.weights
        assert np.isfinite(w).all() and np.isfinite(r.output).all()
        assert ((w >= 0) & (w <= 1)).all()
        expected_sums = np.where(r.empty_rows, 0.0, 1.0)[:, None, :]
        np.testing.assert_allclose(w.sum(-1), np.broadcast_to(expected_sums, w.shape[:-1]), atol=1e-5)
        if blocked is not None:
            assert (w[np.broadcast_to(~blocked[:, None], w.shape)] == 0).all()
        assert [s.name for s in r.steps] == expected_steps(spec)
        for s in r.steps:
            assert s.shape == _documented_shape(s.name, spec), s.name
            assert not np.isnan(s.value).any(), s.name
    torch_r, tf_r = results
    assert_close(tf_r.weights, torch_r.weights, 1e-5, "weights")  # pre-dropout
    if spec.training and spec.dropout > 0:
        return  # each framework draws its own dropout mask
    assert_close(tf_r.output, torch_r.output, 1e-4, "output")
