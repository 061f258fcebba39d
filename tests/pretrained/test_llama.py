"""attnviz's Llama decoder reproduces transformers' LlamaForCausalLM, from a folder and from a GGUF file.

The checkpoints are made here: a tiny random Llama (`transformers.LlamaConfig`: 2 layers, 4 query
heads sharing 2 K/V heads, RoPE, no biases, tied or untied embeddings) saved with safetensors, a
byte-level BPE `tokenizer.json` trained here with `tokenizers`, and the same model written as a
GGUF file with the `gguf` package the way llama.cpp's converter writes one (Q8_0 matrices, F32
norms, q/k rows permuted per head, tokenizer and chat template in the metadata). The oracles are
transformers (eager attention) reading the folder, and transformers' own GGUF loader reading
the file.
"""

import json
import subprocess
import sys
import threading

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.errors import SpecError
from attnviz.exec.monitor import Monitor
from attnviz.pretrained import chat, gguf
from attnviz.pretrained.files import CheckpointError
from tests.conftest import RTOL_MODEL, assert_close, requires

transformers = pytest.importorskip("transformers", reason="transformers (the oracle) is not installed")
torch = pytest.importorskip("torch")
gguf_package = pytest.importorskip("gguf", reason="the gguf package (dev extra) is not installed")

LINES = [
    "The cat sat on the mat because it was tired.",
    "The quick brown fox jumps over the lazy dog.",
    "Der schnelle braune Fuchs springt über den faulen Hund.",
]
TEXTS = ["The cat sat on the mat.", "a", "naïve café 🙂", "the the the the cat cat"]
RTOL = RTOL_MODEL
FRAMEWORKS = [pytest.param("torch"), pytest.param("tensorflow", marks=requires("tensorflow"))]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# llama.cpp tensor names (after "blk.N.") for transformers' (after "model.layers.N.")
GGUF_NAMES = {
    "input_layernorm": "attn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def tiny_tokenizer():
    from tokenizers import ByteLevelBPETokenizer

    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(
        LINES * 3, vocab_size=300, min_frequency=1, special_tokens=SPECIALS, show_progress=False
    )
    return tokenizer


def tiny_llama(*, tie: bool = True, seed: int = 0, vocab: int = 300):
    """A random `LlamaForCausalLM` with GQA (4 query heads, 2 K/V heads of width 16) and RoPE."""
    config = transformers.LlamaConfig(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        rope_theta=10000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=tie,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():
        for name, p in model.named_parameters():  # wide enough that attention is far from uniform
            p.copy_(
                1 + 0.2 * torch.randn_like(p) if name.endswith("norm.weight") else 0.3 * torch.randn_like(p)
            )
    return model.eval()


def make_tiny_llama(folder, *, tie: bool = True, seed: int = 0):
    """The tiny Llama saved as a transformers folder: config.json, model.safetensors, tokenizer.json."""
    tokenizer = tiny_tokenizer()
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    tiny_llama(tie=tie, seed=seed, vocab=tokenizer.get_vocab_size()).save_pretrained(
        folder, safe_serialization=True
    )
    return folder


def llama_cpp_permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's `convert_hf_to_gguf.py` (`LlamaModel.permute`): q/k rows reordered per head."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def make_tiny_gguf(file, model, tokenizer, *, pre: str = "default"):
    """`model` written as llama.cpp writes a Llama GGUF: Q8_0 matrices, F32 norms, q/k permuted."""
    cfg, Q8 = model.config, gguf_package.GGMLQuantizationType.Q8_0
    w = gguf_package.GGUFWriter(str(file), "llama")
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_dimension_count(cfg.head_dim)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
    w.add_token_list([t for t, _ in vocab])
    w.add_token_types([3 if t in SPECIALS else 1 for t, _ in vocab])
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in merges])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_chat_template(TEMPLATE)
    heads = {"attn_q": cfg.num_attention_heads, "attn_k": cfg.num_key_value_heads}
    for name, value in model.state_dict().items():
        a = value.numpy().astype(np.float32)
        if name == "lm_head.weight" and cfg.tie_word_embeddings:
            continue
        if name.startswith("model.layers."):
            _, _, i, rest = name.split(".", 3)
            kind = GGUF_NAMES[rest.rsplit(".", 1)[0]]
            a = llama_cpp_permute(a, heads[kind]) if kind in heads else a
            name = f"blk.{i}.{kind}.weight"
        else:
            name = {
                "model.embed_tokens.weight": "token_embd.weight",
                "model.norm.weight": "output_norm.weight",
            }.get(name, "output.weight")
        if a.ndim == 2:
            w.add_tensor(name, gguf_package.quants.quantize(a, Q8), raw_dtype=Q8)
        else:
            w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return file


