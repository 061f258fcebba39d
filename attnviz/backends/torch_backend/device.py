"""PyTorch's side of the `attnviz.backends.Backend` protocol that is not attention's math: the
framework's version and process settings, devices and threads, tensors to and from NumPy, building
and running a spec's layer, and the step code shown beside each recorded step (read from
`attention.py`). The twin of `tf_backend.device`, name for name.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import torch

from attnviz.backends.code import code_in
from attnviz.backends.torch_backend.attention import MultiHeadAttention
from attnviz.errors import SpecError
from attnviz.result import Recorder


def version() -> str:
    return torch.__version__


def configure() -> None:
    torch.backends.cuda.matmul.allow_tf32 = False  # full float32 for the proofs
    torch.backends.cudnn.allow_tf32 = False


def gpu_available() -> bool:
    return torch.cuda.is_available()


def resolve_device(device: str) -> torch.device:
    """'cpu' | 'gpu' | 'auto' → a torch device; 'gpu' without CUDA is an error."""
    has_gpu = torch.cuda.is_available()
    if device == "gpu" and not has_gpu:
        raise SpecError(
            "device",
            device,
            "'cpu' or 'auto' here: PyTorch sees no CUDA GPU "
            f"(torch {torch.__version__}, torch.cuda.is_available() is False)",
        )
    return torch.device("cuda" if device != "cpu" and has_gpu else "cpu")


def device_kind(dev: torch.device) -> str:
    return "gpu" if dev.type == "cuda" else "cpu"


def device_name(dev: torch.device) -> str:
    return f"{dev} ({torch.cuda.get_device_name(dev)})" if dev.type == "cuda" else "cpu"


def to_tensor(array: np.ndarray, dev: torch.device) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array)).to(dev)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """The tensor as a NumPy array (a GPU tensor copied to the host, the device synchronised).

    From a GPU, the copy goes into page-locked (pinned) memory from PyTorch's caching host allocator:
    on an H100 machine a copy into fresh pageable memory (`.cpu()`) ran at 1.2-1.6 GiB/s, into pinned
    memory at ~50 GiB/s (docs/benchmarks.md, "On a GPU") — 19 ms against 0.7 ms for one 32 MiB map of
    8 heads x 1024 x 1024 weights, which every captured step and every returned map pays."""
    t = t.detach()
    if t.device.type != "cuda":
        return t.cpu().numpy()
    host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
    host.copy_(t)  # synchronous: the values are on the host when this returns
    return host.numpy()


def sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b


def set_threads(threads: int) -> None:
    torch.set_num_threads(threads)


def get_threads() -> int:
    return torch.get_num_threads()


def inference() -> contextlib.AbstractContextManager:
    return torch.inference_mode()


def build_layer(spec, dev: torch.device) -> MultiHeadAttention:
    return MultiHeadAttention.from_spec(spec, dev)


def forward(layer: MultiHeadAttention, x_q, x_kv, mask, *, spec, record: Recorder):
    layer.train(spec.training)
    generator = None
    if spec.training and spec.dropout > 0:
        generator = torch.Generator(device=x_q.device).manual_seed(spec.seed)
    return layer(x_q, x_kv, mask, generator=generator, record=record)


def recorded_code() -> dict[str, str]:
    """Step name → this file's lines that compute it: the code the app shows beside each recorded step."""
    return code_in(Path(__file__).with_name("attention.py"))
