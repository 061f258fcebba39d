"""attnviz in TensorFlow: the attention (`attention`) and the models built on it.

The one door to this framework: `attnviz.frameworks.backend("tensorflow")` imports this
package (the only dynamic import in attnviz) and reaches everything through it —
the `attnviz.backends.Backend` protocol re-exported from `attention`, and the models
as submodules (`bert`, `decoder`, `train`, `whisper`), each a twin of its PyTorch file.
"""

import keras  # the framework itself, for callers that hold only this package

from attnviz.backends.tf_backend import bert, blocks, decoder, device, train, whisper
from attnviz.backends.tf_backend.attention import (
    LayerNorm,
    MultiHeadAttention,
    head_mask,
    linear,
    scaled_dot_product_attention,
    tf,
)
from attnviz.backends.tf_backend.device import (
    build_layer,
    configure,
    device_kind,
    device_name,
    forward,
    get_threads,
    gpu_available,
    inference,
    matmul,
    resolve_device,
    set_threads,
    sync,
    to_numpy,
    to_tensor,
    version,
)

__all__ = [
    "LayerNorm",
    "MultiHeadAttention",
    "bert",
    "blocks",
    "build_layer",
    "configure",
    "decoder",
    "device",
    "device_kind",
    "device_name",
    "forward",
    "get_threads",
    "gpu_available",
    "head_mask",
    "inference",
    "keras",
    "linear",
    "matmul",
    "resolve_device",
    "scaled_dot_product_attention",
    "set_threads",
    "sync",
    "tf",
    "to_numpy",
    "to_tensor",
    "train",
    "version",
    "whisper",
]
