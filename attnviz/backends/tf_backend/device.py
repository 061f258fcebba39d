"""TensorFlow's side of the `attnviz.backends.Backend` protocol that is not attention's math: the
framework's version and process settings, devices and threads, tensors to and from NumPy, building
and running a spec's layer, and the step code shown beside each recorded step (read from
`attention.py`). The twin of `torch_backend.device`, name for name.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import numpy as np
import tensorflow as tf

from attnviz.backends.code import code_in
from attnviz.backends.tf_backend.attention import MultiHeadAttention
from attnviz.errors import SpecError
from attnviz.result import Recorder


def version() -> str:
    return tf.__version__


def configure() -> None:
    tf.config.experimental.enable_tensor_float_32_execution(False)  # full float32 for the proofs
    for gpu in tf.config.list_physical_devices("GPU"):
        with contextlib.suppress(RuntimeError):  # already initialised: its setting stays
            tf.config.experimental.set_memory_growth(gpu, True)  # don't grab all GPU memory


def gpu_available() -> bool:
    return bool(tf.config.list_physical_devices("GPU"))


def resolve_device(device: str) -> str:
    """'cpu' | 'gpu' | 'auto' → a TensorFlow device name."""
    has_gpu = gpu_available()
    if device == "gpu" and not has_gpu:
        raise SpecError(
            "device",
            device,
            "'cpu' or 'auto' here: TensorFlow sees no GPU "
            f"(tensorflow {tf.__version__}, tf.config.list_physical_devices('GPU') is empty)",
        )
    return "/GPU:0" if device != "cpu" and has_gpu else "/CPU:0"


def device_kind(dev: str) -> str:
    return "gpu" if "GPU" in dev else "cpu"


def device_name(dev: str) -> str:
    return dev


def to_tensor(array: np.ndarray, dev: str) -> tf.Tensor:
    with tf.device(dev):
        return tf.convert_to_tensor(array)


def to_numpy(t) -> np.ndarray:
    return np.asarray(t)


def sync(dev: str) -> None:
    """Wait for every device's pending work (eager CPU ops have already finished)."""
    if "GPU" in dev:
        tf.test.experimental.sync_devices()


def matmul(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    return tf.matmul(a, b)


def set_threads(threads: int) -> None:
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:  # TensorFlow already initialised in this process: its setting stays
        pass


def get_threads() -> int:
    return tf.config.threading.get_intra_op_parallelism_threads() or os.cpu_count() or 1


def inference() -> contextlib.AbstractContextManager:
    return contextlib.nullcontext()  # eager TensorFlow records gradients only under a GradientTape


def build_layer(spec, dev: str) -> MultiHeadAttention:
    with tf.device(dev):
        layer = MultiHeadAttention.from_spec(spec)
        layer.build()
    return layer


def forward(layer: MultiHeadAttention, x_q, x_kv, mask, *, spec, record: Recorder):
    with tf.device(x_q.device):
        return layer.call(x_q, x_kv, attention_mask=mask, training=spec.training, record=record)


def recorded_code() -> dict[str, str]:
    """Step name → this file's lines that compute it: the code the app shows beside each recorded step."""
    return code_in(Path(__file__).with_name("attention.py"))
