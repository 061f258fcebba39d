"""run_attention: the fast path, the memory guard, devices, dropout, empty rows, lazy imports."""

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from attnviz import AttentionSpec, estimate_bytes, init_params, make_inputs, run_attention
from attnviz.frameworks import gpu_available
from tests.conftest import requires


def test_capture_false_gives_same_numbers_and_no_steps(framework):
    spec = AttentionSpec(mask="causal", n_heads=2, len_q=6)
    full, fast = run_attention(spec, framework), run_attention(spec, framework, capture=False)
    assert fast.steps == [] and len(full.steps) > 8
    np.testing.assert_array_equal(full.output, fast.output)
    np.testing.assert_array_equal(full.weights, fast.weights)
    assert fast.framework == framework and fast.device == "cpu" and fast.elapsed_s > 0


def test_rows_with_no_allowed_key_are_zero_and_reported(framework):
    mask = np.ones((5, 4), bool)
    mask[[1, 3]] = False
    spec = AttentionSpec(batch=2, mode="cross", len_q=5, len_kv=4, mask="custom", custom_mask=mask)
    result = run_attention(spec, framework)
    assert result.empty_rows.shape == (2, 5)
    assert result.empty_rows[:, [1, 3]].all() and result.empty_rows.sum() == 4
    assert np.isfinite(result.output).all() and all(
        np.isfinite(s.value[~np.isinf(s.value)]).all() for s in result.steps
    )
    assert (result.weights[:, :, [1, 3]] == 0).all()
    assert (result.step("context").value[:, :, [1, 3]] == 0).all()
    np.testing.assert_allclose(result.weights[:, :, [0, 2, 4]].sum(-1), 1, rtol=1e-6)


def test_padding_zero_length_gives_all_empty_rows(framework):
    spec = AttentionSpec(batch=2, mask="padding", valid_kv_len=(0, 3))
    result = run_attention(spec, framework)
    assert result.empty_rows[0].all() and not result.empty_rows[1].any()
    assert (result.weights[0] == 0).all() and (result.weights[1, :, :, 3:] == 0).all()


def test_dropout_only_in_training_and_reproducible(framework):
    spec = AttentionSpec(dropout=0.5, training=True, seed=3)
    a, b = run_attention(spec, framework), run_attention(spec, framework)
    np.testing.assert_array_equal(a.output, b.output)
    dropped = a.step("dropout").value
    kept = dropped != 0
    assert 0.3 < kept.mean() < 0.7
    np.testing.assert_allclose(dropped[kept], a.weights[kept] * 2, rtol=1e-6)
    other_seed = run_attention(spec.replace(seed=4), framework)
    assert not np.array_equal(other_seed.step("dropout").value != 0, kept)
    evaluation = run_attention(spec.replace(training=False), framework)
    assert "dropout" not in [s.name for s in evaluation.steps]
    np.testing.assert_array_equal(evaluation.weights, a.weights)  # weights are pre-dropout


def test_explicit_inputs_and_params_are_used(framework):
    spec = AttentionSpec(mode="cross", len_q=3, len_kv=4, d_kv_in=5)
    params = {k: np.zeros_like(v) for k, v in init_params(spec).items()}
    x_q, x_kv = make_inputs(spec)
    result = run_attention(spec, framework, x_q=x_q, x_kv=x_kv, params=params)
    assert (result.output == 0).all()
    np.testing.assert_allclose(result.weights, 0.25)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"framework": "jax"}, "framework: got 'jax'; allowed: 'torch' | 'tensorflow'"),
        ({"device": "tpu"}, "device: got 'tpu'; allowed: 'cpu' | 'gpu' | 'auto'"),
        ({"x_q": np.zeros((1, 3, 32))}, "x_q: got an array of shape (1, 3, 32)"),
        ({"x_q": np.full((1, 8, 32), np.nan)}, "x_q: got non-finite"),
        (
            {"x_kv": np.zeros((1, 8, 32))},
            "x_q: got None; allowed: an array (B, len_q, d_model) when x_kv is given",
        ),
        (
            {"params": {"W_q": np.zeros((32, 32))}},
            "params: got ['W_q']; allowed: a dict with exactly the keys",
        ),
    ],
)
@requires("torch")
def test_bad_arguments_raise_clear_value_errors(kwargs, message):
    with pytest.raises(ValueError) as info:
        run_attention(AttentionSpec(), **kwargs)
    assert message in str(info.value)


def test_spec_must_be_a_spec():
    with pytest.raises(TypeError, match=r"allowed: an attnviz\.AttentionSpec"):
        run_attention({"len_q": 4})


def test_memory_guard_refuses_fast_before_allocating():
    spec = AttentionSpec(batch=8, n_heads=64, d_model=64, len_q=200_000)
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"needs about [\d,.]+ GiB .* over the memory budget of 1 GiB"):
        run_attention(spec, "torch")
    assert time.perf_counter() - start < 0.5
    assert estimate_bytes(spec) > 8 * 64 * 200_000**2 * 4


