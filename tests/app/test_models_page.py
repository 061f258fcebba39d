"""The Compare-models page (issue 31 §3) on tiny random decoders built in the test — a Llama (GQA, every
layer global) beside a Gemma 3 (MQA, local layers with a 5-token window, global layer 2) — in both
frameworks, and on SmolLM2 beside Gemma 3 270M (slow, PyTorch).

The page compares in a worker; the test runs `side_by_side` again in process (itself proven against
transformers and the checkpoints' tensor tables in tests/interp/test_side_by_side.py) and reads every figure
back: the sink and span per layer against relative depth with each layer's kind, the strongest head
per role, the parameters by part, the KV cache per token. A link reopens the same view.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.app.models import work as ui
from attnviz.formats import size
from attnviz.frameworks import label
from attnviz.interp.side_by_side import side_by_side
from attnviz.pretrained import sources
from tests.app.conftest import array, assert_clean, chart, errors, open_directly, open_page, plain, warnings
from tests.app.test_fields import assert_widgets_within_the_guard
from tests.conftest import RTOL_MODEL, requires

pytest.importorskip("transformers", reason="transformers builds the test's decoders")
pytest.importorskip("tokenizers")

TEXT = "The cat sat on the mat."
HALF, N, SEED = 6, 2, 3
FRAMEWORKS = [pytest.param("torch"), pytest.param("tensorflow", marks=requires("tensorflow"))]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    from tests.kernels.test_decoding import make_tiny_gemma
    from tests.pretrained.test_llama import make_tiny_llama

    root = tmp_path_factory.mktemp("pair")
    make_tiny_llama(root / "tiny-llama")
    make_tiny_gemma(root / "tiny-gemma")
    return root


@pytest.fixture
def offered(folders, monkeypatch):
    monkeypatch.setenv(pretrained.ENV_DIRS, str(folders))
    return folders


def link(framework: str = "torch", **extra: str) -> dict:
    return {"models.first": "tiny-llama", "models.second": "tiny-gemma", "models.framework": label(framework),
            "models.text": TEXT, "models.half": str(HALF), "models.n": str(N), "models.seed": str(SEED), **extra}  # fmt: skip


def per_layer(figure: dict, model: str) -> tuple[np.ndarray, np.ndarray, dict[int, str]]:
    """`(L,)` x and y of `model`'s markers in layer order, and each layer's kind (its marker trace)."""
    x, y, kinds = {}, {}, {}
    for trace in figure["data"]:
        if trace.get("meta", {}).get("model") != model:
            continue
        for layer, xi, yi in zip(
            array(trace["customdata"]).astype(int), array(trace["x"]), array(trace["y"]), strict=True
        ):
            x[layer], y[layer], kinds[layer] = xi, yi, trace["meta"]["kind"]
    order = sorted(x)
    assert order == list(range(len(order))), order
    return np.array([x[i] for i in order]), np.array([y[i] for i in order]), kinds


def assert_compared(at, first, second, framework: str, role: str = "previous_token") -> list:
    """The page's figures, table and notes against `side_by_side` on the same models; returns it."""
    expected = side_by_side(first, second, TEXT, framework, half=HALF, n=N, seed=SEED)
    rtol = RTOL_MODEL[framework]
    for s in expected:
        kinds = {i: k for i, k in enumerate(s.layer_types or ["global"] * len(s.depth))}
        for key, values in (
            ("models.sink", s.sink),
            ("models.span", s.span),
            ("models.roles", s.role_peak(role)),
        ):
            x, y, drawn = per_layer(chart(at, key), s.name)
            np.testing.assert_allclose(x, s.depth, atol=1e-12)
            np.testing.assert_allclose(y, values, rtol=rtol, atol=1e-6, err_msg=f"{s.name} {key}")
            assert drawn == kinds
        bars = {t["name"]: array(t["x"]) for t in chart(at, "models.parameters")["data"]}
        row = next(t["y"] for t in chart(at, "models.parameters")["data"]).index(s.name)
        for part, count in s.parameters.items():
            assert (
                bars[part][row] == pytest.approx(count / 1e6, rel=1e-12)
                if count
                else part not in bars or bars[part][row] == 0
            )
    (table,) = [d.value for d in at.dataframe]
    for s in expected:
        row = table.set_index("model").loc[s.name]
        assert row["KV cache per token"] == f"{size(s.kv.per_token)} · MHA {size(s.kv.per_token_mha)}"
        assert row["parameters"] == f"{s.total / 1e6:.1f} M"
        embedding = s.parameters["embedding"]
        assert row["in the embedding"] == f"{embedding / 1e6:.1f} M ({embedding / s.total:.0%})"
    said = " ".join(plain(m.value) for m in at.markdown)
    for s in expected:
        assert f"from {s.sink.min():.2f} in layer {int(s.sink.argmin())}" in said
    return expected


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_figures_are_side_by_sides_numbers(offered, framework):
    at = open_page("models", link(framework))
    assert not errors(at) and not warnings(at), errors(at) + warnings(at)
    first, second = pretrained.load_choice("tiny-llama"), pretrained.load_choice("tiny-gemma")
    assert_compared(at, first, second, framework)
    assert second.config.is_local(0) and not second.config.is_local(2)  # the kinds drawn are the model's


