"""attnviz.training: the twin training loops, data, pattern scores, checkpoints and validation.

Kept small for CI: a few steps each; the full targets are measured in docs/training.md.
"""

import math

import numpy as np
import pytest

from attnviz import pretrained
from attnviz import training as tr
from attnviz.errors import BudgetError, SpecError
from attnviz.exec.monitor import Monitor
from attnviz.pretrained.families import lab

pytest.importorskip("torch")
pytest.importorskip("tensorflow")

TINY = tr.TrainConfig(steps=20, snapshot_every=10, batch=16, d_model=16)


@pytest.mark.parametrize(
    "config",
    [
        tr.TrainConfig(dtype="float64", optimizer="sgd", lr=0.5, steps=25, snapshot_every=25, batch=32),
        tr.TrainConfig(
            task="induction", seq_len=8, vocab=8, n_layers=2, n_heads=2, d_model=16, causal=True, mlp=True,
            dtype="float64", optimizer="adam", lr=0.01, steps=25, snapshot_every=25, batch=16,
        ),
    ],
    ids=["reverse-sgd", "induction-mlp-adam"],
)  # fmt: skip
def test_pytorch_and_tensorflow_loss_curves_agree_in_float64(config):
    runs = {fw: tr.train(config, fw) for fw in ("torch", "tensorflow")}
    losses = {fw: np.array([h["loss"] for h in run.history]) for fw, run in runs.items()}
    assert len(losses["torch"]) == config.steps
    assert losses["torch"][-1] < losses["torch"][0]  # it trained
    rel = np.abs(losses["torch"] - losses["tensorflow"]) / np.abs(losses["torch"])
    assert rel.max() <= 1e-6, rel.max()
    for name, value in runs["torch"].params.items():
        np.testing.assert_allclose(runs["tensorflow"].params[name], value, rtol=1e-6, atol=1e-9, err_msg=name)
    np.testing.assert_allclose(runs["torch"].snapshots[-1][1], runs["tensorflow"].snapshots[-1][1], atol=1e-6)


def test_init_params_are_deterministic_and_shaped_by_the_config():
    a, b = tr.init_params(TINY), tr.init_params(TINY)
    assert list(a) == list(tr.param_shapes(TINY))
    for name, shape in tr.param_shapes(TINY).items():
        assert a[name].shape == shape and a[name].dtype == np.float32
        np.testing.assert_array_equal(a[name], b[name])
    other = tr.init_params(TINY.replace(seed=1))
    assert not np.array_equal(a["embed.token"], other["embed.token"])
    assert tr.init_params(TINY.replace(dtype="float64"))["unembed.W"].dtype == np.float64


def test_batches_are_deterministic_and_never_held_out():
    config = TINY.replace(batch=256)
    first, again = tr.Batches(config), tr.Batches(config)
    for _ in range(3):
        a, b = next(first), next(again)
        np.testing.assert_array_equal(a.x, b.x)
        np.testing.assert_array_equal(a.y, b.y)
        assert not tr.held_out_rows(a.x).any()
    assert not np.array_equal(next(tr.Batches(config.replace(seed=1))).x, next(tr.Batches(config)).x)
    assert tr.held_out_rows(tr.held_out(config).x).all()


def test_targets_and_counted_positions_by_task():
    x = np.array([[7, 9, 1, 2, 3, 1, 2, 3]])
    np.testing.assert_array_equal(tr.make_batch(TINY, x).y, x[:, ::-1])
    np.testing.assert_array_equal(tr.make_batch(TINY.replace(task="sort"), x).y, [[1, 1, 2, 2, 3, 3, 7, 9]])
    np.testing.assert_array_equal(tr.make_batch(TINY.replace(task="copy"), x).y, x)
    induction = tr.TrainConfig(task="induction", seq_len=8, vocab=8, causal=True)
    second = np.array([[0, 0, 0, 0, 0, 1, 1, 1]], bool)  # [7, 9 | 1, 2, 3 | 1, 2, 3]
    batch = tr.make_batch(induction, x, second)
    np.testing.assert_array_equal(batch.y[0, :-1], x[0, 1:])
    np.testing.assert_array_equal(batch.loss_w, batch.acc_w)  # the rest is chance
    # Inside the second copy, positions 5 and 6 predict 2 and 3 (position 7 has no target).
    np.testing.assert_array_equal(batch.acc_w, [[0, 0, 0, 0, 0, 1, 1, 0]])


