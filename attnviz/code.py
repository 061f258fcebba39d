"""The line of framework code behind each step, read from the backends' source.

Read with `ast`, without importing the backends, so a page can show
TensorFlow's code beside PyTorch's without loading TensorFlow. The backends
record the same strings at run time (`record(name, tensor, code)`).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

_SOURCES = {
    "torch": Path(__file__).parent / "backends" / "torch_backend.py",
    "tensorflow": Path(__file__).parent / "backends" / "tf_backend.py",
}


@functools.cache
def step_code(framework: str) -> dict[str, str]:
    """Step name → code line, for `framework` ("torch" | "tensorflow")."""
    tree = ast.parse(_SOURCES[framework].read_text(encoding="utf-8"))
    code = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "record"
            and len(node.args) == 3
            and all(isinstance(a, ast.Constant) for a in (node.args[0], node.args[2]))
        ):
            code[node.args[0].value] = node.args[2].value
    return code