@pytest.fixture(scope="module", params=[True, False], ids=["tied", "untied"])
def folder(request, tmp_path_factory):
    return make_tiny_llama(tmp_path_factory.mktemp("tiny-llama"), tie=request.param)


@pytest.fixture(scope="module")
def checkpoint(folder):
    return pretrained.load(folder)


def oracle_run(model, ids):
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    return {
        "attentions": torch.stack(out.attentions)[:, 0].numpy(),
        "logits": out.logits[0].numpy(),
        "hidden_states": torch.stack(out.hidden_states[:-1])[:, 0].numpy(),  # entering each block
        "last_hidden_state": out.hidden_states[-1][0].numpy(),  # after the final norm
    }


@pytest.fixture(scope="module")
def oracle(folder):
    model = transformers.LlamaForCausalLM.from_pretrained(str(folder), attn_implementation="eager").eval()
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"))

    def run(text):
        ids = tokenizer(text)["input_ids"]
        return {"ids": ids, "tokens": tokenizer.convert_ids_to_tokens(ids), **oracle_run(model, ids)}

    run.model = model
    return run


# -- the folder -------------------------------------------------------------------------------


def test_config_reads_the_family(checkpoint, folder):
    cfg = checkpoint.config
    assert (cfg.model_type, cfg.kind, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim) == (
        "llama",
        "decoder",
        4,
        2,
        16,
    )
    assert cfg.tie_word_embeddings == json.loads((folder / "config.json").read_text())["tie_word_embeddings"]
    params = checkpoint.layer_params(0)
    assert params["W_q"].shape == (64, 64) and params["W_k"].shape == params["W_v"].shape == (64, 32)
    assert not any(name.startswith("b_") for name in params)  # no biases


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("text", TEXTS)
def test_matches_llama_for_causal_lm(checkpoint, oracle, framework, text):
    expected = oracle(text)
    out = checkpoint.run(text, framework)
    assert out.ids == expected["ids"] and out.tokens == expected["tokens"]  # tokens identical
    for name in ("attentions", "logits", "last_hidden_state"):
        assert_close(getattr(out, name), expected[name], RTOL[framework], f"{framework} {name}")
    assert_close(out.hidden_states[:-1], expected["hidden_states"], RTOL[framework], "residual stream")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_rotated_q_and_k_match_transformers_rope(checkpoint, oracle, framework):
    """The neuron view's q and k are after RoPE: transformers' `apply_rotary_pos_emb` on the
    layer's projections gives the same, and the repeated K heads follow `repeat_kv`."""
    from transformers.models.llama import modeling_llama as ml

    text = TEXTS[0]
    out = checkpoint.run(text, framework, capture_layer=1)
    steps = {s.name: s.value for s in out.steps}
    layer = oracle.model.model.layers[1]
    x = torch.from_numpy(oracle(text)["hidden_states"][1])[None]  # entering block 1
    with torch.no_grad():
        h = layer.input_layernorm(x)
        T = h.shape[1]
        q = layer.self_attn.q_proj(h).view(1, T, 4, 16).transpose(1, 2)
        k = layer.self_attn.k_proj(h).view(1, T, 2, 16).transpose(1, 2)
        cos, sin = oracle.model.model.rotary_emb(h, torch.arange(T)[None])
        q, k = ml.apply_rotary_pos_emb(q, k, cos, sin)
    assert_close(steps["q_rope"], q.numpy(), RTOL[framework], "q after RoPE")
    assert_close(steps["k_rope"], k.numpy(), RTOL[framework], "k after RoPE")
    assert_close(steps["k_repeated"], ml.repeat_kv(k, 2).numpy(), RTOL[framework], "K heads repeated")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_neuron_view_shows_rotated_q_and_the_shared_k(checkpoint, framework):
    """Every query head's q·k in the neuron view is the score the model used: q after RoPE,
    k after RoPE from the K/V head the query head shares (head h reads K/V head h // 2)."""
    from attnviz.interp.neuron import neuron_view

    out = checkpoint.run(TEXTS[0], framework, capture_layer=1)
    k_rope = {s.name: s.value for s in out.steps}["k_rope"]  # (1, Hkv, T, Dh)
    for head in range(4):
        view = neuron_view(out.steps, head, query=5)
        assert_close(view.qk.sum(-1), view.scores, RTOL[framework], "q·k against the recorded scores")
        assert_close(view.weights, out.attentions[1, head, 5], RTOL[framework], "the softmax row")
        assert np.array_equal(view.k, k_rope[0, head // 2])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_ablation_matches_weight_surgery(checkpoint, oracle, framework):
    """Zeroing head 3 of layer 0 equals zeroing its columns of `o_proj` in transformers."""
    text = TEXTS[0]
    expected_ids = oracle(text)["ids"]
    model = transformers.LlamaForCausalLM.from_pretrained(
        str(checkpoint.path), attn_implementation="eager"
    ).eval()
    with torch.no_grad():
        model.model.layers[0].self_attn.o_proj.weight[:, 3 * 16 : 4 * 16] = 0
    expected = oracle_run(model, expected_ids)
    out = checkpoint.run(text, framework, ablate={(0, 3): "zero"})
    assert_close(out.logits, expected["logits"], RTOL[framework], "ablated logits")
    assert_close(
        out.attentions[1], expected["attentions"][1], RTOL[framework], "attention after the ablation"
    )


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_head_outputs_patching_and_logit_lens_match_transformers_hooks(checkpoint, oracle, framework):
    """Issue 18's protocol on a Llama: each head's output is the input of `o_proj` (read with a
    forward pre-hook), a patched head equals writing `z` into that input, and the logit lens is
    the final norm and the unembedding on each residual-stream entry."""
    text, model = TEXTS[0], oracle.model
    ids = oracle(text)["ids"]
    seen, z = {}, np.random.default_rng(0).standard_normal((len(ids), 16)).astype(np.float32)

    def keep(layer):
        return lambda module, args: seen.__setitem__(layer, args[0][0].numpy().copy())

    hooks = [
        layer.self_attn.o_proj.register_forward_pre_hook(keep(i))
        for i, layer in enumerate(model.model.layers)
    ]
    try:
        expected = oracle_run(model, ids)
    finally:
        for hook in hooks:
            hook.remove()
    out = checkpoint.run(text, framework, head_outputs=True)
    heads = np.stack([seen[i].reshape(len(ids), 4, 16).transpose(1, 0, 2) for i in range(2)])  # (L, H, T, Dh)
    assert_close(out.head_outputs, heads, RTOL[framework], "head outputs")
    lens = checkpoint.logit_lens(out)
    assert_close(lens[-1], expected["logits"], RTOL[framework], "lens of the last entry")
    with torch.no_grad():
        final = model.model.norm(torch.from_numpy(expected["hidden_states"][1]))
        assert_close(lens[1], model.lm_head(final).numpy(), RTOL[framework], "lens of layer 1's input")

    def patch(module, args):
        x = args[0].clone()
        x[0, :, 2 * 16 : 3 * 16] = torch.from_numpy(z)  # head 2 of layer 0
        return (x,)

    hook = model.model.layers[0].self_attn.o_proj.register_forward_pre_hook(patch)
    try:
        patched = oracle_run(model, ids)
    finally:
        hook.remove()
    got = checkpoint.run(text, framework, patch={(0, 2): z})
    assert_close(got.logits, patched["logits"], RTOL[framework], "patched logits")


def test_greedy_generation_matches_transformers(checkpoint, oracle):
    text = "The cat"
    ids = oracle(text)["ids"]
    with torch.no_grad():
        expected = oracle.model.generate(
            torch.tensor([ids]), max_new_tokens=8, do_sample=False, pad_token_id=0, eos_token_id=None
        )[0].tolist()
    got = checkpoint.generate(text, "torch", max_new_tokens=8, temperature=0)
    assert got.output.ids == expected


BAD_CONFIGS = [
    ("attention_bias", True, "attention_bias"),
    ("mlp_bias", True, "mlp_bias"),
    ("hidden_act", "gelu", "hidden_act"),
    ("num_key_value_heads", 3, "num_key_value_heads"),
    ("head_dim", 15, "head_dim"),
    ("rope_scaling", {"rope_type": "llama3", "factor": 8.0}, "rope_scaling.rope_type"),
    ("rope_parameters", {"rope_type": "yarn", "rope_theta": 1e4}, "rope_parameters.rope_type"),
    ("rope_parameters", {"rope_type": "default", "rope_theta": -1}, "rope_theta"),
    ("rms_norm_eps", 0, "rms_norm_eps"),
    ("num_hidden_layers", 10**9, "num_hidden_layers"),
]


@pytest.mark.parametrize(("name", "value", "field"), BAD_CONFIGS, ids=[f"{b[0]}={b[1]}" for b in BAD_CONFIGS])
def test_bad_config_is_refused_with_the_field(folder, tmp_path, name, value, field):
    for file in ("model.safetensors", "tokenizer.json"):
        (tmp_path / file).symlink_to(folder / file)
    data = json.loads((folder / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**data, name: value}))
    with pytest.raises(CheckpointError) as error:
        pretrained.load(tmp_path)
    assert error.value.field == field and error.value.file == "config.json"


# -- GGUF -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-gguf")
    tokenizer = tiny_tokenizer()
    model = tiny_llama(seed=1, vocab=tokenizer.get_vocab_size())
    return make_tiny_gguf(folder / "tiny.Q8_0.gguf", model, tokenizer)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(gguf.ENV_CACHE_DIR, str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def gguf_oracle(tiny_gguf):
    kw = {"gguf_file": tiny_gguf.name}
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(tiny_gguf.parent), attn_implementation="eager", **kw
    ).eval()
    return model, transformers.AutoTokenizer.from_pretrained(str(tiny_gguf.parent), **kw)


def test_unpermute_inverts_llama_cpp_permute():
    w = np.random.default_rng(0).standard_normal((9 * 64, 576)).astype(np.float32)
    for heads in (9, 3, 1):
        rows = w[: heads * 64]
        assert np.array_equal(gguf.unpermute(llama_cpp_permute(rows, heads), heads), rows)
        assert not np.array_equal(llama_cpp_permute(rows, heads), rows)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_gguf_matches_transformers_gguf_loading(tiny_gguf, gguf_oracle, cache_dir, framework):
    model, tokenizer = gguf_oracle
    checkpoint = pretrained.load(tiny_gguf)
    for text in TEXTS:
        ids = tokenizer(text)["input_ids"]
        out = checkpoint.run(text, framework)
        assert out.ids == ids and out.tokens == tokenizer.convert_ids_to_tokens(ids)
        expected = oracle_run(model, ids)
        for name in ("attentions", "logits"):
            assert_close(getattr(out, name), expected[name], RTOL[framework], f"{framework} {name}")


def test_gguf_chat_template_renders_as_transformers(tiny_gguf, gguf_oracle, cache_dir):
    _, tokenizer = gguf_oracle
    checkpoint = pretrained.load(tiny_gguf)
    messages = [{"role": "user", "content": "Where is the cat?"}]
    expected = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert chat.prompt(checkpoint, "Where is the cat?") == expected
    assert checkpoint.encode(expected)[2][0] == "<|im_start|>"  # a special token, not split


def test_conversion_is_reused_and_rebuilt_when_damaged(tiny_gguf, cache_dir):
    calls = []
    folder = gguf.converted(tiny_gguf, monitor=Monitor(lambda done, total, _: calls.append((done, total))))
    assert calls[-1][0] == calls[-1][1] == len(calls)  # progress to the last tensor
    assert sorted(p.name for p in folder.iterdir()) == sorted([*gguf.FILES, gguf.MANIFEST])
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".converting-")]
    calls.clear()
    assert (
        gguf.converted(tiny_gguf, monitor=Monitor(lambda *a: calls.append(a))) == folder and not calls
    )  # reused
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])  # a damaged cache
    assert gguf.converted(tiny_gguf, monitor=Monitor(lambda *a: calls.append(a))) == folder and calls
    assert pretrained.load(tiny_gguf).config.num_key_value_heads == 2