def test_induction_sequences_repeat_a_span_at_varying_places():
    config = tr.TrainConfig(task="induction", seq_len=24, vocab=32, causal=True, n_layers=2)
    x, second = tr.sample(config, np.random.default_rng(0), 300)
    lengths, distances = set(), set()
    for row, where in zip(x, second, strict=True):
        idx = np.flatnonzero(where)
        m, start = len(idx), idx[0]
        assert list(idx) == list(range(start, start + m))  # one contiguous span
        span = list(row[idx])
        first = next(i for i in range(start - m + 1) if list(row[i : i + m]) == span)
        outside = np.delete(row, [*range(first, first + m), *idx])
        assert len(set(span)) == m and not set(span) & set(outside)  # no ambiguity: only the copy
        lengths.add(m)
        distances.add(start - first)
    lo, hi = tr.induction_halves(config)
    assert lengths == set(range(lo, hi + 1))
    assert len(distances) > 5  # no fixed distance to learn instead of the content


def _stack(*rows):
    return np.array(rows, dtype=float)[None]  # (N=1, T, T)


def test_pattern_scores_on_hand_built_attention():
    T = 6
    eye, anti, uniform = np.eye(T), np.eye(T)[::-1], np.full((T, T), 1 / T)
    shift = np.eye(T, k=-1)
    shift[0, 0] = 1.0  # query 0 has no previous token: it looks at itself
    induction = np.zeros((T, T))
    induction[:3, 0] = 1.0
    induction[3, 1], induction[4, 2], induction[5, 3] = 1.0, 1.0, 1.0  # [a b c a b c]: t → t − 3 + 1
    assert tr.mirror_score(anti[None]) == pytest.approx(1.0)
    assert tr.mirror_score(uniform[None]) == pytest.approx(1 / T)
    assert tr.mirror_score(eye[None]) == pytest.approx(0.0)
    assert tr.previous_token_score(shift[None]) == pytest.approx(1.0)
    assert tr.previous_token_score(eye[None]) == pytest.approx(0.0)
    assert tr.induction_score(induction[None]) == pytest.approx(1.0)
    assert tr.induction_score(shift[None]) == pytest.approx(0.0)
    assert tr.diagonal_score(eye[None]) == pytest.approx(1.0)
    assert tr.entropy(uniform[None]) == pytest.approx(math.log(T))
    assert tr.entropy(eye[None]) == pytest.approx(0.0)
    half_right = 0.5 * anti + 0.5 * uniform
    assert tr.mirror_score(half_right[None]) == pytest.approx(0.5 + 0.5 / T)
    # (N, L, H, T, T) → (L, H): averaged over the N probe sequences, per head.
    attn = np.stack([np.stack([anti, shift]), np.stack([eye, uniform])])[None].repeat(3, 0)  # (3, 2, 2, T, T)
    scores = tr.pattern_scores(attn, attn)
    np.testing.assert_allclose(scores["mirror"], [[1, 1 / T], [0, 1 / T]], atol=1e-12)  # shift: (3, 2)
    np.testing.assert_allclose(scores["previous_token"], [[1 / (T - 1), 1], [0, 1 / T]], atol=1e-12)
    assert set(scores) == set(tr.SCORES)


def test_a_short_reverse_run_learns_the_mirror():
    config = tr.TrainConfig(steps=60, snapshot_every=20, d_model=32)
    seen = []
    run = tr.train(config, "torch", monitor=Monitor(lambda done, total, r: seen.append((done, r.steps_done))))
    assert seen[:4] == [(s, s) for s in (0, 20, 40, 60)]  # a report at every snapshot (and once at the end)
    assert run.final_accuracy > 0.5  # chance is 1/vocab = 0.1
    mirror = run.score_series("mirror")[:, 0, 0]
    assert mirror[0] < 0.3 and mirror[-1] > mirror[0] + 0.3, mirror
    assert [s for s, _ in run.snapshots] == [0, 20, 40, 60]
    assert run.snapshots[-1][1].shape == (1, 1, 8, 8)


def test_a_stop_keeps_what_was_trained():
    calls = iter(range(1000))
    monitor = Monitor()
    monitor.stopped = lambda: next(calls) >= 7
    run = tr.train(TINY, "torch", monitor=monitor)
    assert run.stopped and run.steps_done == 7 and run.finished
    assert run.snapshots[-1][0] == 7 and run.final_accuracy is not None


def test_too_many_snapshots_are_refused_before_training():
    config = tr.TrainConfig(steps=100_000, snapshot_every=1)
    with pytest.raises(BudgetError) as err:
        tr.train(config, "torch")
    assert err.value.field == "memory_budget" and "snapshot_every" in str(err.value)
    tr.check_budget(config.replace(snapshot_every=250))  # 401 snapshots: allowed


