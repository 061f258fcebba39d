"""The circuits lesson against transformers: every answer recomputed with the model's own layers and hooks.

Oracles (transformers, eager attention, on the same weights): the role scores by their definitions
in NumPy on `output_attentions`; zero-ablation as a pre-hook on `o_proj` that zeroes a head's slice,
the loss on the repeated half by log-softmax in NumPy; activation patching as a pre-hook that puts a
head's clean slice into the corrupted run; attribution patching as hooks and autograd
(`tests.interp.test_interp_attribution.reference`). Fast tests run a tiny random Llama built here on several
seeds; their `slow` twins run SmolLM2 on one seed each (the real model's numbers; the seeds' variety is
the tiny model's to test).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from attnviz import lessons, pretrained
from attnviz.errors import SpecError
from attnviz.exec.monitor import Monitor
from attnviz.interp import patching, roles
from attnviz.lessons import checkpoints, circuits, problem_set
from attnviz.plots import reveals
from tests.interp.test_interp_attribution import reference as attribution_reference
from tests.lessons.test_lessons_modern import assert_grades, wrong_feedback
from tests.pretrained.test_llama import make_tiny_llama

transformers = pytest.importorskip("transformers", reason="transformers (the oracle) is not installed")
torch = pytest.importorskip("torch")

SEEDS = (0, 1, 2, 3, 5, 8, 13, lessons.MAX_SEED)
CLEAN, CORRUPTED = "The cat sat on the mat because it was", "The dog sat on the mat because it was"


def answer_pair(ckpt) -> tuple[int, int]:
    """The clean prompt's most likely next token, and the corrupted prompt's (or the runner-up)."""
    clean = ckpt.run(CLEAN).logits[-1, : ckpt.n_tokens]
    corrupted = ckpt.run(CORRUPTED).logits[-1, : ckpt.n_tokens]
    answer, wrong = int(clean.argmax()), int(corrupted.argmax())
    return answer, (wrong if wrong != answer else int(np.argsort(clean)[-2]))


CIRCUITS = lessons.lesson("circuits")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(attnviz checkpoint, transformers model, the lesson's pairs for it): a tiny random Llama with
    2 layers of 4 query heads on 2 K/V heads (the lesson's sweep patches its last layer)."""
    folder = make_tiny_llama(tmp_path_factory.mktemp("tiny-llama-circuits"), tie=False, seed=11)
    hf = transformers.LlamaForCausalLM.from_pretrained(str(folder), attn_implementation="eager").eval()
    ckpt = pretrained.load(folder)
    answer, wrong = answer_pair(ckpt)
    return ckpt, hf, (circuits.Pair(CLEAN, CORRUPTED, answer, wrong),)


@pytest.fixture(scope="module")
def smollm2():
    if not checkpoints.available(checkpoints.SMOLLM2):
        pytest.skip(
            f"{checkpoints.SMOLLM2} is not installed: {pretrained.not_installed()[checkpoints.SMOLLM2]}"
        )
    ckpt = checkpoints.load()
    hf = transformers.LlamaForCausalLM.from_pretrained(str(ckpt.path), attn_implementation="eager").eval()
    return ckpt, hf, circuits.PAIRS


def scan_ids(ckpt, seed: int) -> np.ndarray:
    """The repeated sequence the seed's exercise reads (the library's input generator, not its scan)."""
    sequence = circuits._shared(seed, 90, circuits.SEQUENCES)
    return roles.repeated_sequences(ckpt, circuits.HALF, 1, sequence)[0]


def hf_scores(hf, ids: np.ndarray) -> dict[str, np.ndarray]:
    """`{role: (L, H)}` by the definitions, on transformers' attentions."""
    with torch.no_grad():
        attn = torch.stack(hf(torch.tensor([ids.tolist()]), output_attentions=True).attentions)[:, 0]
    a, half = attn.double().numpy(), len(ids) // 2  # (L, H, T, T)
    t, i = np.arange(half, 2 * half), np.arange(1, len(ids))
    return {
        "induction": a[..., t, t - half + 1].mean(-1),
        "previous_token": a[..., i, i - 1].mean(-1),
        "duplicate_token": a[..., t, t - half].mean(-1),
        "first_token": a[..., 1:, 0].mean(-1),
    }


def heads_of(ex) -> list[tuple[int, int]]:
    return [tuple(int(x) for x in o[1:].split(".H")) for o in ex.parts[0].options]


