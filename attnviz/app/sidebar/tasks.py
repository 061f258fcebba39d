"""The configuration's runs as tasks, run in a worker (`attnviz.exec.submit` through
`attnviz.app.frame.door`): the explorer's and the steps' recorded run, its steady-state time, the
PyTorch-vs-TensorFlow comparison, and whether a framework sees a GPU.

Each takes the configuration as its canonical JSON (`settings.canonical`: a short string, the
server's cache key too) and checks it again here (`settings.check`, seeded: the same spec, inputs
and parameters the server checked), so no array crosses to the worker. What comes back is what the
pages draw: NumPy arrays in `AttentionResult`, `Timing` and `Comparison` dataclasses, never a
framework's tensor. The framework is imported here, inside `monitor.loading()` (a worker's memory
budget does not count it), once per worker (`frameworks.prepare`).

No Streamlit here, nor anything of `attnviz.app`: a worker imports this module by name.
"""

from __future__ import annotations

import dataclasses
import json

from attnviz import settings
from attnviz.compare import Comparison, compare_frameworks
from attnviz.exec.monitor import Monitor, watch
from attnviz.frameworks import FRAMEWORKS, backend, prepare
from attnviz.result import AttentionResult
from attnviz.run import Timing, run_attention, time_attention


def _prepared(cfg_json: str, frameworks: tuple[str, ...], monitor: Monitor | None) -> settings.Prepared:
    """The configuration checked (a `SpecError` names the field), its frameworks imported."""
    prepared = settings.check(json.loads(cfg_json))
    with watch(monitor).loading():
        for framework in frameworks:
            prepare(framework)
    return prepared


def explorer_run(
    cfg_json: str, framework: str, device: str, *, monitor: Monitor | None = None
) -> AttentionResult:
    """`run_attention` of the configuration with every step recorded (the explorer's heads, the steps'
    matrices, the shape ledger and the downloads all read it)."""
    spec, x_q, x_kv, params = _prepared(cfg_json, (framework,), monitor)
    return run_attention(spec, framework, device, x_q=x_q, x_kv=x_kv, params=params)


def steady_timing(cfg_json: str, framework: str, device: str, *, monitor: Monitor | None = None) -> Timing:
    """`time_attention` of exactly what `explorer_run` computes (same spec, inputs and parameters)."""
    spec, x_q, x_kv, params = _prepared(cfg_json, (framework,), monitor)
    return time_attention(spec, framework, device, x_q=x_q, x_kv=x_kv, params=params)


def explorer_run_timed(
    cfg_json: str, framework: str, device: str, *, monitor: Monitor | None = None
) -> tuple[AttentionResult, Timing]:
    """`explorer_run` and `steady_timing` in one task, as the explorer asks for both: the configuration
    parsed and checked once, one round trip to the worker instead of two."""
    spec, x_q, x_kv, params = _prepared(cfg_json, (framework,), monitor)
    result = run_attention(spec, framework, device, x_q=x_q, x_kv=x_kv, params=params)
    return result, time_attention(spec, framework, device, x_q=x_q, x_kv=x_kv, params=params)


def comparison(cfg_json: str, device: str, *, monitor: Monitor | None = None) -> Comparison:
    """`compare_frameworks` of the configuration, reduced to what the comparison page draws: each
    framework's weights, output and device, the per-step rows and timings — not every step's
    arrays (the rows already hold their differences)."""
    spec, x_q, x_kv, params = _prepared(cfg_json, tuple(FRAMEWORKS), monitor)
    full = compare_frameworks(spec, device, x_q=x_q, x_kv=x_kv, params=params)
    return dataclasses.replace(
        full, torch=_without_steps(full.torch), tensorflow=_without_steps(full.tensorflow)
    )


def _without_steps(result: AttentionResult) -> AttentionResult:
    return dataclasses.replace(result, steps=[])


def gpu_available(framework: str, *, monitor: Monitor | None = None) -> bool:
    """Whether `framework` sees a GPU in this worker (the framework imported here, not in the server)."""
    with watch(monitor).loading():
        prepare(framework)
    return bool(backend(framework).gpu_available())