def test_save_then_pretrained_load_gives_the_trained_attention(tmp_path):
    run = tr.train(TINY.replace(task="sort", n_layers=2, n_heads=2, mlp=True), "torch")
    model = pretrained.load(str(run.save(tmp_path / "ckpt")))  # the Pretrained page's door
    assert (tmp_path / "ckpt" / "config.json").exists() and (tmp_path / "ckpt" / "model.safetensors").exists()
    assert isinstance(model, pretrained.Checkpoint) and model.config.train == run.config
    text = " ".join(str(t) for t in run.probe[0])
    for fw in ("torch", "tensorflow"):
        out = model.run(text, fw)
        assert out.tokens == text.split()
        np.testing.assert_allclose(out.attentions, run.snapshots[-1][1], atol=1e-5)
        assert out.logits.shape == (8, 10) and out.last_hidden_state.shape == (8, 16)
    with pytest.raises(SpecError) as err:
        model.run("1 2 99")
    assert err.value.field == "text"


@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
def test_steps_per_second_with_attnvizs_layer_and_the_native_one(framework):
    config = TINY.replace(task="induction", seq_len=8, vocab=8, causal=True, n_layers=2, n_heads=2)
    for impl in ("attnviz", "native"):
        rate = tr.steps_per_second(config, framework, impl, steps=3, warmup=2)
        assert math.isfinite(rate) and rate > 0


BAD = [
    ("task", "translate"),
    ("seq_len", 1),
    ("seq_len", 65),
    ("seq_len", 8.0),
    ("vocab", 1),
    ("n_layers", 0),
    ("n_heads", 9),
    ("d_model", 1),
    ("d_k", 0),
    ("d_v", 257),
    ("causal", "yes"),
    ("mlp", 1),
    ("steps", 0),
    ("batch", 2000),
    ("lr", 0.0),
    ("lr", float("nan")),
    ("lr", True),
    ("optimizer", "rmsprop"),
    ("seed", -1),
    ("dtype", "float16"),
    ("snapshot_every", 0),
]


@pytest.mark.parametrize(("field", "value"), BAD)
def test_every_field_is_validated(field, value):
    with pytest.raises(SpecError) as err:
        tr.TrainConfig(**{field: value})
    assert err.value.field == field
    assert str(err.value).startswith(f"TrainConfig.{field}: got ") and "allowed: " in str(err.value)


def test_every_field_has_a_validation_case():
    assert {f for f, _ in BAD} == set(tr.TrainConfig.__dataclass_fields__)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"task": "induction", "causal": False}, "causal"),
        ({"task": "induction", "causal": True, "seq_len": 5}, "seq_len"),
        ({"task": "induction", "causal": True, "seq_len": 16, "vocab": 8}, "vocab"),
        ({"task": "reverse", "causal": True}, "causal"),
        ({"n_heads": 3, "d_model": 32}, "n_heads"),
    ],
)
def test_fields_that_contradict_each_other(changes, field):
    with pytest.raises(SpecError) as err:
        tr.TrainConfig(**changes)
    assert err.value.field == field
    tr.TrainConfig(n_heads=3, d_model=32, d_k=8, d_v=8)  # explicit head widths: any head count


def test_a_saved_run_is_found_by_its_session_and_name_only(monkeypatch, tmp_path):
    monkeypatch.setenv(tr.save.ENV_DIR, str(tmp_path))
    run = tr.train(TINY.replace(steps=2, snapshot_every=1), "torch")
    name = tr.share(run, tr.owner_of("session-a"))
    assert name.startswith("reverse · PyTorch · ") and tr.share(run, tr.owner_of("session-a")) == name
    assert pretrained.load(tr.session_checkpoint("session-a", name)).config.train == run.config
    assert "session-a" not in " ".join(str(p) for p in tmp_path.rglob("*"))  # only its hash is on disk
    for session, bad in (("session-b", name), ("session-a", "../etc"), ("session-a", str(tmp_path))):
        with pytest.raises(SpecError) as err:
            tr.session_checkpoint(session, bad)
        assert err.value.field == "trained"


def test_saved_runs_are_capped_oldest_first_by_count_and_bytes(monkeypatch, tmp_path):
    monkeypatch.setenv(tr.save.ENV_DIR, str(tmp_path))
    runs = [tr.train(TINY.replace(steps=1, snapshot_every=1, seed=s), "torch") for s in range(4)]
    limits = tr.TrainLimits(saved=2)
    names = [tr.share(r, tr.owner_of(f"s{i}"), limits) for i, r in enumerate(runs)]
    kept = list(tmp_path.glob("*/*/model.safetensors"))
    assert len(kept) == 2  # the two oldest were deleted
    assert tr.session_checkpoints("s0") == {} and list(tr.session_checkpoints("s3")) == [names[3]]
    one = sum(v.nbytes for v in runs[0].params.values())
    tr.share(runs[0], tr.owner_of("s0"), tr.TrainLimits(saved_mb=1.5 * one / 2**20))  # room for one only
    assert len(list(tmp_path.glob("*/*/model.safetensors"))) == 1
    with pytest.raises(BudgetError, match="ATTNVIZ_TRAIN_SAVED_MB"):
        tr.share(runs[1], tr.owner_of("s1"), tr.TrainLimits(saved_mb=0.5 * one / 2**20))