def check_induction(ckpt, hf, seeds):
    for seed in seeds:
        ex = circuits.induction(seed, ckpt=ckpt)
        scores = hf_scores(hf, scan_ids(ckpt, seed))
        H = scores["induction"].shape[1]
        heads, taken = heads_of(ex), []
        for role in ("induction", "previous_token", "duplicate_token", "first_token"):
            order = np.argsort(-scores[role], axis=None, kind="stable")
            taken.append(next((int(j // H), int(j % H)) for j in order if (j // H, j % H) not in taken))
        assert sorted(heads) == sorted(taken)
        assert heads[ex.parts[0].answer] == taken[0]
        for role, grid in scores.items():
            np.testing.assert_allclose(ex.data["scores"][role], grid, atol=1e-4)
        assert_grades(ex)
        (question,) = reveals.question(ex.id, ex.data)
        titles = [a.text for a in question.layout.annotations][:4]
        assert titles == list(ex.parts[0].options)  # each panel named as its option


def test_induction_head_is_the_scan_definition_on_transformers_attentions(tiny):
    check_induction(*tiny[:2], SEEDS)


@pytest.mark.slow
def test_induction_head_on_smollm2(smollm2):
    check_induction(*smollm2[:2], SEEDS[:1])


# -- ablation -----------------------------------------------------------------------------------------------


def hf_second_half_loss(hf, ids: np.ndarray, heads=()) -> float:
    """Cross-entropy of the repeated half with `heads` zeroed before each layer's `o_proj`."""
    cfg = hf.config
    width = cfg.hidden_size // cfg.num_attention_heads

    def zero(layer):
        def hook(_module, args):
            z = args[0].clone()
            for lay, h in heads:
                if lay == layer:
                    z[..., h * width : (h + 1) * width] = 0
            return (z,)

        return hook

    hooks = [
        block.self_attn.o_proj.register_forward_pre_hook(zero(i)) for i, block in enumerate(hf.model.layers)
    ]
    try:
        with torch.no_grad():
            logits = hf(torch.tensor([ids.tolist()])).logits[0].double().numpy()
    finally:
        for hook in hooks:
            hook.remove()
    half = len(ids) // 2
    t = np.arange(half, len(ids) - 1)
    z = logits[t] - logits[t].max(-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return float(-log_p[np.arange(len(t)), ids[t + 1]].mean())


def direction(change: float) -> int:
    """The option a loss change answers: 0 up, 1 down, 2 about the same (within the lesson's ±SAME)."""
    return 0 if change > circuits.SAME else 1 if change < -circuits.SAME else 2


def check_ablation(ckpt, hf, seeds):
    for seed in seeds:
        ex = circuits.ablation(seed, ckpt=ckpt)
        ids = scan_ids(ckpt, seed)
        found = circuits.induction(seed, ckpt=ckpt)
        top = heads_of(found)[found.parts[0].answer]
        assert ex.data["head"] == circuits.name(top)
        cmp = circuits.ablated(ckpt, circuits._shared(seed, 90, circuits.SEQUENCES))
        baseline, ablated = hf_second_half_loss(hf, ids), hf_second_half_loss(hf, ids, [top])
        randoms = [hf_second_half_loss(hf, ids, heads) for heads in cmp.random_heads]
        assert top not in [h for heads in cmp.random_heads for h in heads]
        np.testing.assert_allclose([ex.data["baseline"], ex.data["top"]], [baseline, ablated], atol=1e-3)
        np.testing.assert_allclose(ex.data["random"], randoms, atol=1e-3)
        assert ex.parts[0].answer == direction(ablated - baseline)
        assert ex.parts[1].answer == direction(np.mean(randoms) - baseline)
        assert_grades(ex)


def test_ablation_losses_are_transformers_with_the_head_zeroed(tiny):
    check_ablation(*tiny[:2], SEEDS[:4])


@pytest.mark.slow
def test_ablation_on_smollm2(smollm2):
    check_ablation(*smollm2[:2], SEEDS[:1])


# -- patching -----------------------------------------------------------------------------------------------


def hf_restored(hf, pair_ids, heads) -> tuple[dict, float, float]:
    """Each head's restored share, by patching its clean slice of `o_proj`'s input into the corrupted run."""
    (clean_ids, corrupted_ids), (a, w) = pair_ids
    layers = hf.model.layers
    width = hf.config.hidden_size // hf.config.num_attention_heads
    z, patch = {}, {}

    def hook(layer):
        def run(_module, args):
            z[layer] = args[0].clone()
            if layer in patch:
                h, value = patch[layer]
                out = args[0].clone()
                out[..., h * width : (h + 1) * width] = value
                return (out,)
            return None

        return run

    hooks = [block.self_attn.o_proj.register_forward_pre_hook(hook(i)) for i, block in enumerate(layers)]

    def diff(ids) -> float:
        with torch.no_grad():
            logits = hf(torch.tensor([ids])).logits[0, -1].double()
        return float(logits[a] - logits[w])

    try:
        clean = diff(clean_ids)
        z_clean = {i: v.clone() for i, v in z.items()}
        corrupted, out = diff(corrupted_ids), {}
        for layer, h in heads:
            patch.clear()
            patch[layer] = (h, z_clean[layer][..., h * width : (h + 1) * width])
            out[layer, h] = (diff(corrupted_ids) - corrupted) / (clean - corrupted)
    finally:
        for one in hooks:
            one.remove()
    return out, clean, corrupted


def pair_ids(ckpt, pair):
    a = patching.token_id(ckpt, pair.answer, "answer")
    w = patching.token_id(ckpt, pair.wrong, "wrong")
    return (ckpt.encode(pair.clean)[0], ckpt.encode(pair.corrupted)[0]), (a, w)


def check_patching(ckpt, hf, pairs, seeds, every_head: bool):
    for seed in seeds:
        ex = circuits.patching(seed, ckpt=ckpt, pairs=pairs)
        pair = pairs[circuits._shared(seed, 91, len(pairs))]
        L, H = ex.data["restored"].shape
        swept = list(circuits.swept_layers(L))
        heads = [(lay, h) for lay in swept for h in range(H)] if every_head else heads_of(ex)
        exact, _, _ = hf_restored(hf, pair_ids(ckpt, pair), heads)
        for head, value in exact.items():
            assert ex.data["restored"][head] == pytest.approx(value, abs=1e-3 + 1e-3 * abs(value))
        assert np.isnan(ex.data["restored"][: swept[0]]).all()  # only the last third is swept
        best = max(heads_of(ex), key=exact.get)
        assert heads_of(ex)[ex.parts[0].answer] == best
        if every_head:
            assert best == max(exact, key=exact.get)
        assert_grades(ex)
        (fig,) = reveals.reveal(ex.id, ex.data)
        assert fig.data[0].z.shape == (L, H)


def test_patching_answer_is_transformers_patched_runs(tiny):
    check_patching(*tiny, SEEDS, every_head=True)


@pytest.mark.slow
def test_patching_on_smollm2(smollm2):
    check_patching(*smollm2, SEEDS[:1], every_head=False)


def test_a_sweep_of_some_layers_is_those_rows_of_the_full_sweep(tiny):
    ckpt, _, (pair,) = tiny
    full = patching.sweep(ckpt, *pair)
    seen = []
    part = patching.sweep(ckpt, *pair, layers=[1], monitor=Monitor(lambda d, t, _: seen.append((d, t))))
    np.testing.assert_allclose(part.restored[1], full.restored[1], rtol=1e-6, atol=1e-7)
    assert np.isnan(part.restored[0]).all() and not part.done[0].any() and part.done[1].all()
    assert seen == [(4, 4)]
    np.testing.assert_allclose(
        patching.sweep(ckpt, *pair, layers=range(2)).restored, full.restored, rtol=1e-6
    )
    for bad in ([], [1, 0], [1, 1], [2], [-1], "1", [True], 1):
        with pytest.raises(SpecError) as info:
            patching.sweep(ckpt, *pair, layers=bad)
        assert info.value.field == "layers"


# -- attribution ------------------------------------------------------------------------------------------


def check_attribution(ckpt, hf, pairs, seeds):
    for seed in seeds:
        ex = circuits.attribution(seed, ckpt=ckpt, pairs=pairs)
        pair = pairs[circuits._shared(seed, 91, len(pairs))]
        (clean_ids, corrupted_ids), (a, w) = pair_ids(ckpt, pair)
        H = hf.config.num_attention_heads
        estimate, _, _ = attribution_reference(hf, "llama", clean_ids, corrupted_ids, a, w, H)
        layers = ex.data["layers"]
        np.testing.assert_allclose(ex.data["estimate"], estimate[layers], atol=1e-4)
        i, h = ex.data["highlight"]
        top = (layers[i], h)
        exact, _, _ = hf_restored(hf, pair_ids(ckpt, pair), [top])
        e, est = (float(f"{x:.2f}") for x in (exact[top], estimate[top]))  # as the student reads them
        want = 0 if abs(est - e) <= circuits.CLOSE + 1e-9 else 1 if est > e else 2
        assert ex.parts[0].answer == want
        flat = np.argmax(estimate[layers])
        assert ex.parts[1].answer == (0 if (layers[flat // H], flat % H) == top else 1)
        assert_grades(ex)
        (fig,) = reveals.reveal(ex.id, ex.data)
        ringed = fig.data[-1]
        assert (ringed.x[0], ringed.y[0]) == pytest.approx(
            (ex.data["exact"][i, h], ex.data["estimate"][i, h])
        )


def test_attribution_answers_are_hooks_and_autograd(tiny):
    check_attribution(*tiny, SEEDS[:5])


@pytest.mark.slow
def test_attribution_on_smollm2(smollm2):
    check_attribution(*smollm2, SEEDS[:1])


# -- the lesson as a whole ------------------------------------------------------------------------------------


def test_a_class_costs_a_few_runs_not_one_per_seed(tiny, monkeypatch):
    ckpt, _, pairs = tiny
    calls = {"scan": 0, "sweep": 0}
    real_scan, real_sweep = roles.scan, patching.sweep

    def count(name, fn):
        def wrapped(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)

        return wrapped

    monkeypatch.setattr(roles, "scan", count("scan", real_scan))
    monkeypatch.setattr(patching, "sweep", count("sweep", real_sweep))
    for kept in (circuits.role_scan, circuits.ablated, circuits.swept, circuits.estimated):
        kept.cache_clear()
    for seed in range(30):
        circuits.induction(seed, ckpt=ckpt)
        circuits.ablation(seed, ckpt=ckpt)
        circuits.patching(seed, ckpt=ckpt, pairs=pairs)
        circuits.attribution(seed, ckpt=ckpt, pairs=pairs)
    assert 1 <= calls["scan"] <= circuits.SEQUENCES and calls["sweep"] == len(pairs)


def test_same_seed_same_exercise_and_wrong_feedback_keeps_the_answer(tiny):
    ckpt, _, pairs = tiny
    builds = {
        "induction": lambda s: circuits.induction(s, ckpt=ckpt),
        "ablation": lambda s: circuits.ablation(s, ckpt=ckpt),
        "patching": lambda s: circuits.patching(s, ckpt=ckpt, pairs=pairs),
        "attribution": lambda s: circuits.attribution(s, ckpt=ckpt, pairs=pairs),
    }
    assert list(builds) == [s.key for s in CIRCUITS.all_steps]
    for key, build in builds.items():
        a, b = build(21), build(21)
        assert a.id == f"circuits.{key}" and a.given == b.given
        assert [p.options for p in a.parts] == [p.options for p in b.parts]
        for k, part in enumerate(a.parts):
            for wrong in range(len(part.options)):
                if wrong != part.answer:
                    wrong_feedback(a, k, wrong)
        assert reveals.reveal(a.id, a.data)


def test_problem_set_covers_the_circuits_lesson(tiny, monkeypatch):
    ckpt, _, pairs = tiny
    monkeypatch.setattr(checkpoints, "load", lambda name=checkpoints.SMOLLM2: ckpt)
    monkeypatch.setattr(checkpoints, "available", lambda name: True)
    monkeypatch.setattr(circuits, "PAIRS", pairs)
    md = problem_set.markdown([5, 6], lessons=("circuits",))
    for seed in (5, 6):
        section = md.split(f"# Answer key “Circuits” — seed {seed}\n")[1].split("# Answer key")[0]
        keys = re.findall(r"(?m)^- (?:\([a-h]\) )?\*\*(.+?)\*\*$", section)
        assert keys == [p.answer_text for i in range(4) for p in CIRCUITS.exercise(i, seed).parts]
        sheet = md.split(f"# attnviz lesson “Circuits” — worksheet, seed {seed}\n")[1].split("\n# ")[0]
        induction = CIRCUITS.exercise(0, seed)
        for option in induction.parts[0].options:  # each head's second-copy rows, printed
            table = sheet.split(f"*{option}*\n\n")[1].split("\n\n")[0].splitlines()
            assert len(table) == 2 + circuits.HALF and table[2].startswith(f"| **{circuits.HALF}** |")
    assert "Right:" not in md.split("# Answer key")[0]
    assert problem_set.html([5], lessons=("circuits",)).count('<section class="sheet">') == 2
