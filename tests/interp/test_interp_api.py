"""The interpretability API of `Checkpoint` (issue 18 §1), proven against transformers' GPT-2
read and edited through forward hooks, in both frameworks:

- `ModelOutput.hidden_states (L + 1, T, D)`: each block's input, then the last block's output
  (before `ln_f`) — hooks on `transformer.h[i]`;
- `head_outputs (L, H, T, Dh)`: the input of each layer's output projection `attn.c_proj`, split
  into heads;
- `run(..., patch={(layer, head): z})`: that slice of `c_proj`'s input replaced by `z`, alone and
  together with an ablation;
- `logit_lens (L + 1, T, V)`: transformers' `ln_f` and `lm_head` applied to each hidden state.

The checkpoint is `tests.pretrained.test_gpt2.make_tiny_gpt2` (random weights, a tokenizer trained here).
"""

from __future__ import annotations

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.errors import SpecError
from tests.conftest import assert_close
from tests.pretrained.test_gpt2 import FRAMEWORKS, RTOL, make_tiny_gpt2

transformers = pytest.importorskip("transformers", reason="transformers (the oracle) is not installed")
torch = pytest.importorskip("torch")

CLEAN = "The cat sat on the mat."
L, H, D = 2, 4, 32
Dh = D // H
T = 11  # tokens of CLEAN with the tokenizer trained in make_tiny_gpt2


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_tiny_gpt2(tmp_path_factory.mktemp("tiny-gpt2"), seed=3)


@pytest.fixture(scope="module")
def gpt(folder):
    return pretrained.load(folder)


@pytest.fixture(scope="module")
def corrupted(gpt):
    """The clean prompt's ids with two tokens swapped for others (the same length, as patching needs)."""
    ids = list(gpt.encode(CLEAN)[0])
    ids[1], ids[3] = (ids[1] + 7) % gpt.n_tokens, (ids[3] + 11) % gpt.n_tokens
    return ids


@pytest.fixture(scope="module")
def hf(folder):
    return transformers.GPT2LMHeadModel.from_pretrained(str(folder), attn_implementation="eager").eval()


def hooked(model, ids, replace=None):
    """Run transformers' GPT-2 on `ids` with `replace = {(layer, head): (T, Dh) array or None (zero)}`
    written into `c_proj`'s input; returns hidden states, head outputs (as `c_proj` received them),
    logits and the logit lens."""
    hidden, heads, handles = [], [], []
    replace = replace or {}

    def block_input(module, args, kwargs):
        hidden.append((args[0] if args else kwargs["hidden_states"])[0].detach().clone())

    def proj_input(layer):
        def hook(module, args):
            x = args[0].clone()  # (1, T, H·Dh)
            for (lay, head), z in replace.items():
                if lay == layer:
                    x[0, :, head * Dh : (head + 1) * Dh] = 0 if z is None else torch.from_numpy(z)
            heads.append(x[0].reshape(x.shape[1], H, Dh).transpose(0, 1).clone())  # (H, T, Dh)
            return (x,)

        return hook

    blocks = model.transformer.h
    for i, block in enumerate(blocks):
        handles.append(block.register_forward_pre_hook(block_input, with_kwargs=True))
        handles.append(block.attn.c_proj.register_forward_pre_hook(proj_input(i)))

    def block_output(module, args, out):  # a tuple (hidden, …) or, in newer transformers, the tensor
        hidden.append((out[0] if isinstance(out, tuple) else out)[0].detach().clone())

    handles.append(blocks[-1].register_forward_hook(block_output))
    try:
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0]
            stack = torch.stack(hidden)  # (L + 1, T, D)
            lens = model.lm_head(model.transformer.ln_f(stack))
    finally:
        for handle in handles:
            handle.remove()
    return stack.numpy(), torch.stack(heads).numpy(), logits.numpy(), lens.numpy()


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_hidden_states_head_outputs_and_logit_lens_match_hooks(gpt, hf, framework):
    out = gpt.run(CLEAN, framework, head_outputs=True)
    hidden, heads, logits, lens = hooked(hf, out.ids)
    T = len(out.ids)
    assert out.hidden_states.shape == (L + 1, T, D) and out.head_outputs.shape == (L, H, T, Dh)
    rtol = RTOL[framework]
    assert_close(out.hidden_states, hidden, rtol, "hidden states")
    assert_close(out.head_outputs, heads, rtol, "head outputs")
    assert_close(out.logits, logits, rtol, "logits")
    ours = gpt.logit_lens(out)
    assert ours.shape == (L + 1, T, gpt.config.vocab_size)
    assert_close(ours, lens, rtol, "logit lens")
    np.testing.assert_allclose(ours[-1], out.logits, rtol=1e-5, atol=1e-5 * np.abs(out.logits).max())
    assert gpt.run(CLEAN, framework).head_outputs is None


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_patching_a_clean_head_into_a_corrupted_run_matches_hooks(gpt, hf, corrupted, framework):
    clean = gpt.run(CLEAN, framework, head_outputs=True)
    z = clean.head_outputs[1, 2]  # (T, Dh)
    patched = gpt.run_ids(corrupted, framework, patch={(1, 2): z}, head_outputs=True)
    _, heads, logits, _ = hooked(hf, patched.ids, {(1, 2): z})
    assert_close(patched.logits, logits, RTOL[framework], "patched logits")
    assert_close(patched.head_outputs, heads, RTOL[framework], "patched head outputs")
    np.testing.assert_array_equal(patched.head_outputs[1, 2], z)
    unpatched = gpt.run_ids(corrupted, framework)
    assert np.abs(patched.logits - unpatched.logits).max() > 1e-3  # the patch changed something


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_patching_composes_with_ablation(gpt, hf, corrupted, framework):
    z = gpt.run(CLEAN, framework, head_outputs=True).head_outputs[1, 0]
    out = gpt.run_ids(corrupted, framework, ablate={(0, 1): "zero"}, patch={(1, 0): z})
    _, _, logits, _ = hooked(hf, out.ids, {(0, 1): None, (1, 0): z})
    assert_close(out.logits, logits, RTOL[framework], "ablated and patched logits")
    assert out.ablate == {(0, 1): "zero"} and list(out.patch) == [(1, 0)]


