"""Regenerate docs/benchmarks.md from one run of the harness.

python benchmarks/bench_doc.py [--repeats 15] [--device cpu]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from attnviz import bench  # noqa: E402
from attnviz.bench.report import to_markdown  # noqa: E402
from attnviz.bench.training import to_markdown as training_markdown  # noqa: E402
from attnviz.bench.training import training_rows  # noqa: E402
from attnviz.exec.monitor import Monitor  # noqa: E402

KEEP = "<!-- bench_doc.py keeps what follows: sections other benchmarks write -->"
HEADER = """# Benchmarks

Produced by the harness in this repository, `attnviz.bench`, on the machine described under
*Results* — the project's 2-core CPU machine, no GPU. Regenerate this page with
`python benchmarks/bench_doc.py`; run the harness yourself with

```bash
python -m attnviz.bench --repeats 15 --markdown report.md --json rows.json --csv rows.csv
python -m attnviz.bench --quick          # a small sweep, seconds
python -m attnviz.bench --device gpu     # on a machine with a GPU
```

On a GPU (an H100, PyTorch only): docs/gpu.md.

Ratios are of medians measured side by side in one run. Method: each implementation is built once;
its first call (tracing, XLA compilation, lazy initialisation) is timed on its own (*first call*);
then {warmup} warm-up calls and {repeats} timed calls, each ending with the device synchronised (CUDA
synchronise / the result read back from TensorFlow); the same intra-op thread count in both
frameworks, set once before any op. FLOPs count the four projections, QKᵀ and A·V (2 × multiply-adds);
the *ceiling* is the best of many n × n matmuls (n = 512, 1024, 2048) timed in the same framework,
on the same device, at the start and again at the end of the run; a row faster than that can only
come from a noisy moment and is flagged, never shown above 100 %.

Two sweeps, one run:
- **the public door** — `attnviz.run_attention(..., capture=False)` against each framework's own
  layer, both NumPy in and NumPy out, weights returned: L=8 (d_model 32, 4 heads) and L=512
  (d_model 512, 8 heads);
- **the layers** — batch 1, 8 heads, d_model 512 (d_k = d_v = 64), float32, no mask,
  self-attention, lengths 128–1024.

| implementation | what it times |
|---|---|
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    args = parser.parse_args()
    progress = Monitor(
        lambda i, n, row: (
            row and print(f"[{i}/{n}] {row['implementation']} · {row['length']}", file=sys.stderr)
        )
    )
    load = lambda: " / ".join(Path("/proc/loadavg").read_text().split()[:3])  # noqa: E731
    before, started = load(), time.strftime("%d %b %Y, %H:%M UTC", time.gmtime())
    door = ["attnviz-torch-api", "torch-mha-api", "attnviz-tf-api", "keras-mha-api"]
    door_result = bench.run_sweep(
        [bench.Case(1, 8, 4, 32), bench.Case(1, 512, 8, 512)],
        door,
        device=args.device,
        warmup=args.warmup,
        repeats=max(args.repeats, 30),
        monitor=progress,
    )
    layers = [name for name in bench.REGISTRY if name not in door]
    result = bench.run_sweep(
        [bench.Case(1, n, 8, 512) for n in (128, 256, 512, 1024)],
        layers,
        device=args.device,
        warmup=args.warmup,
        repeats=args.repeats,
        monitor=progress,
    )
    result = {"meta": result["meta"], "rows": door_result["rows"] + result["rows"]}
    text = HEADER.format(warmup=args.warmup, repeats=args.repeats)
    text += "\n".join(f"| `{k}` | {v.description} |" for k, v in bench.REGISTRY.items())
    text += (
        "\n\n## Results\n\n"
        + f"Run {started}; load average (1 / 5 / 15 min, 2 cores) {before} before, {load()} after.\n\n"
    )
    text += to_markdown(result)
    text += "\n## Training\n\n" + training_markdown(training_rows())
    old = args.out.read_text() if args.out.exists() else ""
    if KEEP in old:  # sections other benchmarks write (benchmarks/exec_bench.py) stay
        text += "\n" + old[old.index(KEEP) :]
    args.out.write_text(text)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
