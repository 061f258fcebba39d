"""Cache policies (`attnviz.kernels.streaming`) against transformers with the same eviction written here.

The oracle is transformers (eager attention) run one token at a time over a `DynamicCache` built
from the keys and values this test keeps: the new token at cache position n (the cache's length),
an explicit mask (a local layer sees the last `sliding_window` cache positions), and after each
token the eviction: the first S keys and the last W kept, the window's keys turned back one
position with transformers' own rotary embedding and `apply_rotary_pos_emb` (the paper's
re-positioning done by repeated turns; attnviz turns each key once from the key as it entered).
Models: the tiny random Llama of `tests/pretrained/test_llama.py` and Gemma 3 of `tests/pretrained/test_gemma3.py` (local
layers with a 5-token window), and SmolLM2 for the full cache (slow).
"""

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.errors import SpecError
from attnviz.exec.monitor import Monitor
from attnviz.kernels import streaming
from attnviz.lessons import checkpoints
from tests.conftest import requires
from tests.pretrained.test_gemma3 import tiny_gemma
from tests.pretrained.test_llama import make_tiny_llama

transformers = pytest.importorskip("transformers", reason="transformers (the oracle) is not installed")
torch = pytest.importorskip("torch")

FRAMEWORKS = [pytest.param("torch"), pytest.param("tensorflow", marks=requires("tensorflow"))]
TEXT = "The cat sat on the mat because it was tired. The quick brown fox jumps over the dog."
POLICIES = [(None, 0), (7, 0), (6, 2)]  # (window, sinks)
ATOL = 1e-4  # nats, float32 against float32


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    folder = make_tiny_llama(tmp_path_factory.mktemp("llama"))
    model = transformers.LlamaForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    return pretrained.load(folder), model


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    from tests.pretrained.test_gpt2 import make_tiny_gpt2

    folder = tmp_path_factory.mktemp("gpt2")
    make_tiny_gpt2(folder, n_positions=64)
    model = transformers.GPT2LMHeadModel.from_pretrained(folder, attn_implementation="eager").eval()
    return pretrained.load(folder), model


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    from tokenizers import ByteLevelBPETokenizer

    folder = tmp_path_factory.mktemp("gemma3")
    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator([TEXT] * 3, vocab_size=300, min_frequency=1, show_progress=False)
    tokenizer.save(str(folder / "tokenizer.json"))
    model = tiny_gemma(tokenizer.get_vocab_size())
    model.save_pretrained(folder, safe_serialization=True)
    return pretrained.load(folder), model


