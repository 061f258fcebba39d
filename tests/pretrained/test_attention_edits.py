"""Attention edits (issue 30 §5) and the window override (issue 31 §3) against transformers.

An edited run (`Checkpoint.run(text, fw, edit={(layer, head): {query: row}})`) must equal a
transformers run (eager attention) whose attention function is wrapped to put the same rows in
place of the softmax's before they multiply V — on tiny random GPT-2, Llama (GQA) and Gemma 3
(local and global layers, MQA) models built here. `window=N` must equal transformers'
`Gemma3ForCausalLM` loaded with `sliding_window=N`. Rows are checked before anything runs.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.errors import SpecError
from attnviz.pretrained import edits
from tests.conftest import RTOL_MODEL, assert_close, requires
from tests.interp.test_interp_attribution import make_tiny_gemma
from tests.pretrained.test_gemma3 import WINDOW
from tests.pretrained.test_gpt2 import make_tiny_gpt2
from tests.pretrained.test_llama import make_tiny_llama

transformers = pytest.importorskip("transformers", reason="transformers (the oracle) is not installed")
torch = pytest.importorskip("torch")

FRAMEWORKS = [pytest.param("torch"), pytest.param("tensorflow", marks=requires("tensorflow"))]
TEXT = "The cat sat on the mat because it was tired."
CLASSES = {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM", "gemma3": "Gemma3ForCausalLM"}
MODULES = {"gpt2": "modeling_gpt2", "llama": "modeling_llama", "gemma3": "modeling_gemma3"}


@pytest.fixture(scope="module", params=list(CLASSES))
def models(request, tmp_path_factory):
    """(attnviz checkpoint, transformers model, family, folder)."""
    family = request.param
    folder = tmp_path_factory.mktemp(f"tiny-{family}-edits")
    {"gpt2": lambda: make_tiny_gpt2(folder, seed=3), "llama": lambda: make_tiny_llama(folder, seed=3)}.get(
        family, lambda: make_tiny_gemma(folder)
    )()
    hf = getattr(transformers, CLASSES[family]).from_pretrained(str(folder), attn_implementation="eager")
    return pretrained.load(folder), hf.eval(), family, folder


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    """(attnviz checkpoint, folder) of the tiny Gemma 3: local layers 0, 1, 3, global layer 2."""
    folder = tmp_path_factory.mktemp("tiny-gemma3-window")
    make_tiny_gemma(folder)
    return pretrained.load(folder), folder


def forced(monkeypatch, family: str, edit: dict) -> None:
    """Wrap the family's eager attention: its weights with `edit`'s rows put in place, times V."""
    module = getattr(transformers.models, family)
    module = getattr(module, MODULES[family])
    original = module.eager_attention_forward

    def attention(mod, query, key, value, attention_mask, *args, **kwargs):
        _, weights = original(mod, query, key, value, attention_mask, *args, **kwargs)  # (1, H, T, T)
        weights = weights.clone()
        for (layer, head), rows in edit.items():
            for q, row in rows.items():
                if layer == mod.layer_idx:
                    weights[0, head, q] = torch.tensor(row, dtype=weights.dtype)
        groups = weights.shape[1] // value.shape[1]  # query heads per K/V head
        values = value.repeat_interleave(groups, dim=1)  # (1, H, T, Dh)
        return (weights @ values).transpose(1, 2).contiguous(), weights  # (1, T, H, Dh)

    monkeypatch.setattr(module, "eager_attention_forward", attention)


def oracle(hf, ids: list[int]):
    """transformers' logits `(T, V)` and attentions `(L, H, T, T)`."""
    with torch.no_grad():
        out = hf(torch.tensor([ids]), output_attentions=True)
    return out.logits[0].numpy(), torch.stack(out.attentions)[:, 0].numpy()


