"""Perplexity of the bundled long text under three cache policies (issue 44 §1), written to docs/streaming.md.

    nice -n 5 python benchmarks/streaming_bench.py                       # SmolLM2 and Gemma 3, PyTorch
    nice -n 5 python benchmarks/streaming_bench.py --frameworks tensorflow --tokens 512 --window 128

For each model and framework: `attnviz.kernels.streaming.score_ids` over the first `--tokens` tokens
of `assets/streaming_text.txt` (`streaming.bundled_text()`), one token per step, with the full
cache, a sliding window of `--window` tokens, and the window with each of `--sinks` sink tokens.
Reported: the perplexity over the whole prefix, over the tokens read after the window filled
(where the policies differ), per chunk of `--window` tokens (the blow-up and the recovery), and the
median wall time of one step (each step timed), with the machine's load before and after. Each
framework has its own section of the page (`streaming_bench:<framework>`), so a run of one framework
keeps the other's rows; the per-token NLL goes to `test-artifacts/streaming-bench-<framework>.json`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.doc_section import write_section  # noqa: E402
from benchmarks.llama_bench import uptime  # noqa: E402

DOC = ROOT / "docs" / "streaming.md"
RESULTS = ROOT / "test-artifacts" / "streaming-bench-{}.json"
MODELS = ["SmolLM2-135M-Instruct", "gemma-3-270m"]


def policies(window: int, sinks: list[int]) -> list[tuple[int | None, int]]:
    return [(None, 0), (window, 0), *((window, s) for s in sinks)]


def measure(
    name: str, framework: str, tokens: int, window: int, sinks: list[int], threads: int
) -> list[dict]:
    from attnviz import pretrained
    from attnviz.exec.monitor import Monitor
    from attnviz.frameworks import backend
    from attnviz.kernels import streaming

    backend(framework).set_threads(
        threads
    )  # 2 threads on a loaded 2-core machine wait on each other: 100× slower
    ckpt = pretrained.load_choice(name)
    ids = streaming.text_ids(ckpt, streaming.bundled_text(), tokens)
    rows = []
    for w, s in policies(window, sinks):
        stamps, cpu = [time.perf_counter()], time.process_time()
        got = streaming.score_ids(
            ckpt,
            ids,
            framework,
            window=w,
            sinks=s,
            monitor=Monitor(lambda *_, t=stamps: t.append(time.perf_counter())),
        )
        steps = np.diff(stamps)
        after = got.nll[window + max(sinks) :]  # the same tokens for every policy: all read past the window
        row = {
            "model": name,
            "framework": framework,
            "policy": got.policy.label,
            "tokens": len(ids),
            "ppl": got.perplexity,
            "ppl_after_window": float(np.exp(after.mean())),
            "chunks": [
                float(np.exp(c.mean())) for c in np.array_split(got.nll, max(1, len(got.nll) // window))
            ],
            "median_step_ms": 1e3 * statistics.median(steps),
            "cpu_s": time.process_time() - cpu,
            "wall_s": stamps[-1] - stamps[0],
            "nll": got.nll.tolist(),
        }
        print(json.dumps({k: v for k, v in row.items() if k not in ("chunks", "nll")}), flush=True)
        rows.append(row)
    return rows


def table(rows: list[dict], window: int) -> str:
    lines = [
        f"| model | framework | policy | perplexity, all | after the window filled | per {window}-token chunk | "
        "median step |",
        "| --- | --- | --- | ---: | ---: | --- | ---: |",
    ]
    for r in rows:
        chunks = " · ".join(f"{c:.1f}" for c in r["chunks"])
        lines.append(
            f"| {r['model']} | {r['framework']} | {r['policy']} | {r['ppl']:.2f} | {r['ppl_after_window']:.2f} | "
            f"{chunks} | {r['median_step_ms']:.0f} ms |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=MODELS)
    parser.add_argument("--frameworks", nargs="+", default=["torch"])
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--window", type=int, default=256)
    parser.add_argument("--sinks", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1, help="models measured at once, one process each")
    args = parser.parse_args()
    for framework in args.frameworks:
        run(framework, args)


def run(framework: str, args: argparse.Namespace) -> None:
    """Measure every model in `framework` and write its section of the page."""
    before, started = uptime(), datetime.datetime.now(datetime.UTC)
    measured = [(name, framework, args.tokens, args.window, args.sinks, args.threads) for name in args.models]
    with ProcessPoolExecutor(args.jobs) as pool:  # one process per model, `--jobs` at a time
        rows = [row for got in pool.map(measure, *zip(*measured, strict=True)) for row in got]
    after = uptime()
    results = Path(str(RESULTS).format(framework))
    results.parent.mkdir(exist_ok=True)
    results.write_text(json.dumps({"before": before, "after": after, "rows": rows}, indent=1))
    text = (
        f"Measured {started:%Y-%m-%d %H:%M} UTC by `benchmarks/streaming_bench.py --tokens {args.tokens} "
        f"--window {args.window} --sinks {' '.join(map(str, args.sinks))} --frameworks {framework} --jobs {args.jobs}` "
        f"({args.threads} thread, {args.jobs} model{'s' * (args.jobs > 1)} at once), "
        f"on a shared 2-core machine busy with other engineers' work (load before: `{before}`; after: "
        f"`{after}`): the step times are slowed by that load, the perplexities are not.\n\n"
        + table(rows, args.window)
    )
    write_section(
        DOC, text, f"<!-- streaming_bench:{framework}:start -->", f"<!-- streaming_bench:{framework}:end -->"
    )
    print(f"wrote {DOC.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