def test_the_url_round_trip_reopens_the_same_view(offered):
    at = open_page("models", link())
    at.radio(key="models.role").set_value(ui.ROLE_NAMES["induction"]).run()
    at.number_input(key="models.seed").set_value(SEED).run()
    assert_clean(at)
    assert_widgets_within_the_guard(at, ["models.half", "models.n", "models.seed"])
    # AppTest does not write bound widgets into `at.query_params`; the link is what `bind` writes
    kept = {**link(), "models.role": at.session_state["models.role"]}
    assert kept["models.role"] == "induction"  # the radio shows (and a link carries) the role's name
    again = open_directly("models", kept)
    assert_clean(again)
    assert again.radio(key="models.role").value == ui.ROLE_NAMES["induction"]
    assert chart(again, "models.roles")["layout"]["title"]["text"] == "Strongest induction head, by layer"
    assert_compared(again, pretrained.load_choice("tiny-llama"), pretrained.load_choice("tiny-gemma"), "torch",
                    role="induction")  # fmt: skip
    for key in ("models.sink", "models.span", "models.roles"):
        assert chart(again, key)["data"] == chart(at, key)["data"]


def test_without_the_packaged_pair_the_page_says_how_to_install_it(offered, monkeypatch):
    monkeypatch.setattr(sources, "local_checkpoints", dict)  # nothing packaged is installed
    at = open_page("models", {"models.text": TEXT, "models.half": str(HALF), "models.n": str(N)})
    assert_clean(at)
    (info,) = [plain(i.value) for i in at.info]
    for name in (ui.FIRST, ui.SECOND):
        assert f"**{name}** (`{sources.PACKAGED[name].install}`)" in info, info
    # it opens on the two decoders there are
    assert {at.selectbox(key="models.first").value, at.selectbox(key="models.second").value} == {
        "tiny-llama", "tiny-gemma"
    }  # fmt: skip


def test_one_model_twice_a_bad_link_and_a_run_over_the_budget(offered, monkeypatch):
    bad = {"models.second": "tiny-llama", "models.half": "inf", "models.role": "nope"}
    at = open_page("models", link(**bad))
    assert_clean(at)
    said = warnings(at)
    assert "models.half='inf' ignored; allowed: 2 … 64" in said and "models.role='nope' ignored" in said, said
    assert "Pick two different decoders" in said and not at.get("plotly_chart")
    monkeypatch.setattr(ui, "APP_MEMORY_BUDGET", 1)
    at = open_page("models", link())
    assert "tiny-llama on the prompt on" in errors(at) and "nothing this long fits" in errors(at), errors(at)


@pytest.mark.slow
@pytest.mark.skipif(
    not {ui.FIRST, ui.SECOND} <= set(pretrained.local_checkpoints()),
    reason="SmolLM2 and Gemma 3 270M packages",
)
def test_smollm2_beside_gemma_by_default(monkeypatch):
    """The packaged pair, in PyTorch: the page's TensorFlow path is proven on the tiny pair above, and
    both models' TensorFlow runs against transformers in tests/pretrained/test_smollm2.py and tests/pretrained/test_gemma3.py,
    `side_by_side` in TensorFlow in tests/interp/test_side_by_side.py (the pair again in TensorFlow here took
    49 s of the suite under load)."""
    framework = "torch"
    monkeypatch.delenv(pretrained.ENV_DIRS, raising=False)
    at = open_page("models", {"models.framework": label(framework), "models.text": TEXT, "models.half": str(HALF),
                              "models.n": str(N), "models.seed": str(SEED)})  # fmt: skip
    assert not errors(at), errors(at)
    assert (at.selectbox(key="models.first").value, at.selectbox(key="models.second").value) == (
        ui.FIRST,
        ui.SECOND,
    )
    assert pretrained.notice(ui.SECOND) in [c.value for c in at.sidebar.caption]  # the Gemma Terms of Use
    smol, gemma = pretrained.load_choice(ui.FIRST), pretrained.load_choice(ui.SECOND)
    g = assert_compared(at, smol, gemma, framework)[1]
    (table,) = [d.value for d in at.dataframe]
    assert table.set_index("model").loc[ui.SECOND, "in the embedding"] == "167.8 M (63%)"  # of 268.1 M
    # Gemma's sink is its <bos>: the note gives both numbers, the prompt's and the scan's
    (note,) = [plain(i.value) for i in at.info]
    assert f"put {g.sink.min():.2f}–{g.sink.max():.2f} of their weight on it" in note
    assert f"reads at most {g.role_peak('first_token').max():.2f}" in note and "<bos>" in note
