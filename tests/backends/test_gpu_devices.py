"""Issue 45: the device a run is placed on, checked where no GPU is (the CPU-visible side).

Each framework's `resolve_device` with a GPU present (the framework's own query made to answer yes)
and absent (a `SpecError` on field "device" naming what is allowed). TensorFlow has never run on a
GPU (docs/gpu.md): its placement is tested here only.
"""

import pytest

from attnviz.errors import SpecError
from attnviz.frameworks import backend
from tests.conftest import requires


@requires("tensorflow")
def test_tensorflow_places_a_gpu_run_on_its_first_gpu_when_it_sees_one(monkeypatch):
    import tensorflow as tf

    be = backend("tensorflow")
    fake = tf.config.PhysicalDevice(name="/physical_device:GPU:0", device_type="GPU")
    grown = []
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: [fake] if kind == "GPU" else [])
    monkeypatch.setattr(tf.config.experimental, "set_memory_growth", lambda d, on: grown.append((d, on)))
    monkeypatch.setattr(tf.config.experimental, "enable_tensor_float_32_execution", lambda on: None)
    assert be.gpu_available()
    assert [be.resolve_device(d) for d in ("gpu", "auto", "cpu")] == ["/GPU:0", "/GPU:0", "/CPU:0"]
    assert [be.device_kind(be.resolve_device(d)) for d in ("gpu", "cpu")] == ["gpu", "cpu"]
    be.configure()
    assert grown == [(fake, True)]  # memory growth: TensorFlow must not take the whole GPU


@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
def test_a_gpu_asked_for_where_none_is_seen_is_a_spec_error_on_device(framework, monkeypatch):
    if framework == "tensorflow":
        tf = pytest.importorskip("tensorflow", reason="tensorflow is not installed here")

        monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: [])
    else:
        torch = pytest.importorskip("torch", reason="torch is not installed here")
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    be = backend(framework)
    with pytest.raises(SpecError) as err:
        be.resolve_device("gpu")
    assert err.value.field == "device" and "'cpu' or 'auto'" in err.value.allowed
    assert "GPU" in err.value.allowed
    assert be.device_kind(be.resolve_device("auto")) == "cpu"  # auto falls back, silently and rightly


@requires("torch")
def test_torch_places_a_gpu_run_on_cuda_when_it_sees_one(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    be = backend("torch")
    assert [str(be.resolve_device(d)) for d in ("gpu", "auto", "cpu")] == ["cuda", "cuda", "cpu"]
    assert be.device_kind(torch.device("cuda")) == "gpu"
