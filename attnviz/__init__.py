"""attnviz: see how attention works, in PyTorch and TensorFlow side by side.

Importing this package imports neither torch nor TensorFlow; each framework
loads on first use (`attnviz.frameworks.backend`).
"""

from attnviz.frameworks import FRAMEWORKS, is_installed
from attnviz.params import init_params, make_inputs
from attnviz.result import STEP_DOCS, AttentionResult, Step, expected_steps
from attnviz.run import DEFAULT_MEMORY_BUDGET, estimate_bytes, run_attention
from attnviz.spec import AttentionSpec

__all__ = [
    "DEFAULT_MEMORY_BUDGET",
    "FRAMEWORKS",
    "STEP_DOCS",
    "AttentionResult",
    "AttentionSpec",
    "Step",
    "estimate_bytes",
    "expected_steps",
    "init_params",
    "is_installed",
    "make_inputs",
    "run_attention",
]