def test_downloads_hold_the_whole_run():
    import io

    run = tr.train(TINY, "torch")
    lines = run.history_csv().splitlines()
    assert lines[0] == "step,loss,accuracy" and len(lines) == 1 + TINY.steps
    assert float(lines[-1].split(",")[1]) == pytest.approx(run.history[-1]["loss"], rel=1e-8)
    npz = np.load(io.BytesIO(run.snapshots_npz()))
    assert list(npz["steps"]) == [0, 10, 20]
    assert npz["attentions"].shape == (3, 1, 1, 8, 8)
    np.testing.assert_array_equal(npz["attentions"][-1], run.snapshots[-1][1])
    np.testing.assert_allclose(npz["score_mirror"][:, 0, 0], run.score_series("mirror")[:, 0, 0])


@pytest.mark.parametrize("threads", [100_000, 0, -1, math.nan, 1.5, "2", True])
@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
def test_thread_counts_outside_the_machine_are_refused_before_any_work(threads, framework, monkeypatch):
    # 100000 threads crashed the process (segfault in torch); refused before a model is built.
    monkeypatch.setattr(tr.loop, "Trainer", None)  # reaching it would be a TypeError, not a SpecError
    with pytest.raises(SpecError) as error:
        tr.train(TINY, framework, threads=threads)
    assert error.value.field == "threads"
    with pytest.raises(SpecError, match="threads"):
        tr.steps_per_second(TINY, framework, threads=threads)


def test_the_machines_cores_are_allowed():
    import os

    cores = min(tr.MAX_THREADS, os.cpu_count())
    assert tr.check_threads(cores) == cores
    with pytest.raises(SpecError, match=f"from 1 to {cores}"):
        tr.check_threads(cores + 1)


def _broken(name, value):
    params = tr.init_params(TINY)
    if value is None:
        del params[name]
    else:
        params[name] = value
    return params


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("embed.token", np.full((10, 16), np.nan)),
        ("unembed.W", np.full((16, 10), np.inf)),
        ("layers.0.attn.W_q", np.full((16, 16), 1e30)),
        ("unembed.b", None),  # missing
        ("unembed.b", np.zeros(3)),  # wrong shape
        ("embed.position", "strings"),
        ("layers.0.ln1.gamma", [["ragged"], [1, 2]]),
    ],
    ids=["nan", "inf", "1e30", "missing", "shape", "string", "ragged"],
)
@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
def test_bad_starting_weights_are_blamed_on_the_weight_not_lr(name, value, framework):
    with pytest.raises(SpecError) as error:
        tr.train(TINY, framework, params=_broken(name, value))
    assert error.value.field == f"params[{name!r}]", str(error.value)
    assert "lr" not in str(error.value)


def test_unknown_weights_and_a_non_dict_are_refused():
    with pytest.raises(SpecError, match="params"):
        tr.train(TINY, params=_broken("extra.W", np.zeros(2)))
    with pytest.raises(SpecError, match="params"):
        tr.train(TINY, params=[1, 2, 3])


def test_finite_weights_that_overflow_the_forward_are_blamed_on_the_weights(monkeypatch):
    # Past the size check (raised here), 1e20 weights overflow float32 in the first forward pass.
    monkeypatch.setattr(lab, "PARAM_MAX", 1e30)
    params = {k: np.full_like(v, 1e20) for k, v in tr.init_params(TINY).items()}
    with pytest.raises(SpecError) as error:
        tr.train(TINY, params=params)
    assert error.value.field == "params" and "lr" not in str(error.value)


def test_good_starting_weights_are_used_exactly():
    params = tr.init_params(TINY.replace(seed=7))
    run = tr.train(TINY.replace(steps=1, snapshot_every=1), params=params)
    again = tr.train(TINY.replace(steps=1, snapshot_every=1, seed=0), params=params)
    np.testing.assert_array_equal(run.snapshots[0][1], again.snapshots[0][1])
    assert not np.array_equal(
        run.snapshots[0][1], tr.train(TINY.replace(steps=1, snapshot_every=1)).snapshots[0][1]
    )


@pytest.mark.parametrize("data", [None, [1, 2], "reverse", 3])
def test_from_dict_of_something_else_is_a_spec_error(data):
    with pytest.raises(SpecError) as error:
        tr.TrainConfig.from_dict(data)
    assert error.value.field == "config"


def test_train_refuses_a_dict_for_a_config():
    with pytest.raises(SpecError, match="TrainConfig"):
        tr.train(TINY.to_dict())