def test_a_card_converts_no_weights_and_the_whole_conversion_completes_its_folder(tiny_gguf, cache_dir):
    """A page's card (issue 41 point 2): the configuration and tokenizer only, nothing dequantised —
    the server once held Gemma 3's 1 GB for this; then the worker's load completes the same folder."""
    from attnviz.pretrained.loaded import CACHE, CARDS

    CACHE.clear(), CARDS.clear()  # kept from another test's cache folder, keyed by the same file
    calls = []
    folder = gguf.converted(tiny_gguf, weights=False, monitor=Monitor(lambda *a: calls.append(a)))
    assert not calls and sorted(p.name for p in folder.iterdir()) == sorted([*gguf.CARD_FILES, gguf.MANIFEST])
    card = pretrained.load(tiny_gguf, weights=False)
    assert card.is_card and card.path == folder
    # What a worker does with the card's folder (the source a page hands it): the weights, converted
    # from the file the folder's manifest names, into the same folder.
    whole = pretrained.load(str(folder))
    assert whole.path == folder and (folder / "model.safetensors").is_file() and not whole.is_card
    assert (card.config, card.encode("the cat")) == (whole.config, whole.encode("the cat"))
    calls.clear()
    assert gguf.converted(tiny_gguf, weights=False, monitor=Monitor(lambda *a: calls.append(a))) == folder
    assert not calls  # a whole conversion serves a card as it is


