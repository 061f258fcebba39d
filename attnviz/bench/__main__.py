"""`python -m attnviz.bench`: run a sweep from the command line."""

from __future__ import annotations

import argparse
import json
import sys

from attnviz.bench import REGISTRY, Case, run_sweep, to_csv
from attnviz.bench.report import to_markdown
from attnviz.exec.monitor import Monitor

QUICK = {"lengths": [32, 128], "d_model": 128, "heads": 4, "repeats": 5, "warmup": 1}


def _ints(text: str) -> list[int]:
    return [int(t) for t in text.split(",") if t]


def _print_row(done: int, total: int | None, row: dict | None) -> None:
    if row is not None:
        print(f"[{done}/{total}] {row['implementation']} · length {row['length']}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    import attnviz.bench as bench

    parser = argparse.ArgumentParser(
        prog="python -m attnviz.bench",
        description=bench.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="implementations:\n" + "\n".join(f"  {k:24} {v.description}" for k, v in REGISTRY.items()),
    )
    parser.add_argument("--quick", action="store_true", help="a small sweep that finishes in seconds")
    parser.add_argument("--impl", default=",".join(REGISTRY), help="comma-separated; default: all")
    parser.add_argument("--lengths", type=_ints, default=[128, 256, 512, 1024], help="e.g. 128,256,512")
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--mask", choices=["none", "causal"], default="none")
    parser.add_argument("--device", choices=["cpu", "gpu", "auto"], default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="default: all cores")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", help="write the full result (meta + rows) here; '-' for stdout")
    parser.add_argument("--csv", help="write the rows as CSV here; '-' for stdout")
    parser.add_argument("--markdown", help="write a report (targets + table) here; '-' for stdout")
    parser.add_argument(
        "--training",
        action="store_true",
        help="also time the Training lab's model: attnviz vs the framework's layer",
    )
    args = parser.parse_args(argv)
    ceiling = {}
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
        ceiling = {"ceiling_sizes": (256, 512), "ceiling_repeats": 5}
    cases = [Case(args.batch, n, args.heads, args.d_model, args.dtype, args.mask) for n in args.lengths]
    result = run_sweep(
        cases,
        args.impl.split(","),
        args.device,
        warmup=args.warmup,
        repeats=args.repeats,
        threads=args.threads,
        monitor=Monitor(_print_row),
        **ceiling,
    )
    report = to_markdown(result)
    if args.training:
        from attnviz.bench.training import to_markdown as training_markdown
        from attnviz.bench.training import training_rows

        result["training"] = training_rows(repeats=3 if args.quick else 5, steps=30 if args.quick else 100)
        report += "\n" + training_markdown(result["training"])
    outputs = (
        (json.dumps(result, indent=2), args.json),
        (to_csv(result), args.csv),
        (report, args.markdown),
    )
    for text, dest in outputs:
        if dest == "-":
            print(text)
        elif dest:
            with open(dest, "w") as f:
                f.write(text)
    if not (args.json or args.csv or args.markdown):
        print(to_csv(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