def an_edit(ckpt, T: int) -> dict:
    """Rows of every kind on the first and last layers: all on one key, the sink drained, one key
    zeroed (both are local on the tiny Gemma: the rows keep to the window)."""
    base = ckpt.run(TEXT).attentions
    L = ckpt.config.num_hidden_layers
    q = T - 1
    first = q - WINDOW + 1 if ckpt.config.model_type == "gemma3_text" else 0
    return {
        (0, 1): {q: edits.only_key(T, first), 2: edits.drain_sink(base[0, 1, 2])},
        (L - 1, 0): {q: edits.zero_key(base[L - 1, 0, q], q), 1: edits.only_key(T, 0)},
    }


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_edit_equals_transformers_with_the_pattern_forced(models, framework, monkeypatch):
    ckpt, hf, family, _ = models
    ids = ckpt.encode(TEXT)[0]
    edit = an_edit(ckpt, len(ids))
    before = ckpt.run(TEXT, framework)
    out = ckpt.run(TEXT, framework, edit=edit)
    forced(monkeypatch, family, edit)
    logits, attentions = oracle(hf, ids)
    assert_close(out.logits, logits, RTOL_MODEL[framework], f"{family} {framework} logits")
    assert_close(out.attentions, attentions, RTOL_MODEL[framework], f"{family} {framework} attentions")
    for (layer, head), rows in edit.items():  # the output shows the rows that multiplied V
        for q, row in rows.items():
            np.testing.assert_array_equal(out.attentions[layer, head, q], row.astype(np.float32))
    assert np.abs(out.logits[-1] - before.logits[-1]).max() > 1e-3  # the edit changed the answer
    assert out.edit.keys() == edit.keys() and out.changes == [
        f"L0.H1's attention rows at query {len(ids) - 1}, 2 edited",
        f"L{ckpt.config.num_hidden_layers - 1}.H0's attention rows at query {len(ids) - 1}, 1 edited",
    ]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_edit_composes_with_ablation_on_other_heads(models, framework, monkeypatch):
    """An edited head beside a zero-ablated one: transformers with the rows forced and the ablated
    head's slice of the output projection's input zeroed."""
    ckpt, hf, family, _ = models
    ids = ckpt.encode(TEXT)[0]
    edit = {(0, 1): {len(ids) - 1: edits.only_key(len(ids), len(ids) - 2)}}
    out = ckpt.run(TEXT, framework, edit=edit, ablate={(0, 2): "zero"})
    forced(monkeypatch, family, edit)
    proj = hf.transformer.h[0].attn.c_proj if family == "gpt2" else hf.model.layers[0].self_attn.o_proj
    Dh = ckpt.config.head_dim

    def zero_head(_module, args):
        z = args[0].clone()  # (1, T, H·Dh)
        z[..., 2 * Dh : 3 * Dh] = 0
        return (z,)

    hook = proj.register_forward_pre_hook(zero_head)
    try:
        logits, _ = oracle(hf, ids)
    finally:
        hook.remove()
    assert_close(out.logits, logits, RTOL_MODEL[framework], f"{family} {framework} edit + ablate")
    assert out.changes == ["L0.H2 ablated (zero)", f"L0.H1's attention row at query {len(ids) - 1} edited"]


def test_edit_refuses_a_head_that_is_also_replaced(models):
    ckpt, _, _, _ = models
    T = len(ckpt.encode(TEXT)[0])
    edit = {(0, 1): {0: edits.only_key(T, 0)}}
    with pytest.raises(SpecError, match="also ablated or patched") as error:
        ckpt.run(TEXT, edit=edit, ablate={(0, 1): "mean"})
    assert error.value.field == "edit"
    z = ckpt.run(TEXT, head_outputs=True).head_outputs[0, 1]
    with pytest.raises(SpecError, match="also ablated or patched"):
        ckpt.run(TEXT, edit=edit, patch={(0, 1): z})


def bad_rows(T: int, L: int, H: int) -> list[tuple[dict, str]]:
    """(edit, a phrase its error must hold): one per rule."""
    good = edits.only_key(T, 0)
    return [
        ([good], "type list"),
        ({(L, 0): {0: good}}, f"0 ≤ layer < {L}"),
        ({(0, H): {0: good}}, f"0 ≤ head < {H}"),
        ({(0, 0): good}, "not {query: row}"),
        ({(0, 0): {T: good}}, f"queries 0 … {T - 1}"),
        ({(0, 0): {1: good[:-1]}}, f"a row of {T} weights"),
        ({(0, 0): {1: np.full(T, np.nan)}}, "finite weights"),
        ({(0, 0): {1: np.r_[1.5, -0.5, np.zeros(T - 2)]}}, "non-negative weights"),
        ({(0, 0): {1: good * 0.9}}, "summing to 1"),
        ({(0, 0): {1: good * (1 + 2e-6)}}, "summing to 1"),
        ({(0, 0): {1: edits.only_key(T, 2)}}, "after the query (causal)"),
        ({(0, 0): {1: ["a"] * T}}, f"a row of {T} numbers"),
    ]


