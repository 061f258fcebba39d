"""The implementations the harness can time: one registry, name → framework, description, build.

`build(case, device)` returns `(call, device_name)`: `call()` runs one
forward pass and returns once the device has finished. Every builder reaches
a framework through its public API (or attnviz's `Backend` protocol), never
through attnviz internals, so a new implementation is one decorated function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnviz.frameworks import backend
from attnviz.params import init_params, make_inputs
from attnviz.result import Recorder
from attnviz.run import run_attention


@dataclass(frozen=True)
class Implementation:
    framework: str
    description: str
    build: Callable[[Any, str], tuple[Callable[[], object], str]]


REGISTRY: dict[str, Implementation] = {}


def register(name: str, framework: str, description: str):
    def add(build):
        REGISTRY[name] = Implementation(framework, description, build)
        return build

    return add


def _causal(case) -> np.ndarray | None:
    return None if case.mask == "none" else np.tril(np.ones((case.length, case.length), bool))


def _setup(framework: str, case, device: str):
    be = backend(framework)
    be.configure()
    dev = be.resolve_device(device)
    spec = case.spec()
    params, (x, _) = init_params(spec), make_inputs(spec)
    return be, dev, spec, params, x


# -- attnviz ------------------------------------------------------------------------------------


def _attnviz_layer(framework: str, capture: bool):
    def build(case, device):
        be, dev, spec, params, x = _setup(framework, case, device)
        layer = be.build_layer(spec, dev).load_params(params)
        tx = be.to_tensor(x, dev)
        mask = _causal(case)
        tmask = None if mask is None else be.to_tensor(mask, dev)

        def call():
            record = Recorder(capture, be.to_numpy)
            with be.inference():
                out, weights = be.forward(layer, tx, tx, tmask, spec=spec, record=record)
            be.sync(dev)
            return record.steps if capture else (out, weights)

        return call, be.device_name(dev)

    return build


register("attnviz-torch", "torch", "attnviz PyTorch layer, fast path (no capture), per-head weights")(
    _attnviz_layer("torch", False)
)
register("attnviz-torch-capture", "torch", "attnviz PyTorch layer, every step recorded and copied to NumPy")(
    _attnviz_layer("torch", True)
)
register("attnviz-tf-eager", "tensorflow", "attnviz TensorFlow layer, eager, per-head weights")(
    _attnviz_layer("tensorflow", False)
)


def _public_door(framework: str):
    """`attnviz.run_attention` itself: NumPy in, NumPy out, every check included."""

    def build(case, device):
        be, dev, spec, params, x = _setup(framework, case, device)

        def call():
            r = run_attention(spec, framework, device, x_q=x, params=params, capture=False)
            return r.output, r.weights

        return call, be.device_name(dev)

    return build


register(
    "attnviz-torch-api", "torch", "attnviz.run_attention(..., 'torch', capture=False): NumPy in and out"
)(_public_door("torch"))
register(
    "attnviz-tf-api",
    "tensorflow",
    "attnviz.run_attention(..., 'tensorflow', capture=False): NumPy in and out",
)(_public_door("tensorflow"))


@register("attnviz-tf-function", "tensorflow", "attnviz TensorFlow layer inside tf.function")
def _attnviz_tf_function(case, device, jit: bool = False):
    import tensorflow as tf

    be, dev, spec, params, x = _setup("tensorflow", case, device)
    layer = be.build_layer(spec, dev).load_params(params)
    with tf.device(dev):
        tx = tf.constant(x)
        mask = _causal(case)
        tmask = None if mask is None else tf.constant(mask)
        fn = tf.function(lambda: layer(tx, tx, tmask), jit_compile=jit)

    def call():
        with tf.device(dev):
            out, weights = fn()
        return out.numpy(), weights.numpy()  # waits for the device

    return call, be.device_name(dev)


register("attnviz-tf-xla", "tensorflow", "attnviz TensorFlow layer inside tf.function(jit_compile=True)")(
    lambda case, device: _attnviz_tf_function(case, device, jit=True)
)


# -- PyTorch's own ------------------------------------------------------------------------------


@register(
    "torch-sdpa", "torch", "projections + F.scaled_dot_product_attention + output projection (no weights)"
)
def _torch_sdpa(case, device):
    import torch
    import torch.nn.functional as F

    be, dev, spec, params, x = _setup("torch", case, device)
    layer = be.build_layer(spec, dev).load_params(params).eval()
    tx = be.to_tensor(x, dev)
    B, L, H, dk = case.batch, case.length, case.heads, spec.d_k

    def call():
        with torch.inference_mode():
            q, k, v = (m(tx).view(B, L, H, dk).transpose(1, 2) for m in (layer.query, layer.key, layer.value))
            ctx = F.scaled_dot_product_attention(q, k, v, is_causal=case.mask != "none")
            out = layer.output_proj(ctx.transpose(1, 2).reshape(B, L, H * dk))
        be.sync(dev)
        return out

    return call, be.device_name(dev)


def _torch_mha(need_weights: bool, numpy_io: bool = False):
    def build(case, device):
        import torch

        be, dev, _spec, _params, x = _setup("torch", case, device)
        mha = torch.nn.MultiheadAttention(
            case.d_model, case.heads, batch_first=True, dtype=getattr(torch, case.dtype), device=dev
        ).eval()
        mask = _causal(case)
        blocked = None if mask is None else be.to_tensor(~mask, dev)
        tx = be.to_tensor(x, dev)

        def call():
            with torch.inference_mode():
                xi = torch.from_numpy(x).to(dev) if numpy_io else tx
                out, weights = mha(
                    xi, xi, xi, need_weights=need_weights, average_attn_weights=False, attn_mask=blocked
                )
                if numpy_io:
                    return out.cpu().numpy(), weights.cpu().numpy()
            be.sync(dev)
            return out, weights

        return call, be.device_name(dev)

    return build


register("torch-mha", "torch", "torch.nn.MultiheadAttention, need_weights=False")(_torch_mha(False))
register("torch-mha-weights", "torch", "torch.nn.MultiheadAttention, per-head weights returned")(
    _torch_mha(True)
)
register("torch-mha-api", "torch", "torch.nn.MultiheadAttention with per-head weights: NumPy in, NumPy out")(
    _torch_mha(True, numpy_io=True)
)


# -- Keras's own --------------------------------------------------------------------------------


def _keras_mha(mode: str):
    def build(case, device):
        import keras
        import tensorflow as tf

        be, dev, spec, _params, x = _setup("tensorflow", case, device)
        mask = _causal(case)
        with tf.device(dev):
            tx = tf.constant(x)
            tmask = None if mask is None else tf.constant(np.broadcast_to(mask, (case.batch, *mask.shape)))
            mha = keras.layers.MultiHeadAttention(num_heads=case.heads, key_dim=spec.d_k, dtype=case.dtype)
            mha(tx, tx, attention_mask=tmask)  # build the variables outside any tf.function
            if mode == "api":
                fn = lambda: mha(x, x, attention_mask=mask, return_attention_scores=True)  # noqa: E731
            else:
                fn = lambda: mha(tx, tx, attention_mask=tmask, return_attention_scores=True)  # noqa: E731
            if mode == "function":
                fn = tf.function(fn)

        def call():
            with tf.device(dev):
                out, weights = fn()
            return out.numpy(), weights.numpy()  # waits for the device

        return call, be.device_name(dev)

    return build


register("keras-mha-eager", "tensorflow", "keras.layers.MultiHeadAttention, eager, scores returned")(
    _keras_mha("eager")
)
register(
    "keras-mha-function", "tensorflow", "keras.layers.MultiHeadAttention inside tf.function, scores returned"
)(_keras_mha("function"))
register(
    "keras-mha-api",
    "tensorflow",
    "keras.layers.MultiHeadAttention, eager, scores returned: NumPy in, NumPy out",
)(_keras_mha("api"))