@requires("torch")
def test_memory_budget_is_adjustable():
    spec = AttentionSpec(len_q=64, n_heads=8)
    need = estimate_bytes(spec)
    with pytest.raises(ValueError, match="memory budget"):
        run_attention(spec, memory_budget=need - 1)
    assert run_attention(spec, memory_budget=need).weights.shape == (1, 8, 64, 64)
    assert estimate_bytes(spec, capture=False) < need


@requires("torch")
def test_estimate_is_an_upper_bound_of_what_is_returned():
    spec = AttentionSpec(batch=2, len_q=32, mask="causal", training=True, dropout=0.1)
    result = run_attention(spec, "torch")
    held = sum(s.value.nbytes for s in result.steps) + result.output.nbytes + result.weights.nbytes
    assert held <= estimate_bytes(spec) <= 4 * held


def test_gpu_request_without_gpu_names_what_was_found(framework):
    if gpu_available(framework):
        pytest.skip(f"{framework} sees a GPU here; this test is about machines without one")
    with pytest.raises(
        ValueError, match=r"device: got 'gpu'; allowed: 'cpu' or 'auto' here: .* sees no .*GPU"
    ):
        run_attention(AttentionSpec(), framework, "gpu")
    assert run_attention(AttentionSpec(), framework, "auto").device == "cpu"


def _python(code: str, **env) -> str:
    import os

    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip()


def test_import_attnviz_imports_no_framework():
    code = "import attnviz, sys; print(*(m in sys.modules for m in ('tensorflow', 'torch', 'keras')))"
    assert _python(code) == "False False False"


@requires("torch", "tensorflow")
@pytest.mark.parametrize("order", [("torch", "tensorflow"), ("tensorflow", "torch")])
def test_both_import_orders_work_in_one_process(order):
    code = (
        "import numpy as np, attnviz\n"
        "spec = attnviz.AttentionSpec(mask='causal')\n"
        f"a = attnviz.run_attention(spec, {order[0]!r})\n"
        f"b = attnviz.run_attention(spec, {order[1]!r})\n"
        "print(float(np.abs(a.output - b.output).max()) < 1e-5)"
    )
    assert _python(code) == "True"


@requires("tensorflow")
def test_keras_runs_on_tensorflow_whatever_keras_backend_says():
    code = (
        "import attnviz\n"
        "r = attnviz.run_attention(attnviz.AttentionSpec(), 'tensorflow')\n"
        "import keras\n"
        "print(r.output.shape, keras.backend.backend())"
    )
    assert _python(code, KERAS_BACKEND="jax") == "(1, 8, 32) tensorflow"


@requires("torch", "tensorflow")
def test_importing_a_backend_changes_no_process_wide_setting():
    """TF32 and KERAS_BACKEND are left alone at import; a run sets what it needs (issue 11)."""
    code = (
        "import os, torch\n"
        "torch.backends.cuda.matmul.allow_tf32 = True\n"
        "import attnviz.backends.torch_backend, attnviz.backends.tf_backend as tb\n"
        "print(torch.backends.cuda.matmul.allow_tf32, 'KERAS_BACKEND' in os.environ,"
        " tb.tf.config.experimental.tensor_float_32_execution_enabled())\n"
        "import attnviz\n"
        "attnviz.run_attention(attnviz.AttentionSpec(), 'torch')\n"
        "attnviz.run_attention(attnviz.AttentionSpec(), 'tensorflow')\n"
        "print(torch.backends.cuda.matmul.allow_tf32, tb.tf.config.experimental.tensor_float_32_execution_enabled())"
    )
    env = {k: v for k, v in __import__("os").environ.items() if k != "KERAS_BACKEND"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "False", "True", "False", "False"]


@requires("torch")
def test_a_torch_run_backs_large_tensors_with_huge_pages_unless_the_user_said_otherwise():
    """PyTorch reads THP_MEM_ALLOC_ENABLE at its import: `backend('torch')` sets it where unset (a
    fresh 32 MiB map otherwise pays 8,192 page faults), and leaves a user's own value alone. Where
    the kernel allows huge pages (madvise or always), a 32 MiB tensor then lies in them."""
    code = (
        "import os, attnviz\n"
        "print(os.environ.get('THP_MEM_ALLOC_ENABLE', '-'))\n"
        "from attnviz.frameworks import backend\n"
        "torch = backend('torch').torch\n"
        "print(os.environ.get('THP_MEM_ALLOC_ENABLE', '-'))\n"
        "t = torch.empty(8, 1024, 1024).fill_(1.0)\n"
        "rollup = open('/proc/self/smaps_rollup').read().split('AnonHugePages:')[1].split()[0]\n"
        "print(int(rollup) > 0)"
    )
    kernel = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    allowed = "[never]" not in kernel
    env = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    unset, set_, huge = out.stdout.split()
    assert (unset, set_) == ("-", "1") and (huge == "True" or not allowed), out.stdout
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "THP_MEM_ALLOC_ENABLE": "0"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[:2] == ["0", "0"]
    if "[madvise]" in kernel:  # huge pages only where asked for: not asked, none
        assert out.stdout.split()[2] == "False", out.stdout