class Oracle:
    """transformers' model read one token at a time over a cache this test evicts by hand."""

    def __init__(self, model, window, sinks):
        self.model, self.window, self.sinks = model, window, sinks
        self.config = model.config
        self.types = (
            getattr(self.config, "layer_types", None) or ["full_attention"] * self.config.num_hidden_layers
        )
        self.kv = None  # L × (keys, values) (1, Hkv, n, Dh)

    def _mask(self, n: int, kind: str) -> torch.Tensor:
        """`(1, 1, 1, n + 1)` additive: 0 where the new query (at n) may attend, the dtype's min elsewhere."""
        j = torch.arange(n + 1)
        near = (
            (n - j < self.config.sliding_window)
            if kind == "sliding_attention"
            else torch.ones(n + 1, dtype=bool)
        )
        return torch.where(near, 0.0, torch.finfo(torch.float32).min)[None, None, None]

    @torch.no_grad()
    def step(self, token: int) -> np.ndarray:
        n = 0 if self.kv is None else self.kv[0][0].shape[2]
        past = transformers.DynamicCache(ddp_cache_data=self.kv) if self.kv else transformers.DynamicCache()
        masks = {kind: self._mask(n, kind) for kind in set(self.types)}
        mask = (
            masks
            if hasattr(self.config, "layer_types") and "gemma" in self.config.model_type
            else masks["full_attention"]
        )
        out = self.model(
            torch.tensor([[token]]),
            position_ids=torch.tensor([[n]]),
            attention_mask=mask,
            cache=past,
            use_cache=True,
        )
        self.kv = [(layer.keys, layer.values) for layer in out.past_key_values.layers]
        self._evict()
        return out.logits[0, -1].double().numpy()

    def _evict(self):
        if self.window is None or self.kv[0][0].shape[2] <= self.window + self.sinks:
            return
        S, kept = self.sinks, []
        for (k, v), kind in zip(self.kv, self.types, strict=True):
            k, v = (
                torch.cat([k[:, :, :S], k[:, :, S + 1 :]], 2),
                torch.cat([v[:, :, :S], v[:, :, S + 1 :]], 2),
            )
            kept.append((torch.cat([k[:, :, :S], self._back_one(k[:, :, S:], kind)], 2), v))
        self.kv = kept

    def _back_one(self, k: torch.Tensor, kind: str) -> torch.Tensor:
        """Keys turned by RoPE through −1 position, with transformers' own functions (GPT-2's learned
        positions entered at the embedding: its keys stay as they are)."""
        if self.config.model_type == "gpt2":
            return k
        rotary = self.model.model.rotary_emb
        args = (k, torch.tensor([[-1]]))
        cos, sin = rotary(*args, kind) if "gemma" in self.config.model_type else rotary(*args)
        module = __import__(type(self.model).__module__, fromlist=["apply_rotary_pos_emb"])
        return module.apply_rotary_pos_emb(k, k, cos, sin)[1]


def oracle_nll(model, ids, window, sinks) -> np.ndarray:
    oracle = Oracle(model, window, sinks)
    out = []
    for t in range(len(ids) - 1):
        logits = oracle.step(ids[t])
        out.append(np.logaddexp.reduce(logits) - logits[ids[t + 1]])
    return np.array(out)


def oracle_greedy(model, ids, window, sinks, n: int) -> list[int]:
    oracle, ids = Oracle(model, window, sinks), list(ids)
    for token in ids[:-1]:
        oracle.step(token)
    for _ in range(n):
        ids.append(int(oracle.step(ids[-1]).argmax()))
    return ids


@pytest.fixture(scope="module", params=["llama", "gemma", "gpt2"])
def tiny(request):
    checkpoint, model = request.getfixturevalue(request.param)
    ids = checkpoint.encode(TEXT)[0]
    expected = {p: oracle_nll(model, ids, *p) for p in POLICIES}
    return checkpoint, model, ids, expected


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_each_policy_matches_transformers(tiny, framework):
    """Per-token NLL within 1e-4 nats for the full cache, a window, and a window with 2 sinks;
    the policies differ from each other (eviction is seen)."""
    checkpoint, _, ids, expected = tiny
    assert len(ids) > 20
    for policy in POLICIES:
        got = streaming.nll(checkpoint, TEXT, framework, window=policy[0], sinks=policy[1])
        assert got.shape == (len(ids) - 1,)
        np.testing.assert_allclose(got, expected[policy], rtol=0, atol=ATOL, err_msg=str(policy))
    full, windowed = expected[(None, 0)], expected[(7, 0)]
    assert np.abs(full - windowed).max() > 1e-2


def test_full_cache_is_the_plain_forward(tiny):
    """The full cache reads what one forward pass reads (the oracle's harness checked too)."""
    _, model, ids, expected = tiny
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].double().numpy()  # (T, V)
    plain = np.logaddexp.reduce(logits[:-1], axis=-1) - logits[np.arange(len(ids) - 1), ids[1:]]
    np.testing.assert_allclose(expected[(None, 0)], plain, rtol=0, atol=ATOL)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_generation_over_each_policy_matches_transformers(tiny, framework):
    """Greedy tokens over the streaming cache (the prompt in chunks) as the oracle one token at a time."""
    checkpoint, model, ids, _ = tiny
    window, sinks = POLICIES[-1]
    got = streaming.generate(
        checkpoint, TEXT, framework, window=window, sinks=sinks, max_new_tokens=4, temperature=0
    )
    assert got.ids == oracle_greedy(model, ids, window, sinks, 4)


