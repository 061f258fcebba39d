"""The frameworks attnviz runs on: one table, and their backends imported lazily.

`import attnviz` imports neither torch nor TensorFlow; a backend module is
imported the first time it is asked for and then kept (one import per
process).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from attnviz.backends.code import code_in
from attnviz.cache import env_number
from attnviz.errors import SpecError


@dataclass(frozen=True)
class Framework:
    """One framework: its import name, how people call it, where attnviz's code for it lives."""

    name: str  # the import name: "torch" | "tensorflow"
    label: str  # shown to people
    module: str  # attnviz's backend module (implements `attnviz.backends.Backend`)
    install_hint: str  # how to install it
    # Environment the backend needs before its framework is first imported, set by `backend()`
    # (where a run starts), never at `import attnviz`: Keras 3 must run on TensorFlow.
    env: tuple[tuple[str, str], ...] = ()
    # Settings read when the framework is first imported, set by `backend()` unless already set
    # (a user's own value stands).
    tuning: tuple[tuple[str, str], ...] = ()
    reads_env: str = ""  # the module whose import reads them: set only while it is not yet imported


FRAMEWORKS: dict[str, Framework] = {
    "torch": Framework(
        "torch",
        "PyTorch",
        "attnviz.backends.torch_backend",
        "pip install 'attnviz[torch]'  (CPU-only wheels: pip install torch "
        "--index-url https://download.pytorch.org/whl/cpu)",
        # PyTorch's CPU allocator backs tensors of 2 MiB and more with transparent huge pages
        # (where the kernel allows them, as on Linux's default "madvise"): each fresh 32 MiB map
        # of 8 heads × 1024² weights otherwise pays 8,192 page faults. Measured at L = 1024
        # (docs/benchmarks.md): the fast path 33 → 25 ms, capture 53 → 31 ms.
        tuning=(("THP_MEM_ALLOC_ENABLE", "1"),),
        reads_env="torch",
    ),
    "tensorflow": Framework(
        "tensorflow",
        "TensorFlow",
        "attnviz.backends.tf_backend",
        "pip install 'attnviz[tensorflow]'",
        env=(("KERAS_BACKEND", "tensorflow"),),
        reads_env="keras",
    ),
}
DEVICES = ("cpu", "gpu", "auto")


def check_framework(framework: str) -> str:
    if framework not in FRAMEWORKS:
        raise SpecError("framework", framework, " | ".join(repr(f) for f in FRAMEWORKS))
    return framework


def label(framework: str) -> str:
    """'PyTorch' for 'torch', and so on."""
    return FRAMEWORKS[check_framework(framework)].label


def check_device(device: str) -> str:
    if device not in DEVICES:
        raise SpecError("device", device, " | ".join(repr(d) for d in DEVICES))
    return device


def is_installed(framework: str) -> bool:
    """True when the framework can be imported (without importing it)."""
    return importlib.util.find_spec(check_framework(framework)) is not None


def installed() -> list[str]:
    """The frameworks importable here, in table order."""
    return [fw for fw in FRAMEWORKS if is_installed(fw)]


@functools.cache
def backend(framework: str) -> ModuleType:
    """The attnviz backend module for `framework`, imported on first use.

    Before the first import it sets the environment the framework needs
    (`Framework.env`: Keras on TensorFlow) and its tuning where unset
    (`Framework.tuning`: PyTorch's huge pages) unless the framework's modules
    are already imported — the one process-wide change attnviz makes, and
    only when a run asks for that framework.

    Raises:
        SpecError: the framework is unknown or not installed (the message
            says how to install it).
    """
    if not is_installed(framework):
        raise SpecError(
            "framework",
            framework,
            f"an installed framework ({framework!r} is not installed in this Python environment; "
            f"install it with: {FRAMEWORKS[framework].install_hint})",
        )
    fw = FRAMEWORKS[framework]
    if fw.reads_env not in sys.modules:
        os.environ.update(fw.env)
        for name, value in fw.tuning:
            os.environ.setdefault(name, value)
    return importlib.import_module(fw.module)


def gpu_available(framework: str) -> bool:
    """Whether `framework` sees a GPU (imports the framework)."""
    return backend(framework).gpu_available()


def step_code(framework: str) -> dict[str, str]:
    """Step name → the source lines of `framework`'s attention that compute it (`attnviz.backends.code`), read
    from its backend's `attention.py` without importing the framework."""
    spec = importlib.util.find_spec(FRAMEWORKS[check_framework(framework)].module)
    return code_in(Path(spec.origin).with_name("attention.py"))


_PREPARED: set[str] = set()


def prepare(framework: str) -> None:
    """Import `framework`'s backend once per process, with `ATTNVIZ_THREADS` intra-op threads
    (TensorFlow fixes its pools at its first op, so before any work runs one): what a worker does
    before the math, called by the execution layer and by the tasks that load a model."""
    if framework not in _PREPARED:
        backend(framework).set_threads(int(env_number("ATTNVIZ_THREADS", 1, minimum=1)))
        _PREPARED.add(framework)
