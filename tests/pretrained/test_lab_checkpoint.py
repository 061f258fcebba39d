"""A Training-lab checkpoint is a model family like GPT-2: loaded by `pretrained.load`, run with
ablation, step capture, next tokens and generation through `Checkpoint`, and every file checked
(`CheckpointError` naming file and field) — issue 16, issue 20 §2.

The reference is the lab's own trainer (`backend(fw).train.Model.forward`), which the
checkpoint's model (`backends/*/decoder.py` with `pretrained.families.layouts.lab_layout`) must match.
"""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

from attnviz import pretrained
from attnviz import training as tr
from attnviz.errors import SpecError
from attnviz.frameworks import backend
from tests.conftest import RTOL_F32, assert_close

pytest.importorskip("torch")
pytest.importorskip("tensorflow")

CONFIG = tr.TrainConfig(
    task="induction", seq_len=8, vocab=8, n_layers=2, n_heads=2, d_model=16, causal=True, mlp=True,
    steps=3, snapshot_every=1, batch=8,
)  # fmt: skip
TEXT = "1 2 3 4 1 2"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    run = tr.train(CONFIG, "torch")
    return run, run.save(tmp_path_factory.mktemp("lab") / "model")


@pytest.fixture(scope="module")
def lab(saved):
    return pretrained.load(saved[1])


def reference(params: dict, framework: str, ids: list[int]):
    """The trainer's forward pass: `logits (T, V)`, `hidden (T, D)`, `attentions (L, H, T, T)`."""
    model = backend(framework).train.Model(CONFIG, params)
    logits, hidden, attn = model.forward_numpy(np.array([ids]))
    return logits[0], hidden[0], attn[0]


def test_a_lab_checkpoint_is_a_checkpoint_of_its_own_family(lab, saved):
    run, _ = saved
    assert isinstance(lab, pretrained.Checkpoint) and lab.config.train == run.config
    assert lab.kind == "decoder" and lab.config.model_type == "attnviz-training"
    assert lab.labels([3, 1]) == ["3", "1"]


def test_the_checkpoint_zip_unpacks_to_the_saved_folder(saved, tmp_path):
    """The Training lab's "Checkpoint .zip" download: the files `save` writes, byte for byte, which
    `pretrained.load` opens as the same model."""
    run, folder = saved
    with zipfile.ZipFile(io.BytesIO(run.checkpoint_zip())) as zf:
        assert sorted(zf.namelist()) == sorted(f"checkpoint/{f.name}" for f in folder.iterdir())
        zf.extractall(tmp_path)
    for file in folder.iterdir():
        assert (tmp_path / "checkpoint" / file.name).read_bytes() == file.read_bytes()
    again = pretrained.load(tmp_path / "checkpoint")
    assert again.config.train == run.config
    np.testing.assert_array_equal(
        again.run(TEXT, "torch").attentions, pretrained.load(folder).run(TEXT, "torch").attentions
    )


def test_run_matches_the_trainer(lab, saved, framework):
    run, _ = saved
    out = lab.run(TEXT, framework)
    logits, hidden, attn = reference(run.params, framework, out.ids)
    assert out.tokens == TEXT.split()
    assert_close(out.logits, logits, RTOL_F32, "logits")
    assert_close(out.last_hidden_state, hidden, RTOL_F32, "last hidden state")
    assert_close(out.attentions, attn, RTOL_F32, "attentions")
    assert out.hidden_states.shape == (3, 6, 16)
    np.testing.assert_array_equal(out.hidden_states[-1], out.last_hidden_state)
    lens = lab.logit_lens(out)  # the lab has no final norm: each hidden state @ W + b, in float64 here
    W, b = (run.params[k].astype(np.float64) for k in ("unembed.W", "unembed.b"))
    assert_close(lens, out.hidden_states.astype(np.float64) @ W + b, RTOL_F32, "logit lens")
    assert_close(lens[-1], out.logits, RTOL_F32, "logit lens, last layer")


