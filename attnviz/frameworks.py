"""Which frameworks are installed, and their backends, imported lazily.

`import attnviz` imports neither torch nor TensorFlow; a backend module is
imported the first time it is asked for and then kept (one import per
process).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from types import ModuleType

FRAMEWORKS = ("torch", "tensorflow")
DEVICES = ("cpu", "gpu", "auto")
LABELS = {"torch": "PyTorch", "tensorflow": "TensorFlow"}
_MODULES = {"torch": "attnviz.backends.torch_backend", "tensorflow": "attnviz.backends.tf_backend"}
INSTALL_HINTS = {
    "torch": "pip install torch  (CPU-only wheels: pip install torch "
    "--index-url https://download.pytorch.org/whl/cpu)",
    "tensorflow": "pip install tensorflow",
}


def check_framework(framework: str) -> str:
    if framework not in FRAMEWORKS:
        raise ValueError(f"framework: got {framework!r}; allowed: 'torch' | 'tensorflow'.")
    return framework


def check_device(device: str) -> str:
    if device not in DEVICES:
        raise ValueError(f"device: got {device!r}; allowed: 'cpu' | 'gpu' | 'auto'.")
    return device


def is_installed(framework: str) -> bool:
    """True when the framework can be imported (without importing it)."""
    return importlib.util.find_spec(check_framework(framework)) is not None


@functools.cache
def backend(framework: str) -> ModuleType:
    """The attnviz backend module for `framework`, imported on first use.

    Raises:
        ValueError: the framework is unknown or not installed (the message
            says how to install it).
    """
    if not is_installed(framework):
        raise ValueError(
            f"framework: {framework!r} is not installed in this Python environment; "
            f"install it with: {INSTALL_HINTS[framework]}"
        )
    return importlib.import_module(_MODULES[framework])


def gpu_available(framework: str) -> bool:
    """Whether `framework` sees a GPU (imports the framework)."""
    return backend(framework).gpu_available()
