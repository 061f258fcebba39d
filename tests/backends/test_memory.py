"""Issue 10 §2: `estimate_bytes` bounds the peak memory a run really adds, in both frameworks.

Measured in a fresh subprocess: resident memory just before the run, the process's peak resident
memory just after it (VmHWM, reset just before the run), after a small warm-up run so framework
start-up is not counted.
On the first version TensorFlow's peak was 1.6–1.8× the estimate.
"""

import json
import subprocess
import sys

import pytest

PROBE = """
import json, resource, sys
import attnviz
from attnviz import AttentionSpec, estimate_bytes, run_attention
fw, L, H, mask, capture = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5] == "1"
spec = AttentionSpec(len_q=L, n_heads=H, d_model=64, mask=mask)
x, _ = attnviz.make_inputs(spec)
params = attnviz.init_params(spec)
run_attention(AttentionSpec(len_q=4, n_heads=H, d_model=64, mask=mask), fw, capture=capture)

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()

def peak():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM"))

with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak: ru_maxrss would still hold the parent's peak from before exec
before = rss()
run_attention(spec, fw, x_q=x, params=params, capture=capture, memory_budget=float("inf"))
peak = peak()
print(json.dumps({"growth": peak - before, "estimate": estimate_bytes(spec, capture)}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm (Linux)")
@pytest.mark.parametrize(
    ("length", "heads", "mask", "capture"),
    [(1024, 8, "causal", False), (1536, 8, "none", False), (512, 8, "causal", True)],
)
def test_estimate_bounds_the_measured_peak(framework, length, heads, mask, capture):
    def probe() -> dict:
        out = subprocess.run(
            [sys.executable, "-c", PROBE, framework, str(length), str(heads), mask, str(int(capture))],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    m = probe()
    grid = heads * length * length * 4
    assert m["growth"] >= grid * 0.9, f"the run did not allocate its weights? {m}"  # the probe measures
    assert m["estimate"] >= m["growth"], (
        f"estimate {m['estimate'] / 2**20:.0f} MiB < measured {m['growth'] / 2**20:.0f} MiB"
    )