def test_first_token_share_is_kept_while_token_zero_is_cached(llama):
    checkpoint, _ = llama
    full = streaming.score(checkpoint, TEXT, "torch", first=True)
    windowed = streaming.score(checkpoint, TEXT, "torch", window=7, first=True)
    L, H = 2, 4
    assert full.first.shape == (len(full.ids) - 1, L, H) and np.isfinite(full.first).all()
    assert ((full.first >= 0) & (full.first <= 1)).all() and (full.first[0] == 1).all()  # token 0 sees itself
    assert np.isfinite(windowed.first[:8]).all() and np.isnan(windowed.first[8:]).all()
    np.testing.assert_allclose(windowed.first[:8], full.first[:8], atol=1e-6)


@pytest.mark.parametrize(
    ("window", "sinks", "field"),
    [(0, 0, "window"), (2.5, 0, "window"), (None, 2, "sinks"), (8, -1, "sinks"), (8, True, "sinks")],
)
def test_bad_policy_names_the_field(window, sinks, field):
    with pytest.raises(SpecError) as err:
        streaming.Policy(window, sinks)
    assert err.value.field == field


def test_stop_ends_the_run_with_the_tokens_so_far(llama):
    checkpoint, _ = llama
    seen = []

    def on_report(done, total, _partial):
        seen.append((done, total))
        if done == 3:
            monitor.stop()

    monitor = Monitor(on_report)
    got = streaming.score(checkpoint, TEXT, "torch", window=5, monitor=monitor)
    T = len(checkpoint.encode(TEXT)[0])
    assert got.ended == "stopped" and len(got.nll) == 3 and seen == [(d, T - 1) for d in (1, 2, 3)]
    assert np.allclose(got.nll, streaming.score(checkpoint, TEXT, "torch", window=5).nll[:3])


@pytest.mark.slow
def test_smollm2_full_cache_matches_transformers():
    """SmolLM2 (real weights), the full cache: per-token NLL as transformers' one forward pass."""
    if not checkpoints.available(checkpoints.SMOLLM2):
        pytest.fail(
            f"{checkpoints.SMOLLM2} is not installed: {pretrained.not_installed()[checkpoints.SMOLLM2]}"
        )
    checkpoint = checkpoints.load()
    model = transformers.LlamaForCausalLM.from_pretrained(
        str(checkpoint.path), attn_implementation="eager"
    ).eval()
    text = "Attention sinks: most heads put their weight on the first token, whatever it is."
    ids = checkpoint.encode(text)[0]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].double().numpy()
    plain = np.logaddexp.reduce(logits[:-1], axis=-1) - logits[np.arange(len(ids) - 1), ids[1:]]
    np.testing.assert_allclose(streaming.nll(checkpoint, text, "torch"), plain, rtol=0, atol=ATOL)


def test_a_window_reads_past_the_models_positions(llama):
    """The tiny Llama has 64 positions: the full cache refuses 80 tokens, a window with sinks reads them."""
    checkpoint, _ = llama
    ids = streaming.text_ids(checkpoint, streaming.bundled_text(), 80)
    with pytest.raises(SpecError) as err:
        streaming.score_ids(checkpoint, ids, "torch")
    assert err.value.field == "text"
    got = streaming.score_ids(checkpoint, ids, "torch", window=8, sinks=2)
    assert got.nll.shape == (79,) and np.isfinite(got.nll).all()
    with pytest.raises(SpecError) as err:
        streaming.score_ids(checkpoint, ids, "torch", window=64, sinks=4)
    assert err.value.field == "window"
