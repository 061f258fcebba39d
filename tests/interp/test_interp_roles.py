"""The head-role scan against scores computed from transformers' own attentions.

The oracle loops over positions in plain Python on `GPT2LMHeadModel(output_attentions=True)`'s
attention for the same token ids; attnviz's scan runs its own decoder in each framework.
"""

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.errors import SpecError
from attnviz.interp import roles
from tests.conftest import RTOL_MODEL, requires
from tests.pretrained.test_gpt2 import make_tiny_gpt2

transformers = pytest.importorskip("transformers", reason="transformers (the oracle) is not installed")
torch = pytest.importorskip("torch")

FRAMEWORKS = [pytest.param("torch"), pytest.param("tensorflow", marks=requires("tensorflow"))]
TOL = RTOL_MODEL


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_tiny_gpt2(tmp_path_factory.mktemp("tiny-gpt2-roles"), n_positions=32)


def oracle_scores(folder, ids: np.ndarray) -> dict[str, np.ndarray]:
    """Each role's `(L, H)` score, position by position, from transformers' attentions."""
    model = transformers.GPT2LMHeadModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    with torch.no_grad():
        out = model(torch.as_tensor(ids), output_attentions=True)
    attn = np.stack([a.numpy() for a in out.attentions]).astype(np.float64)  # (L, N, H, T, T)
    L, N, H, T, _ = attn.shape
    half = T // 2
    scores = {role: np.zeros((L, H)) for role in roles.ROLES}
    for layer in range(L):
        for head in range(H):
            a = attn[layer, :, head]
            scores["previous_token"][layer, head] = np.mean(
                [a[s, t, t - 1] for s in range(N) for t in range(1, T)]
            )
            second = [(s, t) for s in range(N) for t in range(half, T)]
            scores["induction"][layer, head] = np.mean([a[s, t, t - half + 1] for s, t in second])
            scores["duplicate_token"][layer, head] = np.mean([a[s, t, t - half] for s, t in second])
            scores["first_token"][layer, head] = np.mean([a[s, t, 0] for s in range(N) for t in range(1, T)])
    return scores


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_scan_matches_scores_from_transformers_attentions(folder, framework):
    ckpt = pretrained.load(folder)
    scan = roles.scan(ckpt, framework, half=6, n=3, seed=7)
    assert scan.ids.shape == (3, 12)
    np.testing.assert_array_equal(scan.ids[:, :6], scan.ids[:, 6:])  # the second half repeats the first
    expected = oracle_scores(folder, scan.ids)
    for role in roles.ROLES:
        assert scan.scores[role].shape == (2, 4)
        np.testing.assert_allclose(scan.scores[role], expected[role], atol=TOL[framework], err_msg=role)
    layer, head, score = scan.top("first_token", 1)[0]
    assert score == pytest.approx(expected["first_token"].max(), abs=TOL[framework])
    assert expected["first_token"][layer, head] == pytest.approx(expected["first_token"].max())


def test_scores_on_hand_made_heads():
    """A perfect head of each kind scores 1 on its role, and a uniform causal head scores what it must."""
    half, T = 4, 8
    t = np.arange(T)
    perfect = np.zeros((4, T, T))
    perfect[0, t[1:], t[1:] - 1] = 1  # previous token
    perfect[1, t[half:], t[half:] - half + 1] = 1  # induction
    perfect[2, t[half:], t[half:] - half] = 1  # duplicate token
    perfect[3, :, 0] = 1  # first token
    got = roles.role_scores(perfect[None, :, None])  # (L=1, H=4, N=1, T, T)
    for head, role in enumerate(["previous_token", "induction", "duplicate_token", "first_token"]):
        assert got[role][0, head] == pytest.approx(1.0), role
    uniform = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    first = roles.role_scores(uniform[None, None, None])["first_token"][0, 0]
    assert first == pytest.approx(np.mean(1 / np.arange(2, T + 1)))


def test_bad_scan_settings_name_the_field(folder):
    ckpt = pretrained.load(folder)
    with pytest.raises(SpecError) as err:
        roles.scan(ckpt, half=17)  # 34 tokens > 32 positions
    assert err.value.field == "half"
    for field, kwargs in (("half", {"half": 1}), ("n", {"n": 0}), ("seed", {"seed": -1}), ("n", {"n": 2.5})):
        with pytest.raises(SpecError) as err:
            roles.scan(ckpt, **kwargs)
        assert err.value.field == field