def test_several_sessions_convert_once(tiny_gguf, cache_dir, monkeypatch):
    """Threads of one server and separate processes asking at once: one conversion."""
    conversions, real_write = [], gguf._write

    def counted(*args, **kwargs):
        conversions.append(1)
        return real_write(*args, **kwargs)

    monkeypatch.setattr(gguf, "_write", counted)
    folders = []
    threads = [threading.Thread(target=lambda: folders.append(gguf.converted(tiny_gguf))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(conversions) == 1 and len(set(folders)) == 1 and len(folders) == 4

    other = cache_dir.parent / "other-cache"
    code = (
        "import sys; from attnviz.exec.monitor import Monitor; from attnviz.pretrained import gguf; n = []; "
        "gguf.converted(sys.argv[1], monitor=Monitor(lambda d, t, _: n.append(d))); print(len(n))"
    )
    env = {**__import__("os").environ, gguf.ENV_CACHE_DIR: str(other)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(tiny_gguf)], stdout=subprocess.PIPE, env=env, text=True
        )
        for _ in range(2)
    ]
    counts = sorted(int(p.communicate(timeout=120)[0]) for p in procs)
    assert [p.returncode for p in procs] == [0, 0]
    assert counts[0] == 0 and counts[1] > 0  # one process converted, the other reused its folder


