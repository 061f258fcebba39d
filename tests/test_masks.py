"""Mask builders against element-by-element definitions."""

import itertools

import numpy as np
import pytest

from attnviz import AttentionSpec, masks


@pytest.mark.parametrize(("lq", "lk"), [(1, 1), (4, 4), (3, 6), (6, 3)])
def test_builders_match_their_definitions(lq, lk):
    for i, j in itertools.product(range(lq), range(lk)):
        assert masks.causal(lq, lk)[i, j] == (j <= i)
        assert masks.sliding_window(lq, lk, 2)[i, j] == (0 <= i - j < 2)
        assert masks.sliding_window(lq, lk, 2, causal_only=False)[i, j] == (abs(i - j) < 2)
        assert masks.strided(lq, lk, 3)[i, j] == ((i - j) % 3 == 0)
        assert masks.block_diagonal(lq, lk, 2)[i, j] == (i // 2 == j // 2)


def test_padding_per_batch_item():
    mask = masks.padding((2, 0, 3), 2, 3)
    assert mask.shape == (3, 2, 3)
    assert mask[0].tolist() == [[True, True, False]] * 2
    assert not mask[1].any() and mask[2].all()


@pytest.mark.parametrize(
    "spec",
    [
        AttentionSpec(batch=2),
        AttentionSpec(batch=2, mask="causal"),
        AttentionSpec(batch=2, mask="padding", valid_kv_len=(3, 8)),
        AttentionSpec(batch=2, mask="custom", custom_mask=np.eye(8, dtype=bool)),
    ],
    ids=lambda s: s.mask,
)
def test_from_spec_is_batch_shaped(spec):
    mask = masks.from_spec(spec)
    if spec.mask == "none":
        assert mask is None
        assert not masks.empty_rows(mask, 2, 8).any()
    else:
        assert mask.shape == (2, 8, 8) and mask.dtype == bool
        assert masks.empty_rows(mask, 2, 8).shape == (2, 8)
