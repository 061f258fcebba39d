"""QK and OV circuits, copying scores and composition (issue 30 §4) against NumPy float64.

The oracle reads transformers' `state_dict` of a tiny random GPT-2 and a tiny Llama (grouped K/V
heads, RoPE, untied unembedding) and computes everything the way the paper writes it: dense
`(D, D)` matrices `W_QK` and `W_OV` in the column convention, the full `(V, V)` OV circuit and all
its eigenvalues, RoPE from transformers' own rotary embedding at two absolute positions. attnviz
computes the same numbers through Gram matrices and a cyclic permutation. The Frobenius-norm
formula is checked on hand-made matrices; on SmolLM2 (slow) the induction heads the role scan
finds K-compose with its previous-token head.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.errors import SpecError
from attnviz.interp import qkov
from tests.conftest import ATOL_F64, assert_close
from tests.pretrained.test_gpt2 import make_tiny_gpt2
from tests.pretrained.test_llama import make_tiny_llama

transformers = pytest.importorskip("transformers", reason="transformers (the oracle) is not installed")
torch = pytest.importorskip("torch")

RTOL = 1e-9  # float64 against float64, through another factorisation
RTOL_F32_PRODUCT = 1e-5  # composition scores: one float32 matrix product on the way
RTOL_ROPE = 1e-6  # transformers keeps RoPE's inverse frequencies in float32


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def models(request, tmp_path_factory):
    """(attnviz checkpoint, the oracle's weights)."""
    folder = tmp_path_factory.mktemp(f"tiny-{request.param}-qkov")
    if request.param == "gpt2":
        make_tiny_gpt2(folder, seed=7)
        hf = transformers.GPT2LMHeadModel.from_pretrained(str(folder), attn_implementation="eager")
    else:
        make_tiny_llama(folder, tie=False, seed=7)
        hf = transformers.LlamaForCausalLM.from_pretrained(str(folder), attn_implementation="eager")
    ckpt = pretrained.load(folder)
    return ckpt, oracle_weights(hf.eval(), request.param, ckpt.n_tokens)


def oracle_weights(hf, family: str, V: int) -> types.SimpleNamespace:
    """Per layer and head, `W_Q, W_K, W_V (D, Dh)` and `W_O (Dh, D)` (row layout), the norms as
    functions, the embedding and unembedding — from the state_dict, float64."""
    sd = {k: v.double().numpy() for k, v in hf.state_dict().items()}
    cfg = hf.config
    L, H, D = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.hidden_size
    Dh = D // H
    heads, norms = [], []
    if family == "gpt2":
        for i in range(L):
            p = f"transformer.h.{i}."
            Wqkv, Wo = sd[p + "attn.c_attn.weight"], sd[p + "attn.c_proj.weight"]  # Conv1D (in, out)
            cols = lambda part, h: slice(part * D + h * Dh, part * D + (h + 1) * Dh)  # noqa: E731
            heads.append(
                [[Wqkv[:, cols(j, h)] for j in range(3)] + [Wo[h * Dh : (h + 1) * Dh]] for h in range(H)]
            )
            norms.append((sd[p + "ln_1.weight"], sd[p + "ln_1.bias"]))
        final = (sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"])
        E, eps, centred = sd["transformer.wte.weight"], cfg.layer_norm_epsilon, True
    else:
        group = H // cfg.num_key_value_heads
        for i in range(L):
            p = f"model.layers.{i}.self_attn."
            rows = lambda W, h: W[h * Dh : (h + 1) * Dh].T  # noqa: E731  Linear (out, in) → (D, Dh)
            heads.append(
                [
                    [rows(sd[p + "q_proj.weight"], h)]
                    + [rows(sd[p + n], h // group) for n in ("k_proj.weight", "v_proj.weight")]
                    + [sd[p + "o_proj.weight"][:, h * Dh : (h + 1) * Dh].T]
                    for h in range(H)
                ]
            )
            norms.append((sd[f"model.layers.{i}.input_layernorm.weight"], np.zeros(D)))
        final = (sd["model.norm.weight"], np.zeros(D))
        E, eps, centred = sd["model.embed_tokens.weight"], cfg.rms_norm_eps, False

    def norm(x, gamma_beta):
        x = x - x.mean(-1, keepdims=True) if centred else x
        return x / np.sqrt((x**2).mean(-1, keepdims=True) + eps) * gamma_beta[0] + gamma_beta[1]

    C = np.eye(D) - 1 / D if centred else np.eye(D)
    U_eff = (sd["lm_head.weight"][:V] * final[0]) @ C  # the final norm's gain, centred (LayerNorm)
    return types.SimpleNamespace(
        heads=heads, norms=norms, norm=norm, E=E[:V], U_eff=U_eff, C=C, hf=hf, family=family, H=H
    )


def some_tokens(ckpt, n=6):
    return list(range(3, 3 + 2 * n, 2))


@pytest.mark.parametrize("offset", [0, 1, 5])
def test_qk_table_is_the_heads_scores_on_normed_embeddings(models, offset):
    ckpt, w = models
    ids, layer, head = some_tokens(ckpt), 1, 2
    W_Q, W_K, _, _ = w.heads[layer][head]
    x = w.norm(w.E[ids], w.norms[layer])
    q, k = x @ W_Q, x @ W_K  # (n, Dh)
    if w.family == "llama":  # transformers' RoPE: the key at position 4, the query `offset` later
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        probe = torch.zeros(1, 1, dtype=torch.float64)
        cos, sin = w.hf.model.rotary_emb(probe, torch.tensor([[4 + offset, 4]]))  # (1, 2, Dh)
        qt = torch.from_numpy(q)[None, None]  # (1, 1, n, Dh)
        q_rot, _ = apply_rotary_pos_emb(qt, qt, cos[:, :1].double(), sin[:, :1].double())
        k_rot, _ = apply_rotary_pos_emb(
            *(torch.from_numpy(k)[None, None],) * 2, cos[:, 1:].double(), sin[:, 1:].double()
        )
        q, k = q_rot[0, 0].numpy(), k_rot[0, 0].numpy()
    table = qkov.qk_table(ckpt, layer, head, ids, offset=offset)
    tol = RTOL_ROPE if w.family == "llama" else RTOL
    assert_close(table.values, q @ k.T / np.sqrt(q.shape[-1]), tol, "QK table")
    assert table.labels == ckpt.labels(ids)


def test_ov_table_and_each_tokens_own_rank(models):
    ckpt, w = models
    ids, layer, head = some_tokens(ckpt), 0, 3
    _, _, W_V, W_O = w.heads[layer][head]
    logits = w.norm(w.E[ids], w.norms[layer]) @ W_V @ W_O @ w.U_eff.T  # (n, V)
    table = qkov.ov_table(ckpt, layer, head, ids)
    assert_close(table.values, logits[:, ids], RTOL, "OV table")
    ranks = [1 + int((row > row[i]).sum()) for row, i in zip(logits, ids, strict=True)]
    np.testing.assert_array_equal(table.self_rank, ranks)
    assert table.copying == np.mean(logits[:, ids].argmax(1) == np.arange(len(ids)))


def test_copying_scores_are_the_full_circuits_eigenvalues(models):
    ckpt, w = models
    L, H = len(w.heads), w.H
    expected = np.zeros((L, H))
    for layer in range(L):
        E_l = w.norm(w.E, w.norms[layer])  # (V, D)
        for head in range(H):
            _, _, W_V, W_O = w.heads[layer][head]
            lam = np.linalg.eigvals(E_l @ W_V @ W_O @ w.U_eff.T)  # (V,): the whole (V, V) circuit
            expected[layer, head] = lam.sum().real / np.abs(lam).sum()
    got = qkov.copying_scores(ckpt)
    np.testing.assert_allclose(got, expected, atol=1e-7)  # V − Dh eigenvalues are zeros in rounding
    assert (np.abs(got) <= 1).all()


@pytest.mark.parametrize("kind", list(qkov.KINDS))
def test_composition_scores_follow_the_papers_formula(models, kind):
    ckpt, w = models
    L, H = len(w.heads), w.H

    def dense(layer, head):  # column convention, the input norm folded into W_Q, W_K, W_V
        fold = w.C @ np.diag(w.norms[layer][0])
        W_Q, W_K, W_V, W_O = w.heads[layer][head]
        return (fold @ W_Q) @ (fold @ W_K).T, ((fold @ W_V) @ W_O).T  # W_QK, W_OV

    got = qkov.composition_scores(ckpt, kind)
    assert got.kind == kind and got.scores.shape == (L, H, L, H)
    for l2 in range(L):
        for h2 in range(H):
            for l1 in range(L):
                for h1 in range(H):
                    if l1 >= l2:
                        assert np.isnan(got.scores[l2, h2, l1, h1])
                        continue
                    QK, OV2 = dense(l2, h2)
                    OV1 = dense(l1, h1)[1]
                    later = {"q": QK.T, "k": QK, "v": OV2}[kind]
                    want = np.linalg.norm(later @ OV1) / (np.linalg.norm(later) * np.linalg.norm(OV1))
                    assert got.scores[l2, h2, l1, h1] == pytest.approx(want, rel=RTOL_F32_PRODUCT)


@pytest.mark.parametrize("kind", list(qkov.KINDS))
def test_one_heads_row_is_that_row_of_every_pair(models, kind):
    """What the Composition tab draws first (issue 46 point 21): one head's row — the heads it reads
    (`reads`) or that read it — equals that row or column of every pair's scores."""
    ckpt, w = models
    full = qkov.composition_scores(ckpt, kind)
    for layer, head in [(1, 0), (0, len(w.heads[0]) - 1)]:
        mine = qkov.composition_row(ckpt, kind, layer, head, reads=True)
        theirs = qkov.composition_row(ckpt, kind, layer, head, reads=False)
        np.testing.assert_allclose(mine.scores, full.scores[layer, head], rtol=RTOL_F32_PRODUCT)
        np.testing.assert_allclose(theirs.scores, full.scores[:, :, layer, head], rtol=RTOL_F32_PRODUCT)
        assert mine.baseline == theirs.baseline == full.baseline
    with pytest.raises(SpecError) as err:
        qkov.composition_row(ckpt, kind, len(w.heads), 0)
    assert err.value.field == "layer"


def test_the_frobenius_formula_on_hand_made_matrices():
    P = np.diag([1.0, 1, 0, 0])
    assert qkov.composition(P, P) == pytest.approx(1 / np.sqrt(2), abs=ATOL_F64)  # ‖P‖ / ‖P‖²
    assert qkov.composition(P, np.diag([0.0, 0, 1, 1])) == 0  # orthogonal subspaces
    shift = np.array([[0.0, 1], [0, 0]])
    assert qkov.composition(shift, shift) == 0  # writes where the reader does not read
    assert qkov.composition(shift, shift.T) == pytest.approx(1, abs=ATOL_F64)  # rank one, aligned
    A, B = np.random.default_rng(0).standard_normal((2, 5, 5))
    assert qkov.composition(3 * A, 0.5 * B) == pytest.approx(qkov.composition(A, B), abs=ATOL_F64)
    assert 0 < qkov.composition(A, B) <= 1
    assert qkov.composition(np.zeros((3, 3)), A[:3, :3]) == 0


@pytest.mark.parametrize("kind", list(qkov.KINDS))
def test_the_baseline_is_random_matrices_of_the_same_shapes(kind):
    D, Dh, draws = 16, 4, 400
    rng = np.random.default_rng(99)
    scores = []
    for _ in range(draws):
        W_Q, W_K, W_V, W_V1 = rng.standard_normal((4, D, Dh))
        W_O, W_O1 = rng.standard_normal((2, Dh, D))
        QK, OV2, OV1 = W_Q @ W_K.T, (W_V @ W_O).T, (W_V1 @ W_O1).T
        scores.append(qkov.composition({"q": QK.T, "k": QK, "v": OV2}[kind], OV1))
    spread = np.std(scores) / np.sqrt(draws)
    baseline = qkov.random_baseline(kind, D, Dh, draws=draws)
    assert abs(baseline - np.mean(scores)) < 5 * spread  # two fixed-seed samples of one mean
    assert qkov.random_baseline(kind, D, Dh) < qkov.random_baseline(kind, D, D)  # wider heads overlap more


def test_refusals_name_the_field(models):
    ckpt, _ = models
    bad = [
        (lambda: qkov.qk_table(ckpt, 0, 99, [3, 4]), "head"),
        (lambda: qkov.qk_table(ckpt, 9, 0, [3, 4]), "layer"),
        (lambda: qkov.qk_table(ckpt, 0, 0, [3, 3]), "tokens"),
        (lambda: qkov.qk_table(ckpt, 0, 0, []), "tokens"),
        (lambda: qkov.qk_table(ckpt, 0, 0, [3], offset=-1), "offset"),
        (lambda: qkov.ov_table(ckpt, 0, 0, ["not one token at all"]), "tokens"),
        (lambda: qkov.composition_scores(ckpt, "x"), "kind"),
    ]
    for call, field in bad:
        with pytest.raises(SpecError) as err:
            call()
        assert err.value.field == field
    encoder = types.SimpleNamespace(
        name="bert", kind="encoder", config=types.SimpleNamespace(model_type="bert")
    )
    with pytest.raises(SpecError) as err:
        qkov.copying_scores(encoder)
    assert err.value.field == "checkpoint"


@pytest.mark.slow
def test_smollm2_induction_heads_k_compose_with_its_previous_token_head():
    from attnviz.interp import roles

    ckpt = pretrained.load_choice("SmolLM2-135M-Instruct")
    scan = roles.scan(ckpt, half=16, n=2, seed=0)
    (pl, ph, _), induction = scan.top("previous_token", 1)[0], scan.top("induction", 4)
    k = qkov.composition_scores(ckpt, "k")
    for layer, head, _ in induction:
        assert layer > pl
        row = np.nan_to_num(k.scores[layer, head], nan=-1.0)  # (L, H) over earlier heads
        assert row[pl, ph] > 3 * k.baseline
        assert (row > row[pl, ph]).sum() <= 1  # the previous-token head is its first or second
