"""Regenerate docs/benchmarks.md from one run of the harness.

python benchmarks/bench_doc.py [--repeats 15] [--device cpu]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from attnviz import bench  # noqa: E402

HEADER = """# Benchmarks

Produced by the harness in this repository, `attnviz.bench`, on the machine described under
*Results* — the project's 2-core CPU machine, no GPU. Regenerate this page with
`python benchmarks/bench_doc.py`; run the harness yourself with

```bash
python -m attnviz.bench --repeats 15 --markdown report.md --json rows.json --csv rows.csv
python -m attnviz.bench --quick          # a small sweep, seconds
python -m attnviz.bench --device gpu     # on a machine with a GPU
```

Ratios are of medians measured side by side in one run. Method: each implementation is built once;
its first call (tracing, XLA compilation, lazy initialisation) is timed on its own (*first call*);
then {warmup} warm-up calls and {repeats} timed calls, each ending with the device synchronised (CUDA
synchronise / the result read back from TensorFlow); the same intra-op thread count in both
frameworks, set once before any op. FLOPs count the four projections, QKᵀ and A·V (2 × multiply-adds);
the *ceiling* is a 2048 × 2048 matmul timed in the same framework, on the same device, in the same
run. Configuration: batch 1, 8 heads, d_model 512 (d_k = d_v = 64), float32, no mask,
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
    cases = [bench.Case(1, n, 8, 512) for n in (128, 256, 512, 1024)]
    result = bench.run_sweep(
        cases,
        device=args.device,
        warmup=args.warmup,
        repeats=args.repeats,
        progress=lambda i, n, label: print(f"[{i}/{n}] {label}", file=sys.stderr),
    )
    text = HEADER.format(warmup=args.warmup, repeats=args.repeats)
    text += "\n".join(f"| `{k}` | {v[1]} |" for k, v in bench.IMPLEMENTATIONS.items())
    text += "\n\n## Results\n\n" + bench.to_markdown(result)
    args.out.write_text(text)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
