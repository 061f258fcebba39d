"""Issue 45 point 1: `run_attention` builds a spec's parameters, inputs and mask once, where the run
uses them (kept on its device), and a capture on a GPU keeps its steps there until they are read."""

import pickle

import numpy as np
import pytest

from attnviz import AttentionSpec, init_params, make_inputs, run_attention
from attnviz import run as run_module
from attnviz.frameworks import backend
from attnviz.result import Recorder
from tests.conftest import RTOL_F32, assert_close, gpu_params, requires, skip_without_gpu

SPEC = AttentionSpec(len_q=6, n_heads=2, d_model=8, mask="causal", seed=77)


def test_a_specs_defaults_are_built_once_and_give_the_same_numbers(framework, monkeypatch):
    first = run_attention(SPEC, framework)
    calls = []
    monkeypatch.setattr(run_module, "init_params", lambda spec: calls.append(spec) or init_params(spec))
    again = run_attention(SPEC, framework)
    assert calls == []  # the second call reused the placed defaults
    np.testing.assert_array_equal(again.output, first.output)
    np.testing.assert_array_equal(again.weights, first.weights)
    for a, b in zip(again.steps, first.steps, strict=True):
        np.testing.assert_array_equal(a.value, b.value)


def test_given_arrays_between_two_default_runs_do_not_stay_in_the_layer(framework):
    """The layer keeps the defaults it loaded only while nothing else was loaded into it."""
    default = run_attention(SPEC, framework, capture=False)
    other = {k: v * 2 for k, v in init_params(SPEC).items()}
    x, _ = make_inputs(SPEC)
    given = run_attention(SPEC, framework, x_q=x, params=other, capture=False)
    assert not np.allclose(given.output, default.output)
    after = run_attention(SPEC, framework, capture=False)
    np.testing.assert_array_equal(after.output, default.output)


@requires("torch")
def test_the_placed_defaults_equal_numpys_draw_each_call():
    """Defaults drawn on every call (the old door) and the placed ones: the same numbers, bit for bit."""
    spec = SPEC.replace(seed=78, mode="cross", len_kv=5, d_kv_in=3, mask="none")
    x_q, x_kv = make_inputs(spec)
    given = run_attention(spec, "torch", x_q=x_q, x_kv=x_kv, params=init_params(spec))
    placed = run_attention(spec, "torch")
    np.testing.assert_array_equal(placed.output, given.output)
    np.testing.assert_array_equal(placed.weights, given.weights)
    np.testing.assert_array_equal(placed.empty_rows, given.empty_rows)


def test_a_step_kept_on_the_device_is_copied_home_once_when_read_and_pickles_as_numpy():
    """The lazy step on the CPU side: a framework-neutral tensor stand-in with `clone` (PyTorch's name)."""

    class Tensor:
        def __init__(self, a):
            self.a, self.shape = a, a.shape

        def detach(self):
            return self

        def clone(self):
            return Tensor(self.a.copy())

    fetched = []
    record = Recorder(True, lambda t: fetched.append(t) or t.a.copy(), {"scores": "q @ k"}, on_device=True)
    live = Tensor(np.arange(6.0).reshape(2, 3))
    record("scores", live)  # not owned: the step keeps a copy on the device
    live.a[:] = -1  # a later in-place write to the framework's tensor
    step = record.steps[0]
    assert fetched == [] and step.shape == (2, 3) and step.code == "q @ k"
    np.testing.assert_array_equal(step.value, np.arange(6.0).reshape(2, 3))
    step.value  # noqa: B018 — a second read copies nothing
    assert len(fetched) == 1
    back = pickle.loads(pickle.dumps(step))
    assert isinstance(back.held, np.ndarray) and back.fetch is None
    np.testing.assert_array_equal(back.value, step.value)


@requires("torch")
@pytest.mark.parametrize("device", gpu_params(("gpu",)))
def test_a_gpu_capture_keeps_its_steps_on_the_gpu_until_read(device):
    skip_without_gpu("torch", device)
    spec = AttentionSpec(len_q=16, n_heads=4, d_model=32, mask="causal", n_kv_heads=2, rope_base=1e4)
    gpu = run_attention(spec, "torch", "gpu")
    assert all(s.fetch is not None and s.held.device.type == "cuda" for s in gpu.steps)
    cpu = run_attention(spec, "torch", "cpu")
    for g, c in zip(gpu.steps, cpu.steps, strict=True):
        assert_close(g.value, c.value, RTOL_F32, g.name)
        assert isinstance(g.held, np.ndarray)
    assert_close(gpu.output, cpu.output, RTOL_F32, "output")
    fast = run_attention(spec, "torch", "gpu", capture=False)
    assert_close(fast.weights, cpu.weights, RTOL_F32, "weights")
    assert backend("torch").device_kind(backend("torch").resolve_device("gpu")) == gpu.device


@requires("torch")
@pytest.mark.parametrize("capture", [True, False])
def test_every_tensor_the_door_makes_is_made_on_the_runs_device(capture):
    """With PyTorch's default device set to "meta", a tensor the door or the body made without naming
    the run's device would meet a real one and raise: what a GPU run needs, proved on the CPU."""
    import torch

    spec = AttentionSpec(
        len_q=12, n_heads=4, d_model=16, mask="causal", n_kv_heads=2, rope_base=1e4, window=5, seed=79
    )
    expected = run_attention(spec, "torch", capture=capture)
    dropped = spec.replace(training=True, dropout=0.3)
    with torch.device("meta"):
        got = run_attention(spec.replace(seed=80), "torch", capture=capture)  # placed afresh
        run_attention(dropped, "torch", capture=capture)  # the dropout's draw
        again = run_attention(spec, "torch", capture=capture)
    assert got.output.shape == expected.output.shape
    np.testing.assert_array_equal(again.output, expected.output)
