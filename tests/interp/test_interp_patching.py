"""Patching sweep, logit-lens table and induction ablation against transformers with forward hooks.

The oracle patches a head in Hugging Face's GPT2LMHeadModel itself: a forward pre-hook on layer
l's `attn.c_proj` (whose input is the heads' outputs side by side) swaps head h's slice for the
slice recorded on the clean prompt.
"""

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.errors import SpecError
from attnviz.exec.monitor import Monitor
from attnviz.interp import circuits, lens, patching, roles
from tests.conftest import ATOL_RATIO, ATOL_WEIGHTS, requires
from tests.pretrained.test_gpt2 import make_tiny_gpt2

transformers = pytest.importorskip("transformers", reason="transformers (the oracle) is not installed")
torch = pytest.importorskip("torch")

FRAMEWORKS = [pytest.param("torch"), pytest.param("tensorflow", marks=requires("tensorflow"))]
TOL = ATOL_RATIO
CLEAN, CORRUPTED = "The cat sat on the mat", "The dog sat on the mat"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_tiny_gpt2(tmp_path_factory.mktemp("tiny-gpt2-patching"), n_positions=32)


@pytest.fixture(scope="module")
def hf(folder):
    return transformers.GPT2LMHeadModel.from_pretrained(str(folder), attn_implementation="eager").eval()


def hf_sweep(model, clean_ids, corrupted_ids, answer, wrong):
    """`restored (L, H)` computed by patching inside transformers' own model."""
    cfg = model.config
    L, H, dh = cfg.n_layer, cfg.n_head, cfg.n_embd // cfg.n_head
    recorded = {}

    def record(layer):
        return lambda module, args: recorded.__setitem__(layer, args[0].detach().clone())

    hooks = [model.transformer.h[i].attn.c_proj.register_forward_pre_hook(record(i)) for i in range(L)]
    with torch.no_grad():
        clean = model(torch.tensor([clean_ids])).logits[0, -1]
    for hook in hooks:
        hook.remove()
    with torch.no_grad():
        corrupted = model(torch.tensor([corrupted_ids])).logits[0, -1]

    def diff(logits):
        return float(logits[answer] - logits[wrong])

    restored = np.zeros((L, H))
    for layer in range(L):
        for head in range(H):

            def swap(module, args, layer=layer, head=head):
                x = args[0].clone()
                x[..., head * dh : (head + 1) * dh] = recorded[layer][..., head * dh : (head + 1) * dh]
                return (x,)

            hook = model.transformer.h[layer].attn.c_proj.register_forward_pre_hook(swap)
            with torch.no_grad():
                patched = model(torch.tensor([corrupted_ids])).logits[0, -1]
            hook.remove()
            restored[layer, head] = (diff(patched) - diff(corrupted)) / (diff(clean) - diff(corrupted))
    return restored, diff(clean), diff(corrupted)


def answer_pair(ckpt):
    """A one-token word as text (read by the tokenizer) and another token as an id."""
    words = [
        w
        for w in (" the", " cat", " mat", " dog")
        if len(ckpt.tokenizer.encode(w, add_special_tokens=False).ids) == 1
    ]
    assert words, "the tiny tokenizer should know one of these words as one token"
    answer = words[0]
    wrong = (ckpt.tokenizer.encode(answer, add_special_tokens=False).ids[0] + 1) % ckpt.n_tokens
    return answer, wrong


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_sweep_matches_patching_inside_transformers(folder, hf, framework):
    ckpt = pretrained.load(folder)
    answer, wrong = answer_pair(ckpt)
    seen = []
    result = patching.sweep(
        ckpt, CLEAN, CORRUPTED, answer, wrong, framework, monitor=Monitor(lambda d, t, _: seen.append((d, t)))
    )
    answer_id = ckpt.tokenizer.encode(answer, add_special_tokens=False).ids[0]
    expected, clean_diff, corrupted_diff = hf_sweep(
        hf, ckpt.encode(CLEAN)[0], ckpt.encode(CORRUPTED)[0], answer_id, wrong
    )
    assert result.complete and result.restored.shape == (2, 4)
    assert result.clean_diff == pytest.approx(clean_diff, abs=1e-3)
    assert result.corrupted_diff == pytest.approx(corrupted_diff, abs=1e-3)
    np.testing.assert_allclose(result.restored, expected, atol=TOL[framework])
    assert seen == [(4, 8), (8, 8)]  # one batch per layer
    # issue 41 point 4: the result carries both prompts' runs (a page draws them without running again)
    for run, text in ((result.clean, CLEAN), (result.corrupted, CORRUPTED)):
        with torch.no_grad():
            theirs = hf(torch.tensor([ckpt.encode(text)[0]]), output_attentions=True)
        np.testing.assert_allclose(run.logits, theirs.logits[0, -1].numpy(), atol=1e-3)
        attentions = torch.stack(theirs.attentions)[:, 0].numpy()  # (L, H, T, T)
        np.testing.assert_allclose(run.attentions, attentions, atol=ATOL_WEIGHTS[framework])


