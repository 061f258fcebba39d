"""AttentionSpec: defaults, derived widths, and a clear ValueError for every bad field."""

import dataclasses
import math

import numpy as np
import pytest

from attnviz import AttentionSpec


def test_defaults_resolve_to_ints():
    spec = AttentionSpec()
    assert (spec.len_kv, spec.d_k, spec.d_v, spec.d_kv_in) == (8, 8, 8, 32)
    assert spec.head_scale == pytest.approx(1 / math.sqrt(8))


def test_explicit_widths_are_kept():
    spec = AttentionSpec(d_model=30, n_heads=4, d_k=5, d_v=7, mode="cross", len_kv=3, d_kv_in=9)
    assert (spec.d_k, spec.d_v, spec.len_kv, spec.d_kv_in) == (5, 7, 3, 9)


def test_replace_rederives_what_was_derived():
    spec = AttentionSpec(d_model=32, n_heads=4)
    assert spec.replace(n_heads=8).d_k == 4
    assert spec.replace(len_q=5).len_kv == 5
    assert AttentionSpec(d_k=3).replace(n_heads=8).d_k == 3  # explicit stays explicit


def test_frozen_and_hashable_with_custom_mask():
    mask = np.tril(np.ones((4, 4), bool))
    a = AttentionSpec(len_q=4, mask="custom", custom_mask=mask)
    b = AttentionSpec(len_q=4, mask="custom", custom_mask=mask.copy())
    c = AttentionSpec(len_q=4, mask="custom", custom_mask=~mask | np.eye(4, dtype=bool))
    assert a == b and hash(a) == hash(b) and a != c
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.n_heads = 2
    mask[0, 1] = True  # the spec holds its own copy
    assert not a.custom_mask[0, 1]
    assert not a.custom_mask.flags.writeable


def test_padding_int_broadcasts_over_batch():
    assert AttentionSpec(batch=3, mask="padding", valid_kv_len=5).valid_kv_len == (5, 5, 5)


def test_custom_mask_accepts_0_1_ints():
    spec = AttentionSpec(len_q=2, mask="custom", custom_mask=[[1, 0], [1, 1]])
    assert spec.custom_mask.dtype == bool


BAD = [
    ({"batch": 0}, "batch", "positive integer"),
    ({"len_q": -3}, "len_q", "positive integer"),
    ({"len_q": 2.5}, "len_q", "positive integer"),
    ({"d_model": True}, "d_model", "positive integer"),
    ({"n_heads": 0}, "n_heads", "positive integer"),
    ({"mode": "cross", "len_kv": 0}, "len_kv", "positive integer"),
    ({"d_k": 0}, "d_k", "positive integer"),
    ({"d_v": -1}, "d_v", "positive integer"),
    ({"mode": "cross", "d_kv_in": 0}, "d_kv_in", "positive integer"),
    ({"d_model": 30, "n_heads": 4}, "n_heads", "divisor of d_model=30"),
    ({"mode": "both"}, "mode", "'self' | 'cross'"),
    ({"mask": "triangle"}, "mask", "'none' | 'causal' | 'padding' | 'custom'"),
    ({"dtype": "float16"}, "dtype", "'float32' | 'float64'"),
    ({"len_kv": 4}, "len_kv", "use mode='cross'"),
    ({"d_kv_in": 16}, "d_kv_in", "use mode='cross'"),
    ({"mode": "cross", "len_kv": 5, "mask": "causal"}, "mask", "len_q == len_kv"),
    ({"mask": "padding"}, "valid_kv_len", "when mask='padding'"),
    ({"mask": "padding", "valid_kv_len": 9}, "valid_kv_len", "[0, len_kv=8]"),
    ({"mask": "padding", "valid_kv_len": -1}, "valid_kv_len", "[0, len_kv=8]"),
    ({"batch": 2, "mask": "padding", "valid_kv_len": [3]}, "valid_kv_len", "sequence of 2"),
    ({"mask": "padding", "valid_kv_len": "3"}, "valid_kv_len", "an int"),
    ({"valid_kv_len": 3}, "valid_kv_len", "None unless mask='padding'"),
    ({"mask": "custom"}, "custom_mask", "when mask='custom'"),
    ({"mask": "custom", "custom_mask": np.ones((3, 3), bool)}, "custom_mask", "shape (8, 8)"),
    ({"mask": "custom", "custom_mask": np.full((8, 8), 0.5)}, "custom_mask", "boolean array"),
    ({"custom_mask": np.ones((8, 8), bool)}, "custom_mask", "None unless mask='custom'"),
    ({"dropout": 1.0}, "dropout", "[0, 1)"),
    ({"dropout": -0.1}, "dropout", "[0, 1)"),
    ({"dropout": "0.1"}, "dropout", "[0, 1)"),
    ({"scale": 0.0}, "scale", "a number in (0, "),
    ({"scale": -1.0}, "scale", "a number in (0, "),
    ({"scale": float("nan")}, "scale", "a number in (0, "),
    ({"scale": float("inf")}, "scale", "a number in (0, "),
    ({"bias": "yes"}, "bias", "True or False"),
    ({"training": 1}, "training", "True or False"),
    ({"residual_norm": None}, "residual_norm", "True or False"),
    ({"seed": -1}, "seed", "[0, 2**31)"),
]


@pytest.mark.parametrize(("kwargs", "field", "allowed"), BAD, ids=[str(b[0])[:40] for b in BAD])
def test_invalid_field_names_field_value_and_allowed(kwargs, field, allowed):
    with pytest.raises(ValueError) as info:
        AttentionSpec(**kwargs)
    message = str(info.value)
    assert f"AttentionSpec.{field}:" in message
    assert "got " in message and "allowed:" in message
    assert allowed in message