def test_patching_with_its_own_output_changes_nothing(gpt):
    out = gpt.run(CLEAN, "torch", head_outputs=True)
    same = gpt.run(CLEAN, "torch", patch={(0, 3): out.head_outputs[0, 3]})
    np.testing.assert_allclose(same.logits, out.logits, rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    "patch",
    [
        {(0, 0): np.zeros((3, Dh))},  # wrong length
        {(0, 0): np.zeros((T, Dh + 1))},  # wrong width
        {(2, 0): np.zeros((T, Dh))},  # no such layer
        {(0, 4): np.zeros((T, Dh))},  # no such head
        {(0, -1): np.zeros((T, Dh))},
        {0: np.zeros((T, Dh))},
        {(0, 0): np.full((T, Dh), np.nan)},
        {(0, 0): np.full((T, Dh), 1e30)},
        {(0, 0): "zero"},
        [((0, 0), np.zeros((T, Dh)))],
    ],
    ids=["length", "width", "layer", "head", "negative", "key", "nan", "huge", "string", "list"],
)
def test_bad_patches_name_the_field(gpt, patch):
    assert len(gpt.encode(CLEAN)[0]) == T
    with pytest.raises(SpecError) as err:
        gpt.run(CLEAN, "torch", patch=patch)
    assert err.value.field == "patch"


def test_a_head_is_ablated_or_patched_not_both(gpt):
    with pytest.raises(SpecError) as err:
        gpt.run(CLEAN, "torch", ablate={(0, 0): "zero"}, patch={(0, 0): np.zeros((T, Dh))})
    assert err.value.field == "patch"


def test_logit_lens_needs_a_decoder_and_its_own_output(gpt):
    with pytest.raises(SpecError):
        gpt.logit_lens("not an output")
    if "all-MiniLM-L6-v2" in pretrained.local_checkpoints():
        bert = pretrained.load("all-MiniLM-L6-v2")
        out = bert.run("a cat", "torch", head_outputs=True)
        assert out.hidden_states.shape[0] == bert.config.num_hidden_layers + 1
        np.testing.assert_array_equal(out.hidden_states[-1], out.last_hidden_state)
        with pytest.raises(SpecError) as err:
            bert.logit_lens(out)
        assert err.value.field == "logit_lens"


def test_run_ids_checks_the_ids(gpt):
    out = gpt.run_ids(gpt.encode(CLEAN)[0], "torch")
    np.testing.assert_array_equal(out.logits, gpt.run(CLEAN, "torch").logits)
    for ids in ([], [gpt.n_tokens], [-1], [1.5], "1 2", list(range(33))):
        with pytest.raises(SpecError) as err:
            gpt.run_ids(ids)
        assert err.value.field == "ids"