def test_rows_are_checked_before_running(models):
    ckpt, _, _, _ = models
    T, L, H = len(ckpt.encode(TEXT)[0]), ckpt.config.num_hidden_layers, ckpt.config.num_attention_heads
    for edit, phrase in bad_rows(T, L, H):
        with pytest.raises(SpecError) as error:
            ckpt.run(TEXT, edit=edit)
        assert error.value.field == "edit" and phrase in str(error.value), (edit, str(error.value))
    within = edits.only_key(T, 1) * (1 + 5e-7)  # inside the tolerance: accepted
    assert ckpt.run(TEXT, edit={(0, 0): {1: within}}).edit[0, 0][1][1] == pytest.approx(1 + 5e-7)


def test_a_local_layer_refuses_weight_outside_its_window(gemma):
    ckpt, _ = gemma
    T = len(ckpt.encode(TEXT)[0])
    q = T - 1
    with pytest.raises(SpecError, match=f"outside layer 0's window of {WINDOW} tokens") as error:
        ckpt.run(TEXT, edit={(0, 0): {q: edits.only_key(T, q - WINDOW)}})
    assert error.value.field == "edit"
    ckpt.run(TEXT, edit={(2, 0): {q: edits.only_key(T, 0)}})  # layer 2 is global: every key allowed
    with pytest.raises(SpecError, match="outside layer 0's window of 2 tokens"):  # the narrowed window
        ckpt.run(TEXT, window=2, edit={(0, 0): {q: edits.only_key(T, q - 2)}})


# -- rows ------------------------------------------------------------------------------------


def test_row_helpers():
    np.testing.assert_array_equal(edits.only_key(4, 2), [0, 0, 1, 0])
    np.testing.assert_allclose(edits.drain_sink([0.5, 0.25, 0.25, 0]), [0, 0.5, 0.5, 0])
    np.testing.assert_allclose(edits.zero_key([0.2, 0.3, 0.5], 2), [0.4, 0.6, 0])
    for call, field in (
        (lambda: edits.only_key(3, 3), "key"),
        (lambda: edits.only_key(0, 0), "T"),
        (lambda: edits.zero_key([0.5, 0.5], -1), "key"),
        (lambda: edits.zero_key([0.5, -0.5], 0), "row"),
        (lambda: edits.drain_sink([1.0, 0.0]), "key"),  # nothing left to renormalise
        (lambda: edits.drain_sink([[1.0]]), "row"),
    ):
        with pytest.raises(SpecError) as error:
            call()
        assert error.value.field == field


# -- the window override ---------------------------------------------------------------------


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("window", [1, 2, 3])
def test_window_equals_transformers_with_a_smaller_sliding_window(gemma, framework, window):
    ckpt, folder = gemma
    hf = transformers.Gemma3ForCausalLM.from_pretrained(
        str(folder), attn_implementation="eager", sliding_window=window
    ).eval()
    out = ckpt.run(TEXT, framework, window=window)
    logits, attentions = oracle(hf, out.ids)
    assert_close(out.logits, logits, RTOL_MODEL[framework], f"window {window} {framework} logits")
    assert_close(out.attentions, attentions, RTOL_MODEL[framework], f"window {window} {framework} attentions")
    T = len(out.ids)
    far = np.tril(np.ones((T, T), bool), -window)  # keys the narrowed window cuts
    assert (out.attentions[0][:, far] == 0).all() and (out.attentions[2][:, far] > 0).all()
    assert out.window == window and out.changes == [f"the local layers' window narrowed to {window} tokens"]
    assert ckpt.run(TEXT, framework).window is None and ckpt.run(TEXT, framework).changes == []


def test_window_refused_out_of_range(gemma):
    ckpt, _ = gemma
    for bad in (0, -1, WINDOW + 1, 2.5, "3", True):
        with pytest.raises(SpecError, match=f"1 … {WINDOW} tokens") as error:
            ckpt.run(TEXT, window=bad)
        assert error.value.field == "window"


def test_window_refused_without_local_layers(models):
    ckpt, _, family, _ = models
    if family == "gemma3":
        assert ckpt.run(TEXT, window=2).window == 2
        return
    with pytest.raises(SpecError, match="no local") as error:
        ckpt.run(TEXT, window=2)
    assert error.value.field == "window"