def test_sweep_stops_where_asked_and_refuses_bad_prompts(folder):
    ckpt = pretrained.load(folder)
    answer, wrong = answer_pair(ckpt)
    monitor = Monitor(lambda done, total, _: monitor.stop())  # asked to stop after the first layer
    partial = patching.sweep(ckpt, CLEAN, CORRUPTED, answer, wrong, monitor=monitor)
    assert partial.done.sum() == 4 and not partial.complete  # the first layer's 4 heads
    assert (
        np.isnan(partial.restored[~partial.done]).all() and np.isfinite(partial.restored[partial.done]).all()
    )
    bad = [
        ({"corrupted": "The dog"}, "corrupted"),
        ({"answer": "not one token at all"}, "answer"),
        ({"wrong": answer}, "wrong"),  # the answer itself
        ({"corrupted": CLEAN}, "corrupted"),  # the same prompt restores nothing: no difference to explain
        ({"answer": 10**9}, "answer"),
    ]
    for change, field in bad:
        kwargs = {"clean": CLEAN, "corrupted": CORRUPTED, "answer": answer, "wrong": wrong, **change}
        with pytest.raises(SpecError) as err:
            patching.sweep(ckpt, **kwargs)
        assert err.value.field == field, change


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_lens_table_reads_the_lens_and_its_last_row_is_the_model(folder, framework):
    ckpt = pretrained.load(folder)
    out = ckpt.run(CLEAN, framework)
    lens_logits = ckpt.logit_lens(out)
    table = lens.top_tokens(ckpt, lens_logits, k=3)
    L = ckpt.config.num_hidden_layers
    assert table.ids.shape == (L + 1, len(out.ids), 3)
    np.testing.assert_array_equal(table.ids[-1, :, 0], out.logits[:, : ckpt.n_tokens].argmax(-1))
    z = lens_logits[..., : ckpt.n_tokens].astype(np.float64)
    p = np.exp(z - z.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(table.probs, np.take_along_axis(p, table.ids, -1), atol=1e-6)
    assert (np.diff(table.probs, axis=-1) <= 1e-12).all()  # most likely first


def test_second_half_loss_and_the_ablation_comparison(folder, hf):
    ckpt = pretrained.load(folder)
    scan = roles.scan(ckpt, half=6, n=2, seed=3)
    row = scan.ids[0]
    with torch.no_grad():
        logits = hf(torch.as_tensor(row[None])).logits[0]
    expected = torch.nn.functional.cross_entropy(logits[6:11], torch.tensor(row[7:12])).item()
    assert circuits.second_half_loss(logits.numpy(), row) == pytest.approx(expected, rel=1e-5)
    cmp = circuits.induction_ablation(ckpt, scan, 2, seed=1)
    assert cmp.top_heads == [(a, b) for a, b, _ in scan.top("induction", 2)]
    assert len(cmp.random) == circuits.RANDOM_DRAWS
    assert all(not set(h) & set(cmp.top_heads) for h in cmp.random_heads)
    assert cmp.baseline == pytest.approx(circuits.loss_with(ckpt, scan.ids, "torch", []))
    with pytest.raises(SpecError) as err:
        circuits.induction_ablation(ckpt, scan, 5)  # more than half the 8 heads
    assert err.value.field == "k"
