"""What the execution layer costs (issue 28 §1): a library call in process against the same call
through `attnviz.exec` (submit + result, a warm local worker), and the workers' resident memory.

Overhead, interleaved, median of `--repeats` pairs, on SmolLM2-135M-Instruct (the packaged GGUF),
PyTorch, one intra-op thread on both sides (the workers' `ATTNVIZ_THREADS`):
- round trip: a task that returns its argument (the layer's floor: pickling, the pipe, a thread hop);
- small: a head-role scan over one repeated sequence of 8 + 8 tokens (one forward pass);
- large: a 20-token generation (the issue's SmolLM2 page target);
and the first call of each way (a cold worker starts, imports PyTorch, loads the checkpoint).
The worker runs at each niceness of `--nice` (the server's default is 10; 0 measures the layer alone).

Memory (`--part memory`): a worker's resident set idle, with PyTorch, with SmolLM2 in PyTorch,
with SmolLM2 in both frameworks and its peak during a 20-token generation; the engine's own
process; the whole for `ATTNVIZ_MAX_CONCURRENT_RUNS` workers each holding SmolLM2 in both.

Prints markdown; the load average before and after is part of it.

Usage: python benchmarks/exec_bench.py [--part overhead|memory|all] [--repeats 9] [--nice 0 10]
       [--out docs/benchmarks.md]   (its section between the exec_bench markers is replaced)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

SMOLLM2 = "SmolLM2-135M-Instruct"
TEXT = "The cat sat on the mat because it was tired, and then"
BEGIN, END = "<!-- exec_bench -->", "<!-- /exec_bench -->"


def echo(ctx, value):
    """The round trip's task: its argument back."""
    return value


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def status_mib(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise ValueError(f"{field} not in /proc/{pid}/status")


def calls(echo_task):
    """name → (in-process call, the same through the layer: (task, args, kwargs)), and a check
    that both give the same value."""
    from attnviz import pretrained
    from attnviz.app.interpret import tasks
    from attnviz.interp import roles
    from attnviz.pretrained.tasks import generate

    ckpt = pretrained.load_choice(SMOLLM2)
    payload = list(range(1000))
    return {
        "round trip": (lambda: payload, (echo_task, (payload,), {}), lambda a, b: a == b),
        "small: role scan, 16 tokens": (
            lambda: roles.scan(ckpt, "torch", half=8, n=1, seed=0),
            (tasks.role_scan, (SMOLLM2, "torch", 8, 1, 0), {}),
            lambda a, b: all((a.scores[r] == b.scores[r]).all() for r in a.scores),
        ),
        "large: 20-token generation": (
            lambda: ckpt.generate(TEXT, "torch", 20, temperature=0),
            (generate, (SMOLLM2, TEXT, "torch", 20, 0.0), {}),
            lambda a, b: a.new_ids == b.new_ids,
        ),
    }


def overhead(echo_task, repeats: int, nice: int) -> list[dict]:
    from attnviz import exec as ex
    from attnviz import pretrained
    from attnviz.frameworks import backend

    engine = ex.LocalEngine(ex.Budget(workers=1, trainings=1, nice=nice, threads=1))
    rows = []
    try:
        started = time.perf_counter()
        ckpt = pretrained.load_choice(SMOLLM2)
        backend("torch").set_threads(1)
        ckpt.model("torch")
        cold_here = time.perf_counter() - started
        for name, (here, (task, args, kwargs), same) in calls(echo_task).items():
            started = time.perf_counter()
            first = ex.submit(task, *args, engine=engine, **kwargs).result(600)
            cold_there = time.perf_counter() - started
            pairs = []
            for _ in range(repeats):
                a0 = time.perf_counter()
                mine = here()
                a1 = time.perf_counter()
                theirs = ex.submit(task, *args, engine=engine, **kwargs).result(600)
                a2 = time.perf_counter()
                pairs.append((a1 - a0, a2 - a1))
                assert same(mine, theirs), f"{name}: the layer's value differs from the library's"
            assert same(first, mine)
            lib, layer = (statistics.median(p[i] for p in pairs) for i in (0, 1))
            rows.append(
                {
                    "task": name,
                    "library_s": lib,
                    "layer_s": layer,
                    "overhead_s": statistics.median(b - a for a, b in pairs),
                    "ratio": layer / lib if lib > 1e-3 else None,
                    "first_layer_s": cold_there,
                    "first_library_s": cold_here if name != "round trip" else 0.0,
                }
            )
    finally:
        engine.close()
    return rows


def memory(echo_task) -> dict:
    """Resident MiB of one worker at each stage, the engine's process, and the pool full."""
    from attnviz import exec as ex
    from attnviz.app.interpret import tasks
    from attnviz.exec import Budget
    from attnviz.pretrained.tasks import generate

    budget = Budget.from_env()
    out = {}
    for preload in ((), ("torch",)):
        engine = ex.LocalEngine(Budget(workers=1, trainings=1, nice=budget.nice, threads=1))
        engine.warm(preload)
        try:
            ex.submit(echo_task, 0, engine=engine).result(600)  # after the worker's imports
            pid = engine.workers()[0]
            out["worker with PyTorch imported" if preload else "idle worker"] = status_mib(pid)
            if not preload:
                continue
            ex.submit(tasks.logit_lens, SMOLLM2, "Hi", "torch", engine=engine).result(600)
            out["worker with SmolLM2 (PyTorch)"] = status_mib(pid)
            ex.submit(tasks.logit_lens, SMOLLM2, "Hi", "tensorflow", engine=engine).result(900)
            out["worker with SmolLM2 (PyTorch and TensorFlow)"] = status_mib(pid)
            for framework in ("torch", "tensorflow"):
                ex.submit(generate, SMOLLM2, TEXT, framework, 20, 0.0, engine=engine).result(900)
            out["its peak, after a 20-token generation in each"] = status_mib(pid, "VmHWM")
        finally:
            engine.close()
    out["the engine's own process (this script)"] = status_mib(os.getpid())
    out[f"pool full: {budget.workers} workers at that peak, without the server"] = (
        budget.workers * out["its peak, after a 20-token generation in each"]
    )
    return out


def overhead_table(echo_task, repeats: int, nice: int) -> list[str]:
    lines = [
        f"| task (worker niceness {nice}) | library | through the layer | overhead | ratio "
        "| first call: library (its load) / layer (a new worker's imports and load) |",
        "|---|---|---|---|---|---|",
    ]
    for r in overhead(echo_task, repeats, nice):
        ratio = "—" if r["ratio"] is None else f"{r['ratio']:.2f}×"
        lines.append(
            f"| {r['task']} | {r['library_s']:.3f} s | {r['layer_s']:.3f} s | {r['overhead_s'] * 1000:+.0f} ms "
            f"| {ratio} | {r['first_library_s']:.1f} s / {r['first_layer_s']:.1f} s |"
        )
    return lines


def main(echo_task) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["overhead", "memory", "all"], default="all")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--nice", type=int, nargs="+", default=[0, 10])
    parser.add_argument(
        "--out", type=Path, help="replace this script's section of that file (docs/benchmarks.md)"
    )
    args = parser.parse_args()
    lines = [f"Load average before: {loadavg()} ({os.cpu_count()} cores), {time.strftime('%d %b %Y')}.", ""]
    if args.part in ("overhead", "all"):
        for nice in args.nice:
            lines += [*overhead_table(echo_task, args.repeats, nice), ""]
    if args.part in ("memory", "all"):
        lines += ["| resident memory | MiB |", "|---|---|"]
        lines += [f"| {what} | {mib:,.0f} |" for what, mib in memory(echo_task).items()] + [""]
    lines.append(f"Load average after: {loadavg()}.")
    text = "\n".join(lines)
    print(text)
    if args.out:
        sys.path.insert(0, str(Path(__file__).parents[1]))
        from benchmarks.doc_section import write_section

        write_section(args.out, text, BEGIN, END)


if __name__ == "__main__":
    # The round trip's task must be importable by a worker: this file, imported by its name.
    sys.path.insert(0, str(Path(__file__).parent))
    import exec_bench

    main(exec_bench.echo)
