"""The score split on SmolLM2-135M-Instruct (real weights, `slow`): the worked example the
Interpretability screen shows — the role scan's top induction head, at a token of a repeated text,
picks the token after that token's first occurrence; its score's table sums to the score, the score
is transformers', and among the scan's previous-token heads the one whose output at the key gives
the most (its "partner") gives more than any other part of the key side.

The oracle is transformers' `LlamaForCausalLM` (eager attention) holding the packaged weights
(tests/pretrained/test_smollm2.py proves them equal to transformers' own GGUF loading), its attention function
wrapped as in tests/interp/test_interp_score_parts.py.
"""

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.interp import roles, score_row
from attnviz.interp.score_table import example
from tests.conftest import RTOL_F32, RTOL_MODEL, assert_close, requires
from tests.interp.test_interp_score_parts import oracle_run

NAME = "SmolLM2-135M-Instruct"
if NAME not in pretrained.local_checkpoints():
    pytest.skip(f"{NAME} is not installed here: {pretrained.not_installed()[NAME]}", allow_module_level=True)

transformers = pytest.importorskip("transformers", reason="transformers (the oracle) is not installed")
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow
FRAMEWORKS = [pytest.param("torch"), pytest.param("tensorflow", marks=requires("tensorflow"))]


@pytest.fixture(scope="module")
def smol():
    """(attnviz's checkpoint, transformers' scores `(L, H, T, T)` on the example, a small role scan)."""
    ckpt = pretrained.load_choice(NAME)
    cfg = ckpt.config
    config = transformers.LlamaConfig(
        vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_hidden_layers, num_attention_heads=cfg.num_attention_heads,
        num_key_value_heads=cfg.num_key_value_heads, head_dim=cfg.head_dim, rms_norm_eps=cfg.rms_norm_eps,
        rope_theta=cfg.rope_theta, max_position_embeddings=cfg.max_position_embeddings, tie_word_embeddings=True,
    )  # fmt: skip
    config._attn_implementation = "eager"
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config)
    state = {"model." + k: torch.from_numpy(v) for k, v in ckpt.weights.items()}
    model.load_state_dict(state, strict=False, assign=True)
    model.tie_weights()
    model.model.rotary_emb = type(model.model.rotary_emb)(config)  # its buffers, off the meta device
    scan = roles.scan(ckpt, "torch", half=12, n=1, seed=0)
    expected = oracle_run(model.eval(), "llama", ckpt.encode(example.EXAMPLE_TEXT)[0], torch.float32)[2]
    return ckpt, expected, scan


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_worked_example_on_an_induction_head(smol, framework):
    ckpt, expected, scan = smol
    ids = ckpt.encode(example.EXAMPLE_TEXT)[0]
    query = example.example_query(ids)
    (layer, head, _), previous = scan.top("induction", 1)[0], scan.top("previous_token", 5)
    row = score_row(ckpt, example.EXAMPLE_TEXT, layer, head, query, framework)
    assert row.picked == example.induction_target(ids, query), "the induction head picks the predicted key"
    parts = row.parts
    assert abs(parts.total - parts.score) <= RTOL_F32 * np.abs(row.scores).max()
    assert_close(
        row.scores,
        expected[layer, head, query, row.keys],
        RTOL_MODEL[framework],
        f"L{layer}.H{head} vs transformers",
    )
    name, share = example.partner(parts, [(a, b) for a, b, _ in previous])
    columns = parts.table.sum(0)  # (Pk,): each key part's share of the score
    assert share == pytest.approx(columns.max()) and parts.key_parts[int(np.argmax(columns))] == name
    assert share > 0.5 * parts.score
