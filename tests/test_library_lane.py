"""The library's tests run without Streamlit, the app or TensorFlow: what a GPU machine has (issue 45).

A subprocess blocks `streamlit` and `attnviz.app` from import (a `sys.meta_path` finder that refuses
them) and TensorFlow (`ATTNVIZ_BLOCK`, as if not installed), then runs `pytest -m gpu` over the
library's test folders, the command docs/gpu.md gives for a GPU machine. Here, without a GPU, every
GPU test skips naming the missing GPU; a conftest, fixture or test module that imports Streamlit or
the app fails the run.
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
# The library's tests (the attention's proofs, the models, the kernels, interp's model runs, the GPU
# runs of the real models): the command docs/gpu.md names. Each imports no Streamlit and no app.
LIBRARY = (
    "tests/backends",
    "tests/test_run.py",
    "tests/test_run_placed.py",
    "tests/backends/test_gpu_devices.py",
    "tests/pretrained/test_gpu_models.py",
    "tests/pretrained/test_gpt2.py",
    "tests/pretrained/test_llama.py",
    "tests/pretrained/test_gemma3.py",
    "tests/pretrained/test_pretrained.py",
    "tests/kernels/test_kernels.py",
    "tests/pretrained/test_kv_cache.py",
    "tests/interp/test_interp_patching.py",
)
BLOCKED = ("streamlit", "attnviz.app")

RUN = f"""
import importlib.abc, sys

class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in {BLOCKED!r}):
            raise ImportError(f"{{name}} is blocked: the library's tests must not import it")

sys.meta_path.insert(0, Blocked())
try:
    import streamlit
    sys.exit("the blocker let streamlit through")
except ImportError:
    pass
import pytest
code = pytest.main(["-p", "no:randomly", "-p", "no:cacheprovider", "-q", "-m", "gpu", *sys.argv[1:]])
loaded = sorted(m for m in sys.modules if any(m == b or m.startswith(b + ".") for b in {BLOCKED!r}))
print("LOADED", loaded)
sys.exit(code)
"""


def test_the_library_tests_run_without_streamlit_or_the_app():
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_XDIST_WORKER")}
    env.update(ATTNVIZ_BLOCK="tensorflow", PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", RUN, *LIBRARY], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert "LOADED []" in out, out[-2000:]
    assert " error" not in out.lower(), out[-4000:]
    assert " passed" in out or " skipped" in out, out[-2000:]  # GPU tests were found and ran
    # `-ra` lists each skip: only a missing GPU, or TensorFlow (blocked here; absent there)
    skipped = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert all("GPU" in line or "tensorflow" in line.lower() for line in skipped), "\n".join(skipped)


def test_docs_gpu_names_this_command():
    """docs/gpu.md's command for a GPU machine runs exactly these folders."""
    text = (ROOT / "docs" / "gpu.md").read_text(encoding="utf-8")
    command = text.split("python -m pytest -p no:randomly -m gpu", 1)[1].split("```", 1)[0]
    named = [word for word in command.replace("\\", " ").split() if word.startswith("tests/")]
    assert named == list(LIBRARY)
