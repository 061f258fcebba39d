"""Tolerances, seeds and shared helpers for the whole suite.

Imports nothing from Streamlit or the app (`attnviz.app`): the library's tests (tests/backends, the
models, the kernels, interp) run on a machine with PyTorch, NumPy and the test dependencies only, e.g.
a GPU machine (`python -m pytest -m gpu tests/backends ...`; docs/gpu.md). The app's fixtures live in
tests/app/conftest.py, the browser's in tests/browser/conftest.py;
tests/test_library_lane.py proves it with Streamlit blocked.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from attnviz.frameworks import is_installed
from tests.blocking import block
from tests.live import SESSION_ENV, converted_cache

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# One real checkpoint's weights kept per process (the app's default keeps 2 GB: SmolLM2 and Gemma 3
# together, in both frameworks): every test process, test server and worker inherits it. With the
# default, two test processes, their servers and their workers passed this 24 GB machine's memory in
# a fresh-clone run and the kernel killed test processes. A checkpoint evicted is read again from the
# session's converted cache when a later test needs it.
os.environ.setdefault("ATTNVIZ_CHECKPOINT_CACHE_MB", "1100")
# One folder for the whole test session, made by the first pytest process (before xdist starts its
# workers) and inherited by the workers, the servers and the subprocesses the tests start: converted
# checkpoints go there (ATTNVIZ_CACHE_DIR), so SmolLM2's and Gemma's GGUF files are converted once per
# session (a lock file lets one process convert while the others wait), never into the user's cache.
if not os.environ.get(SESSION_ENV):
    os.environ[SESSION_ENV] = tempfile.mkdtemp(prefix="attnviz-test-session-")
    atexit.register(shutil.rmtree, os.environ[SESSION_ENV], ignore_errors=True)
os.environ["ATTNVIZ_CACHE_DIR"] = str(converted_cache())
# Saved training runs go to this test process's own folder (never another process's, nor the user's);
# a test that reads them names its own with monkeypatch.setenv(save.ENV_DIR, ...).
if "ATTNVIZ_TRAIN_DIR" not in os.environ:
    os.environ["ATTNVIZ_TRAIN_DIR"] = tempfile.mkdtemp(prefix="attnviz-test-training-")
    atexit.register(shutil.rmtree, os.environ["ATTNVIZ_TRAIN_DIR"], ignore_errors=True)
for _framework in filter(None, os.environ.get("ATTNVIZ_BLOCK", "").split(",")):
    block(_framework)  # simulate a machine without it

# Tolerances, one place for the whole suite (relative unless named ATOL):
RTOL_F32 = 1e-5  # float32 against a framework's own layer
RTOL_F64 = 1e-10  # float64 against the NumPy reference
# A whole model (many float32 layers) against transformers, per framework: TensorFlow's kernels
# sum in another order, and the error grows with depth.
RTOL_MODEL = {"torch": 1e-5, "tensorflow": 1e-4}
# A fraction of a logit difference (a ratio of two float32 differences), per framework.
ATOL_RATIO = {"torch": 1e-4, "tensorflow": 1e-3}
# Attention probabilities of a real model against transformers', absolute, per framework (issue 43).
ATOL_WEIGHTS = {"torch": 1e-4, "tensorflow": 1e-3}
# float32 at 600 positions against float64 throughout (rotary angles too): attention weights absolute,
# logits relative, both frameworks (issue 46 point 20; transformers' own float32 is ~3e-6 off).
TOL_F32_AT_LENGTH = 1e-5
ATOL_MEL = 1e-3  # attnviz.audio.log_mel against transformers' WhisperFeatureExtractor
ATOL_FIGURE = 1e-6  # a number drawn in a figure (float32 in the chart's JSON) against the library's
RTOL_FIGURE = 1e-6  # the same, relative
ATOL_F64 = 1e-9  # two float64 computations of the same closed-form value
SEED = 1234
CI = os.environ.get("CI", "").lower() == "true"
GPU_SKIP = "GPU"  # a skip allowed in CI names a missing GPU in its reason

settings.register_profile(
    "attnviz",
    max_examples=int(os.environ.get("ATTNVIZ_EXAMPLES", "30")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("attnviz")


def rel_err(actual, expected) -> float:
    """max |actual - expected| / max |expected|: one number per tensor."""
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    scale = max(np.abs(expected).max(initial=0.0), 1e-30)
    return float(np.abs(actual - expected).max(initial=0.0) / scale)


def assert_close(actual, expected, rtol: float, what: str = "") -> None:
    err = rel_err(actual, expected)
    assert err <= rtol, f"{what}: relative error {err:.3e} > {rtol:.0e}"


def gpu_params(framework_devices=("cpu", "gpu")):
    """`device` parametrisation: the GPU case skips, with its reason, without a GPU."""
    return [
        pytest.param(d, marks=pytest.mark.gpu, id=d) if d == "gpu" else pytest.param(d, id=d)
        for d in framework_devices
    ]


def skip_without_gpu(framework: str, device: str) -> None:
    if device == "gpu":
        from attnviz.frameworks import gpu_available

        if not gpu_available(framework):
            pytest.skip(f"no GPU visible to {framework} on this machine")


def requires(*frameworks: str):
    """Skip (with the reason) where one of `frameworks` is not installed."""
    missing = [fw for fw in frameworks if not is_installed(fw)]
    return pytest.mark.skipif(bool(missing), reason=f"not installed here: {', '.join(missing)}")


@pytest.fixture(scope="module", autouse=True)
def _workers_end_with_their_module():
    """The worker processes a module's tests started in this test process (AppTests run the pages
    here, and their heavy doors submit to `attnviz.exec`'s local workers) end with the module: each
    worker keeps the checkpoints its tasks loaded (SmolLM2 and Gemma 3 in both frameworks: 2.5-3.4 GB
    each), and kept for the session, two test processes' workers and the processes themselves passed
    this 24 GB machine's memory (the kernel killed a test process). The next module that needs a
    worker starts a fresh one."""
    yield
    import attnviz.exec

    attnviz.exec.shutdown()


@pytest.fixture(scope="session")
def session_cache():
    """The session's `ATTNVIZ_CACHE_DIR` (already set for every test): a fixture that sets its own
    cache folder converts SmolLM2 (~540 MB of float32) or Gemma 3 (~1 GB) again; set this one instead."""
    return converted_cache()


@pytest.fixture(scope="session")
def gemma_cache(session_cache):
    """Gemma 3 270M's `ATTNVIZ_CACHE_DIR`: the session's (its GGUF converted once per session)."""
    return session_cache


@pytest.fixture(params=["torch", "tensorflow"])
def framework(request) -> str:
    if not is_installed(request.param):
        pytest.skip(f"{request.param} is not installed here")
    return request.param


# -- The fast lane: `-m "not slow"` ---------------------------------------------------------------

LIVE = ("app", "browser")  # folders whose tests run the app itself (AppTest, or a server and Chromium)
LONGEST_FIRST = {"browser": 0, "app": 1}  # the order of the folders' modules in a run; the rest after


def pytest_collection_modifyitems(config, items) -> None:
    """A test that runs the app (tests/app, tests/browser) is slow unless marked `smoke`: the fast lane
    keeps the library's oracles, one page through AppTest and one page in Chromium.

    The modules then run longest first: the browser modules, the AppTest modules, the library's (a
    stable sort, so pytest-randomly's shuffle stands within each group, and the seed still reproduces
    the order). With `-n 2 --dist loadfile` a test process takes the next module when it has two tests
    or fewer left; xdist's own order (the most tests first, `pytest_configure`) put the browser modules
    of one to four tests — 40 to 165 s each — last, and one process could queue three of them while
    the other had nothing left to run."""
    for item in items:
        folder = item.path.parent.name
        if folder in LIVE and not item.get_closest_marker("smoke"):
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: LONGEST_FIRST.get(item.path.parent.name, len(LONGEST_FIRST)))


# -- CI: the slowest tests, and no skip but a missing GPU ------------------------------------------

_SKIPS: list[tuple[str, str]] = []
_MODULE_S: dict[str, float] = {}  # each module's setup + call + teardown seconds (the controller's view)


def pytest_configure(config) -> None:
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False  # xdist keeps the order above (most tests first, else)
    if CI and not config.option.durations:
        config.option.durations = 15  # .ci/run prints the slowest 15 (the README's command, unchanged)


def pytest_runtest_logreport(report) -> None:
    module = report.nodeid.split("::")[0]
    _MODULE_S[module] = _MODULE_S.get(module, 0.0) + report.duration
    if report.skipped and not hasattr(report, "wasxfail"):
        _SKIPS.append((report.nodeid, _reason(report)))


def pytest_collectreport(report) -> None:
    """A module skipped whole (`pytest.skip(..., allow_module_level=True)`, `importorskip`) counts too."""
    if report.skipped:
        _SKIPS.append((report.nodeid, _reason(report)))


def _reason(report) -> str:
    return report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)


def pytest_sessionfinish(session, exitstatus) -> None:
    """In CI a skip is a failure unless it names a missing GPU (a skipped proof proves nothing)."""
    if CI and not hasattr(session.config, "workerinput"):  # the controller: every module's time
        _write_module_times(session)
    bad = [(node, reason) for node, reason in _SKIPS if GPU_SKIP not in reason]
    if not (CI and bad):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_sep("=", f"{len(bad)} skipped test(s) in CI: only a missing GPU may skip", red=True)
        for node, reason in bad[:50]:
            reporter.write_line(f"SKIPPED {node}: {reason}")
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _write_module_times(session) -> None:
    """Each module's seconds, slowest first, to test-artifacts/module-seconds.tsv, and the slowest 15
    printed: with `--dist loadfile` a module is what one process runs, so these are the cuts that count."""
    rows = sorted(_MODULE_S.items(), key=lambda kv: -kv[1])
    out = Path(__file__).parents[1] / "test-artifacts" / "module-seconds.tsv"
    out.parent.mkdir(exist_ok=True)
    out.write_text("".join(f"{s:.1f}\t{m}\n" for m, s in rows))
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_sep("=", f"slowest 15 modules (all {len(rows)} in {out.name})")
        for module, seconds in rows[:15]:
            reporter.write_line(f"{seconds:8.1f} s  {module}")