def test_ablation_equals_zeroing_the_heads_output_weights(lab, saved, framework):
    """Zero-ablating head h of layer l = removing rows h·Dv … (h+1)·Dv of that layer's W_o."""
    run, _ = saved
    Dv = CONFIG.head_dims[1]
    params = {k: v.copy() for k, v in run.params.items()}
    params["layers.1.attn.W_o"][Dv : 2 * Dv] = 0
    out = lab.run(TEXT, framework, ablate={(1, 1): "zero"})
    assert_close(out.logits, reference(params, framework, out.ids)[0], RTOL_F32, "ablated logits")
    assert out.ablate == {(1, 1): "zero"}


def test_capture_next_tokens_and_generation(lab, framework):
    out = lab.run(TEXT, framework, capture_layer=1)
    assert out.capture_layer == 1 and "softmax" in [s.name for s in out.steps]
    np.testing.assert_allclose(
        next(s for s in out.steps if s.name == "softmax").value[0], out.attentions[1], atol=1e-7
    )
    top = lab.next_tokens(out.logits[-1], k=3)
    probs = pretrained.next_token_probabilities(out.logits[-1])
    assert [t for t, _ in top] == [str(i) for i in np.argsort(-probs, kind="stable")[:3]]
    gen = lab.generate(TEXT, framework, 2, temperature=0)
    assert len(gen.new_ids) == 2 and gen.text.split()[:6] == TEXT.split()
    assert gen.new_ids[0] == int(np.argmax(out.logits[-1]))


def test_bad_text_names_the_field(lab):
    for text in ("1 2 99", "a b", "1 " * 9):
        with pytest.raises(SpecError) as err:
            lab.run(text)
        assert err.value.field == "text"


# -- every file checked ------------------------------------------------------------------------


def rewrite(saved, tmp_path, config=None, weights=None):
    """A copy of the saved checkpoint with `config.json` and/or the weights replaced."""
    folder = tmp_path / "bad"
    folder.mkdir()
    meta = json.loads((saved[1] / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config(meta) if config else meta))
    if isinstance(weights, bytes):
        (folder / "model.safetensors").write_bytes(weights)
    else:
        from safetensors.numpy import save_file

        params = {k: v.copy() for k, v in saved[0].params.items()}
        save_file(weights(params) if weights else params, str(folder / "model.safetensors"))
    return folder


def without(meta, key):
    return {k: v for k, v in meta.items() if k != key}


def with_nan(params):
    params["layers.0.attn.W_q"][0, 0] = np.nan
    return params


def as_int32(params):
    params["embed.token"] = params["embed.token"].astype(np.int32)
    return params


def huge(params):
    params["embed.token"] = params["embed.token"] * 0 + 1e19
    return params


@pytest.mark.parametrize(
    "config, weights, file, field",
    [
        (lambda m: without(m, "training_config"), None, "config.json", "training_config"),
        (lambda m: {**m, "training_config": None}, None, "config.json", "training_config"),
        (lambda m: {**m, "training_config": {**m["training_config"], "n_heads": 3}}, None, "config.json",
         "training_config.n_heads"),
        (lambda m: {**m, "training_config": {**m["training_config"], "colour": 1}}, None, "config.json",
         "training_config"),
        (lambda m: {**m, "model_type": ["attnviz-training"]}, None, "config.json", "model_type"),
        (None, b"garbage, not safetensors", "model.safetensors", None),
        (None, with_nan, "model.safetensors", "layers.0.attn.W_q"),
        (None, as_int32, "model.safetensors", "embed.token"),
        (None, huge, "model.safetensors", "embed.token"),
    ],
    ids=["no-training-config", "null", "bad-field", "unknown-field", "model-type-list", "garbage", "nan",
         "int32", "huge"],
)  # fmt: skip
def test_bad_lab_files_name_file_and_field(saved, tmp_path, config, weights, file, field):
    with pytest.raises(pretrained.CheckpointError) as err:
        pretrained.load(rewrite(saved, tmp_path, config, weights))
    assert err.value.file == file and str(err.value).startswith(file)
    if field is not None:
        assert err.value.field == field
