"""The Step-by-step page teaches RoPE, grouped K/V heads and the KV cache, and explains bad links."""

import numpy as np
import pytest

from attnviz import params, reference
from tests.app.conftest import array, assert_clean, figures, open_page, warnings
from tests.conftest import RTOL_FIGURE


def _figure(at, title_start: str) -> dict:
    found = [f for f in figures(at) if f["layout"].get("title", {}).get("text", "").startswith(title_start)]
    assert found, [f["layout"].get("title", {}).get("text") for f in figures(at)]
    return found[0]


def test_rope_figures_show_the_turned_pairs_and_the_offset_scores():
    at = open_page("steps", {"steps.pos": "5"})
    assert_clean(at)
    bands = _figure(at, "q·k after RoPE vs the offset")
    offsets = array(bands["data"][0]["x"]).astype(int)
    expected = reference.rope_band_scores(8, 10000.0, offsets)  # default spec: d_k = 32 / 4 = 8
    np.testing.assert_allclose(array(bands["data"][-1]["y"]), expected.mean(0), atol=1e-12)
    pairs = _figure(at, "Pairs (i, i+d/2) at position 5")
    before, after = (t for t in pairs["data"] if t.get("mode") == "markers+text")
    radius = lambda t: np.hypot(array(t["x"]), array(t["y"]))  # noqa: E731
    np.testing.assert_allclose(radius(after), radius(before), rtol=RTOL_FIGURE)  # turned, not stretched
    assert not np.allclose(array(after["x"]), array(before["x"]))


def test_the_mask_demo_says_its_colour_scale_and_writes_values_on_request():
    """With a causal mask, row 0 holds one weight of 1 above the colour bar's top (the largest weight of
    the rows with two or more keys): each panel's caption says so, as the explorer's does, and "Show
    values in the cells" writes the values in these panels too."""
    at = open_page("steps", {"mask": "causal", "steps.values": "true"})
    assert_clean(at)
    captions = " ".join(c.value for c in at.caption)
    for what in ("intended", "as passed"):
        heat = _figure(at, f"weights {what}")["data"][0]
        z = array([[np.nan if v is None else v for v in row] for row in heat["z"]])
        two_keys = np.isfinite(z).sum(-1) >= 2
        assert heat["zmax"] == pytest.approx(np.nanmax(z[two_keys])) and heat["zmax"] < np.nanmax(z) == 1.0
        assert (
            f"Colour scale 0 to {heat['zmax']:.3g}: the largest weight in rows with two or more" in captions
        )
        assert heat["texttemplate"] == "%{z:.2f}"


def test_kv_sharing_and_cache_bytes_at_smollm2_size():
    at = open_page("steps")
    assert_clean(at)
    sharing = _figure(at, "4 query heads read 4 K/V heads (MHA)")
    assert len([t for t in sharing["data"] if t.get("mode") == "lines"]) == 4
    bars = _figure(at, "KV-cache bytes per token")
    smol = next(t for t in bars["data"] if t["name"].startswith("SmolLM2-135M"))
    assert list(smol["x"]) == ["MHA", "GQA", "MQA"]
    assert list(array(smol["y"])) == [30 * 9 * 128 * 2, 30 * 3 * 128 * 2, 30 * 1 * 128 * 2]
    mine = next(t for t in bars["data"] if t["name"].startswith("this configuration"))
    assert list(array(mine["y"])) == list(params.kv_cache_table(1, 4, 4, 8, 8, 4).values())


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("steps.head", "99", "0 … 3 (whole numbers)"),
        ("steps.pos", "-1", "0 … 7 (whole numbers)"),
        ("steps.current", "nope", "Q | K | V | QKᵀ | scaled | softmax | · V"),
        ("steps.built", "mine", None),
    ],
)
def test_bad_link_values_are_named_like_the_explorer_does(key, value, allowed):
    at = open_page("steps", {key: value})
    assert_clean(at)
    note = warnings(at)
    assert f"URL parameter {key}={value!r} ignored; allowed:" in note, note
    if allowed:
        assert allowed in note


def test_a_good_link_gives_no_note():
    at = open_page("steps", {"steps.head": "2", "steps.current": "softmax"})
    assert "ignored" not in warnings(at)


@pytest.fixture
def grouped_rope(monkeypatch):
    """The page on a grouped, rotary, windowed spec (the sidebar's controls for them are the explorer's job):
    `controls.configure` and `controls.run` answer with that spec and its run."""
    from attnviz import AttentionSpec, run_attention
    from attnviz.app import controls

    spec = AttentionSpec(
        len_q=6, d_model=24, n_heads=6, n_kv_heads=2, rope_base=100.0, mask="causal", window=3
    )
    labels = [f"t{i}" for i in range(6)]
    result = run_attention(spec, "torch")
    monkeypatch.setattr(controls, "configure", lambda *a, **k: ({}, spec, labels, labels))
    monkeypatch.setattr(controls, "run", lambda *a, **k: result)
    return spec, result


def test_a_grouped_rotary_spec_walks_every_new_step(grouped_rope):
    _, result = grouped_rope
    at = open_page("steps", {"steps.all": "true", "steps.head": "5"})
    assert_clean(at)
    at.toggle(key="steps.all").set_value(True).run()
    at.number_input(key="steps.head").set_value(5).run()
    assert_clean(at)
    shown = {
        f["layout"]["title"]["text"].split(" — ")[0]: f
        for f in figures(at)
        if " — head" in f["layout"]["title"]["text"]
    }
    assert {"Q·RoPE", "K·RoPE", "K shared", "V shared"} <= set(shown)
    k_rope = array(shown["K·RoPE"]["data"][0]["z"])
    np.testing.assert_allclose(
        k_rope, result.step("k_rope").value[0, 5 // 3], rtol=RTOL_FIGURE
    )  # K/V head 1 serves 3..5
    assert "K/V head 1, read by query head 5" in " ".join(m.value for m in at.markdown)
    assert _figure(at, "6 query heads read 2 K/V heads (GQA, 3 per group)")
    assert "sliding window (Mistral) is on" in " ".join(c.value for c in at.caption)
    codes = " ".join(c.value for c in at.code)
    assert "rotate_half(q)" in codes and "repeat_interleave" in codes and "tf.gather" in codes
