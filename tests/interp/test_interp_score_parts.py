"""A head's pre-softmax score taken apart (`attnviz.interp.score_table`): the table of (query part ×
key part) terms sums to the score, and the score is transformers'.

Tiny random GPT-2 (biases, LayerNorm, learned positions), Llama (RoPE, GQA, RMSNorm) and Gemma 3
(QK-norm, sandwich norms, √D embeddings, local layers with a 5-token window) are built here as
tests/pretrained/test_gpt2.py, tests/pretrained/test_llama.py and tests/pretrained/test_gemma3.py build them. The oracle is
transformers with eager attention, its attention function wrapped to keep `query · keyᵀ · scaling`
(the pre-softmax score, after RoPE and QK-norm) and hooks on the output projection keeping each
head's output:

- float32: attnviz's run in either framework, its table against its own score (1e-5 relative to the
  row's largest score) and that score against transformers' (`RTOL_MODEL`);
- float64: transformers' model in float64, its residual stream and head outputs split by the same
  pure function (`table.terms`), the table's sum against transformers' float64 score (1e-10).

SmolLM2 (slow): the packaged weights in transformers' `LlamaForCausalLM` (tests/pretrained/test_smollm2.py
proves them equal to transformers' own GGUF loading).
"""

import contextlib

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.errors import SpecError
from attnviz.interp import score_parts, score_row
from attnviz.interp.score_table import table, words
from tests.conftest import RTOL_F32, RTOL_F64, RTOL_MODEL, assert_close, rel_err, requires
from tests.pretrained.test_gemma3 import tiny_gemma
from tests.pretrained.test_gpt2 import make_tiny_gpt2
from tests.pretrained.test_llama import make_tiny_llama, tiny_tokenizer

transformers = pytest.importorskip("transformers", reason="transformers (the oracle) is not installed")
torch = pytest.importorskip("torch")

FRAMEWORKS = [pytest.param("torch"), pytest.param("tensorflow", marks=requires("tensorflow"))]
TEXT = "The cat sat on the mat because the cat was tired."
# family → (the class transformers loads, its modeling module's name, the attention output projection)
FAMILIES = {
    "gpt2": (transformers.GPT2LMHeadModel, "gpt2", lambda m, i: m.transformer.h[i].attn.c_proj),
    "llama": (transformers.LlamaForCausalLM, "llama", lambda m, i: m.model.layers[i].self_attn.o_proj),
    "gemma": (transformers.Gemma3ForCausalLM, "gemma3", lambda m, i: m.model.layers[i].self_attn.o_proj),
}


def make_tiny_gemma(folder):
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = tiny_tokenizer()
    tokenizer.save(str(folder / "tokenizer.json"))
    tiny_gemma(tokenizer.get_vocab_size()).save_pretrained(folder, safe_serialization=True)
    return folder


MAKERS = {"gpt2": make_tiny_gpt2, "llama": make_tiny_llama, "gemma": make_tiny_gemma}


