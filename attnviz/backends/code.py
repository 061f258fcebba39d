"""The framework code behind each step, read from the backends' source.

One source per fact: a backend records a step as `record("name", tensor)`
right after the statements that compute `tensor`; the code shown for that
step is those statements, verbatim — the contiguous statements just before
the `record` call that assign the recorded variable, or a helper value
those statements read (`cos, sin = rotary(...)` before the rotation), shape
comments included; a `del` that frees memory in between is shown too. Read
with `ast`, without importing the backends, so a page can show TensorFlow's
code beside PyTorch's without loading TensorFlow. A step recorded in two
places (PyTorch's fast path hands its `context` on too) shows the first.
"""

from __future__ import annotations

import ast
import functools
import textwrap
from pathlib import Path


def _record_call(stmt: ast.stmt) -> tuple[str, str] | None:
    """`(step name, variable)` when `stmt` is `record("name", variable)`."""
    call = getattr(stmt, "value", None) if isinstance(stmt, ast.Expr) else None
    if (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id == "record"
        and len(call.args) == 2
        and isinstance(call.args[0], ast.Constant)
        and isinstance(call.args[1], ast.Name)
    ):
        return call.args[0].value, call.args[1].id
    return None


def _assigns(stmt: ast.stmt, name: str) -> bool:
    """Whether `stmt` (or a block inside it) assigns `name`, and records nothing."""
    nodes = list(ast.walk(stmt))
    if any(_record_call(n) for n in nodes if isinstance(n, ast.stmt)):
        return False
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in nodes)


def _feeds(stmt: ast.stmt, chunk: list[ast.stmt]) -> bool:
    """Whether `stmt` is a plain assignment of names that `chunk` reads (a helper value of the step)."""
    if not isinstance(stmt, ast.Assign) or _record_call(stmt):
        return False
    targets = {n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    read = {
        n.id for s in chunk for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }
    return bool(targets) and targets <= read


@functools.cache
def code_in(path: Path) -> dict[str, str]:
    """Step name → the source lines that compute it, in the Python file `path` (a backend's attention).

    This module imports nothing of attnviz, so a backend can read its own file (`recorded_code()`)
    without an import cycle through the framework table; `attnviz.frameworks.step_code(framework)`
    finds a framework's file by name."""
    source = Path(path).read_text(encoding="utf-8")
    lines = source.splitlines()
    code = {}
    for node in sorted(ast.walk(ast.parse(source)), key=lambda n: getattr(n, "lineno", 0)):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for i, stmt in enumerate(body):
            found = _record_call(stmt)
            if not found:
                continue
            step, variable = found
            start = i
            while start > 0 and (
                _assigns(body[start - 1], variable)
                or isinstance(body[start - 1], ast.Delete)
                or _feeds(body[start - 1], body[start:i])
            ):
                start -= 1
            chunk = lines[body[start].lineno - 1 : body[i - 1].end_lineno] if start < i else []
            code.setdefault(step, textwrap.dedent("\n".join(chunk)))  # the first site: the textbook
    return code
