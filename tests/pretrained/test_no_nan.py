"""No NaN from finite input at the pretrained doors (issue 20 §2), and one message for every Hub
id a visitor names, whatever folders exist here (issue 20 §3)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.backends.common import Forward
from attnviz.errors import SpecError
from attnviz.pretrained.model import _check_finite
from tests.pretrained.test_gpt2 import make_tiny_gpt2, rewrite

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_tiny_gpt2(tmp_path_factory.mktemp("tiny-gpt2"))


@pytest.fixture(scope="module")
def gpt(folder):
    return pretrained.load(folder)


# -- next-token probabilities --------------------------------------------------------------------


@pytest.mark.parametrize("temperature", [0.05, 0.5, 1.0, 2.0])
def test_extreme_finite_logits_give_finite_probabilities(temperature):
    for logits in ([1e308, -1e308, 0.0], [-1e308, -1e308, -1e308], [1.7e308, 1.7e308, -1.7e308]):
        p = pretrained.next_token_probabilities(np.array(logits), temperature)
        assert np.isfinite(p).all() and abs(p.sum() - 1) < 1e-12, (logits, p)
    p = pretrained.next_token_probabilities(np.array([1e308, -1e308, 0.0]), 0.5)
    np.testing.assert_array_equal(p, [1, 0, 0])
    p = pretrained.next_token_probabilities(np.array([1.7e308, 1.7e308, -1.7e308]), temperature)
    np.testing.assert_allclose(p, [0.5, 0.5, 0], atol=1e-15)


def test_ordinary_logits_match_the_float64_softmax():
    z = np.random.default_rng(0).normal(0, 5, 50)
    for t in (0.05, 0.7, 2.0):
        expected = np.exp(z / t - (z / t).max())
        np.testing.assert_allclose(
            pretrained.next_token_probabilities(z, t), expected / expected.sum(), rtol=1e-12
        )


@pytest.mark.parametrize(
    "temperature", [1e-310, 1e-6, 0.04, 2.01, 100, -1, float("nan"), float("inf"), True, "1"]
)
def test_temperature_has_the_sliders_bounds(temperature):
    lo, hi = pretrained.TEMPERATURE
    assert (lo, hi) == (0.05, 2.0)
    with pytest.raises(SpecError) as err:
        pretrained.next_token_probabilities(np.zeros(3), temperature)
    assert err.value.field == "temperature"


def test_k_is_an_integer_of_at_least_one(gpt):
    logits = gpt.run("The cat").logits[-1]
    for k in (-1, 0, 1.5, "3", True, None):
        with pytest.raises(SpecError) as err:
            gpt.next_tokens(logits, k=k)
        assert err.value.field == "k"
    for top_k in (-1, 0, 1.5):
        with pytest.raises(SpecError) as err:
            pretrained.next_token_probabilities(logits, 1.0, top_k)
        assert err.value.field == "top_k"
    assert len(gpt.next_tokens(logits, k=1)) == 1
    with pytest.raises(SpecError) as err:
        gpt.generate("The cat", max_new_tokens=2, temperature=1e-310)
    assert err.value.field == "temperature"


# -- checkpoints whose forward pass would overflow ----------------------------------------------


def huge(folder, tmp_path, name, value):
    from safetensors.numpy import load_file, save_file

    out = rewrite(folder, tmp_path)
    tensors = load_file(str(out / "model.safetensors"))
    tensors[name] = np.full_like(tensors[name], value)
    save_file(tensors, str(out / "model.safetensors"))
    return out


@pytest.mark.parametrize("name", ["transformer.wte.weight", "transformer.h.1.mlp.c_fc.weight"])
def test_huge_finite_weights_are_refused_naming_the_tensor(folder, tmp_path, name):
    with pytest.raises(pretrained.CheckpointError) as err:
        pretrained.load(huge(folder, tmp_path, name, 1e19))
    assert err.value.file == "model.safetensors" and err.value.field == name.removeprefix("transformer.")
    assert "1e+19" in str(err.value) and "1e+06" in str(err.value)


def test_tiny_layer_norm_eps_is_refused(folder, tmp_path):
    with pytest.raises(pretrained.CheckpointError) as err:
        pretrained.load(rewrite(folder, tmp_path, config={"layer_norm_epsilon": 1e-320}))
    assert (err.value.file, err.value.field) == ("config.json", "layer_norm_epsilon")


def test_constant_embeddings_at_the_smallest_eps_stay_finite(folder, tmp_path, framework):
    """The floor is enough: every row constant (variance 0) at eps 1e-12 gives finite numbers."""
    out = huge(folder, tmp_path, "transformer.wte.weight", 0.5)
    data = json.loads((out / "config.json").read_text()) | {"layer_norm_epsilon": 1e-12}
    (out / "config.json").write_text(json.dumps(data))
    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(out / "model.safetensors"))
    tensors["transformer.wpe.weight"][:] = 0
    save_file(tensors, str(out / "model.safetensors"))
    result = pretrained.load(out).run("The cat sat", framework)
    assert np.isfinite(result.logits).all() and np.isfinite(result.hidden_states).all()


def test_a_forward_pass_that_overflows_names_the_layer():
    hidden = np.zeros((3, 2, 4), np.float32)
    hidden[2, 0, 0] = np.inf
    out = Forward(hidden[-1], np.zeros((2, 1, 2, 2)), None, [], hidden, None)
    with pytest.raises(pretrained.CheckpointError) as err:
        _check_finite(out)
    assert err.value.field == "layer 1"


# -- the Hub: one message whatever exists here ----------------------------------------------------


def test_hub_ids_get_one_message_whether_or_not_a_folder_exists(monkeypatch):
    assert Path("tests").is_dir() and not Path("nonexistent").exists()  # run from the repository root
    monkeypatch.setenv(pretrained.ENV_HUB, "1")

    def model_info(model_id, files_metadata=False):
        raise OSError("404 Not Found")

    monkeypatch.setattr(pretrained.sources, "_hub", lambda: SimpleNamespace(model_info=model_info))
    messages = []
    for name in ("tests", "nonexistent"):
        with pytest.raises(ValueError) as err:
            pretrained.load_choice(name)
        messages.append((type(err.value), str(err.value).replace(repr(name), "NAME")))
    assert messages[0] == messages[1], messages
    assert "allowed" not in messages[0][1]
