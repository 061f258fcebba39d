"""The lesson's exercises and problem set, checked against oracles the lesson does not use.

Each exercise's answer is recomputed independently: the scores, weights and shapes by running
the exercise's own app link (`attnviz.settings` → `run_attention` in PyTorch, what the page it
opens computes), masks from `np.triu`, RoPE with complex numbers, the learned head with
transformers' BertModel. Graders must accept the answer and reject every other option with a reason.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from attnviz import lessons, run_attention, settings
from attnviz.errors import SpecError
from attnviz.frameworks import is_installed
from attnviz.lessons import problem_set, rotary
from tests.conftest import ATOL_F64, requires

SEEDS = (0, 1, 7, 4242, lessons.MAX_SEED)
TOL = ATOL_F64


def app_run(link):
    """What the page the link opens computes: its configuration through the app's own code, in PyTorch
    (in TensorFlow where PyTorch is not installed: the library tests also run on TensorFlow alone)."""
    cfg = settings.DEFAULTS | link.config
    spec = settings.build_spec(cfg)
    x_q, x_kv, params = settings.prepare(cfg, spec)
    framework = "torch" if is_installed("torch") else "tensorflow"
    result = run_attention(spec, framework, x_q=x_q, x_kv=x_kv, params=params)
    return spec, {s.name: np.asarray(s.value, dtype=np.float64) for s in result.steps}


def wrong_choices(part):
    return [i for i in range(len(part.options)) if i != part.answer]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("step", range(len(lessons.STEPS)))
def test_answer_is_right_and_every_other_choice_is_explained(step, seed):
    ex = lessons.exercise(step, seed)
    assert ex.key == lessons.STEPS[step][0] and ex.seed == seed
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
            assert not feedback.right and not ok
            assert len(why) > 40, why  # a reason, not a bare ✗


@pytest.mark.parametrize("seed", SEEDS)
def test_scores_answer_is_the_largest_of_q1_in_the_linked_run(seed):
    ex = lessons.exercise(0, seed)
    spec, steps = app_run(ex.link)
    assert spec.n_heads == 1 and spec.d_k == 2 and spec.len_q == 3
    scores = steps["scores"][0, 0]
    assert ex.parts[0].answer == int(np.argmax(scores[0]))
    q, k = steps["q_heads"][0, 0], steps["k_heads"][0, 0]
    np.testing.assert_allclose(q @ k.T, scores, atol=TOL)
    np.testing.assert_allclose(ex.data["scores"], scores, atol=TOL)
    # the numbers shown (2 decimals) give the same winner as the exact ones
    shown = [[float(x) for x in re.findall(r"-?\d+\.\d\d", line)] for line in ex.given.splitlines()]
    rows = np.array([r for r in shown if len(r) == 2])
    assert rows.shape == (6, 2)
    np.testing.assert_allclose(rows, np.round(np.vstack([q, k]), 2), atol=1e-9)
    assert int(np.argmax(rows[3:] @ rows[0])) == ex.parts[0].answer


@pytest.mark.parametrize("seed", SEEDS)
def test_scaling_answer_matches_the_entropy_of_the_linked_runs(seed):
    ex = lessons.exercise(1, seed)
    assert ex.link.config["scale"] == 1.0 and ex.link.config["d_model"] == 256
    _, large = app_run(ex.link)
    _, small = app_run(type(ex.link)(ex.link.page, "", ex.link.config | {"d_model": 4}))

    def entropy(w):
        return float(-(w * np.log(np.clip(w, 1e-300, None))).sum(-1).mean())

    sharper = entropy(large["softmax"]) < entropy(small["softmax"])
    assert ex.parts[0].answer == (0 if sharper else 1)
    rows = list(ex.data["rows"].values())
    row = int(re.search(r"q(\d+)", ex.given).group(1)) - 1
    np.testing.assert_allclose(rows[0], small["softmax"][0, 0, row], atol=TOL)
    np.testing.assert_allclose(rows[1], large["softmax"][0, 0, row], atol=TOL)


@pytest.mark.parametrize("seed", SEEDS)
def test_softmax_key_is_numpy_softmax_within_the_stated_tolerance(seed):
    ex = lessons.exercise(2, seed)
    part = ex.parts[0]
    shown = np.array([float(x) for x in re.findall(r"-?\d+\.\d\d", ex.given)])
    by_hand = np.exp(shown) / np.exp(shown).sum()  # what a student computes from the numbers shown
    _, steps = app_run(ex.link)
    row = int(re.search(r"q(\d+)", ex.given).group(1)) - 1
    exact = steps["softmax"][0, 0, row]
    np.testing.assert_allclose(part.answer, by_hand, atol=TOL)  # the key: the numbers as shown
    np.testing.assert_allclose(shown, np.round(steps["scaled"][0, 0, row], 2), atol=1e-9)
    assert lessons.grade(ex, [tuple(np.round(by_hand, 2))]).right
    assert lessons.grade(ex, [tuple(np.round(exact, 2))]).right
    off = np.round(exact, 2) + np.array([0.03, -0.03, 0.0])
    feedback = lessons.grade(ex, [tuple(off)])
    assert not feedback.right and "k1" in feedback.notes[0][1]
    assert "sum" in lessons.grade(ex, [(0.5, 0.5, 0.5)]).notes[0][1]
    assert "scores themselves" in lessons.grade(ex, [tuple(shown)]).notes[0][1]


@pytest.mark.parametrize("seed", SEEDS)
def test_masks_answers_follow_the_conventions(seed):
    ex = lessons.exercise(3, seed)
    cells, convention = ex.parts
    n = len(cells.rows)
    blocked = np.triu(np.ones((n, n), bool), 1)
    np.testing.assert_array_equal(cells.answer, blocked)
    assert lessons.grade(ex, [blocked, convention.answer]).right
    wrong = [blocked.T, ~blocked, np.zeros_like(blocked)]
    for picked in wrong:
        ok, why = lessons.grade(ex, [picked, convention.answer]).notes[0]
        assert not ok and why
    # written 1 = blocked, read as 1 = may attend: row r attends to exactly the keys after it
    row = int(re.search(r"\*\*q(\d+)\*\*", convention.prompt).group(1)) - 1
    written = blocked.astype(int)
    read = written[row] == 1
    names = [k for k, r in zip(cells.options, read, strict=True) if r]
    assert convention.options[convention.answer] == ", ".join(names)
    assert ex.link.page_keys["steps.built"] in lessons.structure.masks.CONVENTIONS


@pytest.mark.parametrize("seed", SEEDS)
def test_heads_answer_is_the_previous_token_panel_of_the_linked_run(seed):
    ex = lessons.exercise(4, seed)
    _, steps = app_run(ex.link)
    weights = steps["softmax"][0]  # (4, L, L), heads in the explorer's order
    panels = ex.data["panels"]
    L = panels.shape[-1]
    previous = [float(np.mean([p[i, i - 1] for i in range(1, L)])) for p in panels]
    assert ex.parts[0].answer == int(np.argmax(previous)) and max(previous) > 0.9
    matched = [[np.allclose(p, w, atol=1e-5) for w in weights] for p in panels]
    assert all(sum(m) == 1 for m in matched)  # every panel is one of the explorer's heads
    assert matched[ex.parts[0].answer][0]  # attnviz.heads puts the previous-token head first


@pytest.mark.parametrize("seed", SEEDS)
def test_shapes_answers_are_the_textbook_shapes_and_the_linked_run(seed):
    ex = lessons.exercise(5, seed)
    spec, steps = app_run(ex.link)
    B, L, H, dk = spec.batch, spec.len_q, spec.n_heads, spec.d_k
    expected = [(B, H, L, dk), (B, H, L, L), (B, L, H * dk)]
    assert [p.answer for p in ex.parts] == expected
    assert [steps[n].shape for n in ("q_heads", "scores", "merged")] == expected
    typed = ["(" + ", ".join(map(str, s)) + ")" for s in expected]
    assert lessons.grade(ex, typed).right
    assert lessons.grade(ex, [" x ".join(map(str, s)) for s in expected]).right
    feedback = lessons.grade(ex, [str((B, L, H, dk)), str((B, H, L, dk)), str((B, H, L, dk))])
    assert [ok for ok, _ in feedback.notes] == [False, False, False]
    assert "transpose" in feedback.notes[0][1] and "d_k is summed away" in feedback.notes[1][1]
    assert "type the sizes" in lessons.grade(ex, ["?", "", "none"]).notes[0][1].lower()


def complex_rope_score(q, k, m, n, base=rotary.BASE):
    """q·k after RoPE, written with complex numbers: pair (i, i + D/2) is one complex coordinate."""
    half = len(q) // 2
    theta = base ** (-np.arange(half) * 2 / len(q))
    zq = (q[:half] + 1j * q[half:]) * np.exp(1j * m * theta)
    zk = (k[:half] + 1j * k[half:]) * np.exp(1j * n * theta)
    return float(np.real(np.sum(zq * np.conj(zk))))


@pytest.mark.parametrize("seed", SEEDS)
def test_positions_answer_matches_complex_rotation_of_the_linked_runs_q_and_k(seed):
    ex = lessons.exercise(6, seed)
    spec, steps = app_run(ex.link)
    assert spec.rope_base == rotary.BASE and spec.d_k == rotary.WIDTH
    m = int(re.search(r"m = (\d+)", ex.given).group(1))
    n = int(re.search(r"n = (\d+)", ex.given).group(1))
    q, k = steps["q_heads"][0, 0, m], steps["k_heads"][0, 0, n]
    np.testing.assert_allclose(ex.data["q"], q, atol=TOL)
    np.testing.assert_allclose(ex.data["k"], k, atol=TOL)
    # the app's own turned q and k score like the complex rotation at their positions
    turned = steps["q_rope"][0, 0, m] @ steps["k_rope"][0, 0, n]
    assert turned == pytest.approx(complex_rope_score(q, k, m, n), abs=1e-9)
    for a, b in ((0, 3), (5, 2), (11, 19)):
        assert rotary.rope_score(q, k, a, b) == pytest.approx(complex_rope_score(q, k, a, b), abs=1e-9)
    gap = ex.data["gap"]
    along = [complex_rope_score(q, k, s, s + gap) for s in range(10)]
    apart = [complex_rope_score(q, k, 0, d) for d in range(10)]
    assert np.ptp(along) < 1e-9 and np.ptp(apart) > 1e-3
    np.testing.assert_allclose(ex.data["rope"][:10], along, atol=1e-9)
    assert ex.parts[0].options[ex.parts[0].answer].startswith("Only how far apart")
    assert np.ptp(ex.data["added"]) > 1e-3  # added sinusoids: the score moves with the pair


# The oracle, transformers' BertModel, runs on PyTorch only (transformers 5 has no TensorFlow models).
@requires("torch")
def test_learned_answer_matches_transformers():
    transformers = pytest.importorskip("transformers", reason="transformers (the oracle) is not installed")
    from attnviz import pretrained

    path = str(pretrained.load("all-MiniLM-L6-v2").path)
    model = transformers.BertModel.from_pretrained(path, attn_implementation="eager").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    for seed in SEEDS[:3]:
        ex = lessons.exercise(7, seed)
        sentence = re.search(r"\*(.+)\*", ex.given).group(1)
        layer, head = (int(v) for v in re.findall(r"\*\*(\d+)\*\*", ex.given))
        enc = tokenizer(sentence, return_tensors="pt")
        attn = model(**enc, output_attentions=True).attentions[layer][0, head].detach().numpy()
        tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
        target = int(attn[tokens.index("it")].argmax())
        answer = ex.parts[0].options[ex.parts[0].answer]
        assert answer.startswith(f"“{tokens[target]}”")
        np.testing.assert_allclose(ex.data["attn"][head], attn, atol=1e-4)


def test_seeds_give_different_instances_and_the_same_seed_the_same():
    for step in (0, 2, 3, 5, 6):
        a, b = lessons.exercise(step, 11), lessons.exercise(step, 12)
        assert a.given != b.given or [p.answer_text for p in a.parts] != [p.answer_text for p in b.parts]
        again = lessons.exercise(step, 11)
        assert again.given == a.given and [p.answer_text for p in again.parts] == [
            p.answer_text for p in a.parts
        ]


@pytest.mark.parametrize(
    ("step", "seed", "field"),
    [
        (8, 0, "step"),
        (-1, 0, "step"),
        (True, 0, "step"),
        (0, -1, "seed"),
        (0, 10**7, "seed"),
        (0, "3", "seed"),
    ],
)
def test_bad_step_or_seed_is_a_spec_error(step, seed, field):
    with pytest.raises(SpecError) as info:
        lessons.exercise(step, seed)
    assert info.value.field == field


def test_parse_shape():
    assert lessons.parse_shape("(2, 4, 8, 16)") == (2, 4, 8, 16)
    assert lessons.parse_shape("2x4x8") == (2, 4, 8)
    assert lessons.parse_shape(" 3 5 ") == (3, 5)
    assert lessons.parse_shape("no numbers") is None


# -- the problem set ------------------------------------------------------------------------------


def _keys(md: str, seed: int) -> list[list[str]]:
    """The answer key of one seed: per step, its answers in order."""
    section = md.split(f"# Answer key — seed {seed}\n")[1].split("# Answer key")[0]
    blocks = re.split(r"(?m)^\*\*\d\. ", section)[1:]
    return [re.findall(r"(?m)^- (?:\([a-h]\) )?\*\*(.+?)\*\*$", b) for b in blocks]


def test_problem_set_answer_keys_are_the_librarys_answers():
    seeds = [3, 99]
    md = problem_set.markdown(seeds)
    for seed in seeds:
        assert md.count(f"# attnviz lesson — worksheet, seed {seed}") == 1
        keys = _keys(md, seed)
        assert len(keys) == len(lessons.STEPS)
        for step, key in enumerate(keys):
            ex = lessons.exercise(step, seed)
            assert key == [p.answer_text for p in ex.parts]
        # the worked numbers, independently: softmax of the scores shown, the textbook shapes
        soft = lessons.exercise(2, seed)
        shown = np.array([float(x) for x in re.findall(r"-?\d+\.\d\d", soft.given)])
        typed = np.array([float(x) for x in keys[2][0].split(", ")])
        np.testing.assert_allclose(typed, np.exp(shown) / np.exp(shown).sum(), atol=0.011)
        spec, _ = app_run(lessons.exercise(5, seed).link)
        B, L, H, dk = spec.batch, spec.len_q, spec.n_heads, spec.d_k
        assert keys[5] == [f"({B}, {H}, {L}, {dk})", f"({B}, {H}, {L}, {L})", f"({B}, {L}, {H * dk})"]
        _, steps = app_run(lessons.exercise(0, seed).link)
        assert keys[0] == [f"k{int(np.argmax(steps['scores'][0, 0, 0])) + 1}"]
    # the worksheet shows no answers: each seed's sheet ends before the keys
    sheet = md.split("# Answer key")[0]
    assert "Right:" not in sheet and "attends most to" not in sheet


def test_problem_set_html_is_print_ready_and_escaped():
    page = problem_set.html([5, 6])
    assert page.startswith("<!doctype html>") and page.count('<section class="sheet">') == 4
    assert "page-break-after: always" in page and "@media print" in page
    assert page.count("<table>") >= 2 * (2 + 1 + 4 + 1)  # Q, K, scores, 4 panels, mask grid
    body = page.split("<body>")[1]
    assert "<script" not in body and "**" not in body
    assert "&lt;" not in body or "<code>" in body  # text is escaped, markup is ours


def test_problem_set_refuses_bad_seed_lists():
    for seeds, field in (([], "seeds"), (list(range(61)), "seeds"), ([1, -2], "seed")):
        with pytest.raises(SpecError) as info:
            problem_set.markdown(seeds)
        assert info.value.field == field