def test_an_unwritable_cache_is_a_spec_error_naming_the_setting(tiny_gguf, tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv(gguf.ENV_CACHE_DIR, str(tmp_path / "a-file" / "cache"))
    pretrained.CACHE.clear()  # loaded by an earlier test: convert again
    with pytest.raises(SpecError) as error:
        pretrained.load(tiny_gguf)
    assert error.value.field == gguf.ENV_CACHE_DIR and str(tmp_path) not in str(error.value)


@pytest.mark.parametrize(
    "content", [b"", b"GGUF", b"not a gguf file at all" * 10, b"GGUF\x03\x00\x00\x00" + b"\xff" * 64]
)
def test_a_broken_gguf_is_a_checkpoint_error(tmp_path, cache_dir, content):
    file = tmp_path / "broken.gguf"
    file.write_bytes(content)
    with pytest.raises(CheckpointError):
        pretrained.load(file)


def test_gguf_of_another_architecture_is_refused(tmp_path, cache_dir):
    w = gguf_package.GGUFWriter(str(tmp_path / "bert.gguf"), "bert")
    w.add_tensor("token_embd.weight", np.zeros((4, 8), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(CheckpointError) as error:
        pretrained.load(tmp_path / "bert.gguf")
    assert error.value.field == "general.architecture"