@contextlib.contextmanager
def recording(model, family: str, scores: dict, heads: dict):
    """transformers' eager attention, wrapped: `scores[layer] (H, T, T)` = query · keyᵀ · scaling as
    its eager attention computes it, `heads[layer] (H, T, Dh)` = what its output projection reads."""
    module = __import__(
        f"transformers.models.{FAMILIES[family][1]}.modeling_{FAMILIES[family][1]}", fromlist=["x"]
    )
    eager = module.eager_attention_forward

    def wrapped(attention, query, key, value, mask, *args, scaling=None, **kwargs):
        key_states = key.repeat_interleave(query.shape[1] // key.shape[1], dim=1)  # (1, H, T, Dh)
        scores[attention.layer_idx] = (query @ key_states.transpose(2, 3) * scaling)[0].numpy()
        return eager(attention, query, key, value, mask, *args, scaling=scaling, **kwargs)

    def keep(layer):
        return lambda _, inputs: heads.__setitem__(layer, inputs[0][0].numpy())  # (T, H·Dh)

    n = model.config.num_hidden_layers
    hooks = [FAMILIES[family][2](model, i).register_forward_pre_hook(keep(i)) for i in range(n)]
    module.eager_attention_forward = wrapped
    try:
        yield
    finally:
        module.eager_attention_forward = eager
        for hook in hooks:
            hook.remove()


@contextlib.contextmanager
def float64_throughout(model):
    """transformers computes two things in float32 even in a float64 model (`.float()` in its
    rotary embedding and its RMSNorms: ~1e-7 off); its float64 run here computes them in float64 by
    the same formulas: RoPE's `cos`, `sin` of position · base^(−2i/Dh) (each half repeated), and
    `x / √(mean(x²) + eps) · w` (Gemma: `· (1 + w)`)."""
    cfg, patched = model.config, []

    def rope(x, position_ids, layer_type=None):
        params = cfg.rope_parameters if layer_type is None else cfg.rope_parameters[layer_type]
        angle = params["rope_theta"] ** (
            -torch.arange(0, cfg.head_dim, 2, dtype=torch.float64) / cfg.head_dim
        )
        freqs = position_ids[..., None].double() * angle  # (1, T, Dh/2)
        both = torch.cat((freqs, freqs), dim=-1)  # (1, T, Dh)
        return both.cos().to(x.dtype), both.sin().to(x.dtype)

    def rms(norm):
        eps = getattr(norm, "variance_epsilon", getattr(norm, "eps", None))
        offset = 1.0 if type(norm).__name__.startswith("Gemma") else 0.0
        return lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (offset + norm.weight)

    for module in model.modules():
        if type(module).__name__.endswith("RotaryEmbedding"):
            module.forward = rope
        elif type(module).__name__.endswith("RMSNorm"):
            module.forward = rms(module)
        else:
            continue
        patched.append(module)
    try:
        yield
    finally:
        for module in patched:
            del module.forward


def oracle_run(model, family: str, ids: list[int], dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """transformers in `dtype`: `hidden (L + 1, T, D)`, `heads (L, H, T, Dh)`, `scores (L, H, T, T)`."""
    scores, heads = {}, {}
    model = model.to(dtype)
    exact = float64_throughout(model) if dtype == torch.float64 else contextlib.nullcontext()
    with recording(model, family, scores, heads), exact, torch.no_grad():
        out = model(torch.tensor([ids]), output_hidden_states=True)
    n, H = model.config.num_hidden_layers, model.config.num_attention_heads
    z = np.stack([heads[i].reshape(len(ids), H, -1).transpose(1, 0, 2) for i in range(n)])
    hidden = np.stack([h[0].numpy() for h in out.hidden_states])
    return hidden, z, np.stack([scores[i] for i in range(n)])


@pytest.fixture(scope="module", params=list(FAMILIES))
def tiny(request, tmp_path_factory):
    """(family, attnviz's checkpoint, transformers' model, the text's ids) for one tiny family."""
    family = request.param
    folder = MAKERS[family](tmp_path_factory.mktemp(family))
    model = FAMILIES[family][0].from_pretrained(str(folder), attn_implementation="eager").eval()
    ckpt = pretrained.load(folder)
    return family, ckpt, model, ckpt.encode(TEXT)[0]


def layers(ckpt) -> list[int]:
    """Layer 0 (parts: the embedding alone), the last layer, and Gemma's global layer."""
    L = ckpt.config.num_hidden_layers
    return sorted(
        {0, L - 1, *(i for i in range(L) if getattr(ckpt.config, "is_local", lambda _: True)(i) is False)}
    )


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_table_sums_to_the_score_and_the_score_is_transformers(tiny, framework):
    family, ckpt, model, ids = tiny
    expected = oracle_run(model, family, ids, torch.float32)[2]  # (L, H, T, T)
    run = ckpt.run(TEXT, framework, head_outputs=True)  # every key's table, from the pure split
    H, query = ckpt.config.num_attention_heads, len(ids) - 2
    for layer in layers(ckpt):
        for head in range(H):
            row = score_row(ckpt, TEXT, layer, head, query, framework)
            q, k, scale = table.terms(ckpt, run.hidden_states, run.head_outputs, layer, head, query, row.keys)
            sums = scale * np.einsum("ad,bnd->n", q.vectors[:, 0], k.vectors)  # (n,)
            what = f"{family} L{layer}.H{head}"
            assert_close(sums, row.scores, RTOL_F32, f"{what}: table sums vs scores")
            assert_close(row.scores, expected[layer, head, query, row.keys], RTOL_MODEL[framework], what)
            assert abs(row.parts.total - row.parts.score) <= RTOL_F32 * np.abs(row.scores).max()
    one = score_parts(ckpt, TEXT, layer, head, query, int(row.keys[0]), framework)
    assert one.score == pytest.approx(float(row.scores[0]), rel=1e-6)
    assert abs(one.total - one.score) <= RTOL_F32 * np.abs(row.scores).max()
    assert one.table.shape == (len(one.query_parts), len(one.key_parts))


def test_float64_table_sums_to_transformers_float64_score(tiny):
    """The split is exact: on transformers' own float64 run, the table's sum is its score to 1e-10."""
    family, ckpt, model, ids = tiny
    hidden, heads, scores = oracle_run(model, family, ids, torch.float64)
    model.to(torch.float32)
    query = len(ids) - 1
    for layer in layers(ckpt):
        keys = table._visible(ckpt, layer, query)
        for head in range(ckpt.config.num_attention_heads):
            q, k, scale = table.terms(ckpt, hidden, heads, layer, head, query, keys)
            sums = scale * np.einsum("ad,bnd->n", q.vectors[:, 0], k.vectors)  # (n,) every term, summed
            assert_close(sums, scores[layer, head, query, keys], RTOL_F64, f"{family} L{layer}.H{head}")


def test_parts_are_named_by_family(tiny):
    family, ckpt, _, _ = tiny
    L, H = ckpt.config.num_hidden_layers, ckpt.config.num_attention_heads
    parts = score_parts(ckpt, TEXT, L - 1, 0, 3, 1)
    heads = [f"L{a}.H{b}" for a in range(L - 1) for b in range(H)]
    assert set(heads) <= set(parts.query_parts) and parts.query_parts == parts.key_parts
    assert {f"L{a}.mlp" for a in range(L - 1)} <= set(parts.key_parts)
    gpt2 = {"pos", "bias", "L0.attn_bias"}
    assert gpt2 <= set(parts.key_parts) if family == "gpt2" else not gpt2 & set(parts.key_parts)
    assert (
        score_parts(ckpt, TEXT, 0, 0, 3, 1).key_parts == ["embed", "pos", "bias"]
        if family == "gpt2"
        else ["embed"]
    )


def test_lift_sums_to_the_log_weight_plus_the_entropy(tiny):
    """`lift` (which parts move the weight onto the picked key) adds up to log w_picked + H(w)."""
    _, ckpt, _, ids = tiny
    row = score_row(ckpt, TEXT, ckpt.config.num_hidden_layers - 1, 1, len(ids) - 1)
    w = row.weights
    assert row.picked == row.keys[np.argmax(w)] == row.parts.key
    entropy = -(w * np.log(np.maximum(w, 1e-30))).sum()
    assert row.lift.sum() == pytest.approx(np.log(w[np.argmax(w)]) + entropy, rel=1e-4, abs=1e-5)
    other = score_row(ckpt, TEXT, ckpt.config.num_hidden_layers - 1, 1, len(ids) - 1, key=int(row.keys[0]))
    assert other.picked == row.keys[0] and rel_err(other.lift.sum(), np.log(w[0]) + entropy) < 1e-4


@pytest.mark.parametrize("tiny", ["gemma"], indirect=True)
def test_a_local_layer_sees_its_window_only(tiny):
    _, ckpt, _, ids = tiny
    query, window = len(ids) - 1, ckpt.config.sliding_window
    row = score_row(ckpt, TEXT, 0, 0, query)
    assert list(row.keys) == list(range(query - window + 1, query + 1))
    with pytest.raises(SpecError) as refused:
        score_parts(ckpt, TEXT, 0, 0, query, 0)
    assert refused.value.field == "key"


@pytest.mark.parametrize(
    ("args", "field"),
    [((9, 0, 2, 1), "layer"), ((0, 7, 2, 1), "head"), ((0, 0, 99, 1), "query"), ((0, 0, 2, 3), "key"),
     ((0, 0, -1, 0), "query"), ((0, True, 2, 1), "head")],
)  # fmt: skip
def test_bad_positions_are_refused_by_name(tiny, args, field):
    with pytest.raises(SpecError) as refused:
        score_parts(tiny[1], TEXT, *args)
    assert refused.value.field == field


def test_largest_terms_in_words(tiny):
    _, ckpt, _, ids = tiny
    parts = score_parts(ckpt, TEXT, ckpt.config.num_hidden_layers - 1, 0, len(ids) - 1, len(ids) - 3)
    said = words.largest(parts, 3)
    order = np.argsort(-np.abs(parts.table), axis=None)[:3]
    assert len(said) == 3
    for sentence, flat in zip(said, order, strict=True):
        a, b = np.unravel_index(flat, parts.table.shape)
        assert f"{parts.table[a, b]:+.2f}" in sentence and f"of the score {parts.score:.2f}" in sentence
        assert "at the key × " in sentence and sentence.endswith(".")
    assert words.part_words("embed", " Mary") == "the embedding of ' Mary'"
    assert words.part_words("L3.H5", "x") == "L3.H5's output"


def test_the_condensed_table_keeps_the_largest_parts_and_the_sum(tiny):
    _, ckpt, _, ids = tiny
    parts = score_parts(ckpt, TEXT, ckpt.config.num_hidden_layers - 1, 0, len(ids) - 1, len(ids) - 3)
    rows, cols, shown = words.condensed(parts.table, parts.query_parts, parts.key_parts, 3)
    assert shown.shape == (len(rows), len(cols)) == (4, 4) and rows[-1] == cols[-1] == words.REST
    assert shown.sum() == pytest.approx(parts.table.sum(), rel=1e-12, abs=1e-12)
    size = np.abs(parts.table).sum(1)
    assert set(rows[:-1]) == {parts.query_parts[i] for i in np.argsort(-size)[:3]}
    whole = words.condensed(parts.table, parts.query_parts, parts.key_parts, 99)
    assert whole[0] == parts.query_parts and np.array_equal(whole[2], parts.table)
