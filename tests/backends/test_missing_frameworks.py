"""Without TensorFlow, or without torch: the library tests pass, the app works with the other
framework and says what is missing and how to install it. Simulated by blocking the import in a
subprocess (tests/blocking.py)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import requires

ROOT = Path(__file__).parents[2]
OTHER = {"tensorflow": "torch", "torch": "tensorflow"}
LABEL = {"tensorflow": "TensorFlow", "torch": "PyTorch"}


def _run(args: list[str], blocked: str, timeout: int = 600) -> str:
    env = {**os.environ, "ATTNVIZ_BLOCK": blocked, "CI": "", "ATTNVIZ_REQUIRE_BROWSER": ""}
    out = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, (out.stdout[-3000:], out.stderr[-3000:])
    return out.stdout


@requires("torch", "tensorflow")
@pytest.mark.parametrize("blocked", ["tensorflow", "torch"])
def test_library_suite_passes_without(blocked):
    library_tests = [
        "tests/test_spec.py",
        "tests/test_masks.py",
        "tests/test_run.py",
        "tests/backends/test_seeds.py",
        # the backends' own layer tests (not the whole folder: it holds the core's fuzz, memory and
        # property tests too, which need no framework missing to prove)
        "tests/backends/test_keras_layers.py",
        "tests/backends/test_one_body.py",
        "tests/backends/test_reference_parity.py",
        "tests/backends/test_torch_layers.py",
        "tests/bench/test_bench.py",
    ]
    out = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *library_tests], blocked)
    assert " passed" in out and "failed" not in out and "error" not in out.lower().split("passed")[-1]


APP_SCRIPT = """
import sys
from tests.blocking import block
block({blocked!r})
from tests.app.conftest import open_page
at = open_page("explorer")
assert not at.exception, at.exception
assert at.metric[0].value == {other_label!r}, at.metric[0].value
radio = at.radio(key="framework")
assert radio.options == [{other!r}], radio.options  # the framework's import name, as in links
captions = " ".join(c.value for c in at.sidebar.caption)
assert "{label} is not installed here" in captions and "attnviz[{blocked}]" in captions, captions
at.switch_page("pages/compare.py").run()
assert not at.exception
assert "needs both frameworks" in at.error[0].value and "attnviz[{blocked}]" in at.error[0].value
at.switch_page("pages/steps.py").run()
assert not at.exception and any("tf." in c.value for c in at.code)
at.switch_page("pages/timing.py").run()
assert not at.exception
from attnviz.bench import REGISTRY
options = at.multiselect(key="timing.impls").options
assert options and all(REGISTRY[o].framework != {blocked!r} for o in options), options
assert {blocked!r} not in sys.modules or sys.modules[{blocked!r}] is None
print("app ok without", {blocked!r})
"""


@requires("torch", "tensorflow")
@pytest.mark.parametrize("blocked", ["tensorflow", "torch"])
def test_app_works_without_and_says_how_to_install(blocked):
    script = APP_SCRIPT.format(
        blocked=blocked, label=LABEL[blocked], other_label=LABEL[OTHER[blocked]], other=OTHER[blocked]
    )
    out = _run([sys.executable, "-c", script], blocked="")
    assert f"app ok without {blocked}" in out
