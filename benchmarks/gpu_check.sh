#!/usr/bin/env bash
# The GPU check of issue 45 for a lent GPU machine (docs/gpu.md), in under 8 minutes on an H100:
#   1. the library's GPU tests: `pytest -m gpu` over the folders of tests/test_library_lane.py
#      (the lane that CI runs with Streamlit, the app and TensorFlow blocked, so a machine with
#      PyTorch, NumPy and pytest can run it);
#   2. benchmarks/gpu_bench.py at short settings: the door against PyTorch's layer on the GPU and the
#      CPU (L = 512, 1024, 2048 on the GPU; 512, 1024 on the CPU), and SmolLM2's generation and
#      patching sweep on the GPU where SmolLM2 and transformers are installed.
# Everything it writes goes to $OUT (default ./gpu-check): machine.txt, pytest.txt, pytest.xml,
# bench.txt and gpu.md (docs/gpu.md with the bench's section replaced: copy it back to keep it).
#
#   OUT=/tmp/out bash benchmarks/gpu_check.sh          # on the GPU machine, from the checkout
#   OUT=/tmp/out bash benchmarks/gpu_check.sh --cpu    # the same steps on the CPU, tiny settings:
#                                                       # checks the script runs (every GPU test skips)
# Exit status: 0 when the tests passed (or skipped) and the bench wrote its rows; else the first failure's.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu-check}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY="${PYTHON:-python}"
if [ "${1:-}" = "--cpu" ]; then
    BENCH=(--devices cpu --lengths 64 128 --warmup 1 --repeats 3)
else
    BENCH=(--devices gpu cpu --lengths 512 1024 2048 --cpu-lengths 512 1024 --warmup 2 --repeats 5)
    if "$PY" -c "import transformers; from attnviz import pretrained; assert 'SmolLM2-135M-Instruct' in pretrained.local_checkpoints()" 2>/dev/null; then
        BENCH+=(--models --model-devices gpu)
    fi
fi

{
    date -u
    echo "load average: $(cat /proc/loadavg 2>/dev/null)"
    nproc
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || echo "no nvidia-smi"
    "$PY" -c "import sys, torch, numpy; print('Python', sys.version.split()[0], '| PyTorch', torch.__version__, '| NumPy', numpy.__version__, '| CUDA', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
    git log -1 --format='%H %s' 2>/dev/null || true
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

# 1. The library's GPU tests (a module that cannot be collected — a missing optional package — is
#    reported, and the others still run).
read -r -a FOLDERS <<< "$("$PY" -c "from tests.test_library_lane import LIBRARY; print(' '.join(LIBRARY))")"
timeout 270 "$PY" -m pytest -p no:randomly -p no:cacheprovider -q -rs -m gpu --continue-on-collection-errors \
    --junitxml="$OUT/pytest.xml" "${FOLDERS[@]}" 2>&1 | tee "$OUT/pytest.txt"
tests=$?
[ "$tests" -eq 5 ] && tests=0  # pytest's 5: no test was collected (none marked gpu): not a failure

# 2. The bench, into a copy of docs/gpu.md.
cp docs/gpu.md "$OUT/gpu.md"
timeout 240 "$PY" benchmarks/gpu_bench.py "${BENCH[@]}" --out "$OUT/gpu.md" 2>&1 | tee "$OUT/bench.txt"
bench=$?

echo "gpu_check: tests exit $tests, bench exit $bench; files in $OUT" | tee -a "$OUT/machine.txt"
[ "$tests" -ne 0 ] && exit "$tests"
exit "$bench"
