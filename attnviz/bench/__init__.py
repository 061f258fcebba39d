"""Timing harness: attnviz against each framework's own attention, honestly measured.

Usable as a library (`run_sweep`, `iter_sweep`) and as a command:

    python -m attnviz.bench --quick --json out.json --csv out.csv

Method: every implementation (see `REGISTRY`) is built once; its first call
(tracing, compilation, lazy init) is timed on its own; then warm-up calls,
then `repeats` timed calls, each ending with the device synchronised.
Reported: median and inter-quartile range of the timed calls. Thread counts
are set once, the same in every framework (`match_threads`: TensorFlow fixes its
pools the first time it runs in a process, so the others follow its count), read
back and stored with every row, as are the framework versions and the device
name; the threads each framework actually kept busy on its matmul are counted
(`busy_threads`, Linux) and stored in the run's meta beside the setting. Each row also carries the
counted FLOPs (projections + QKᵀ + A·V), the achieved GFLOP/s, and its
fraction of a matmul ceiling: the best of many timed matmuls in the same
framework, on the same device, measured at the start and again at the end of
the run at sizes around the cases' own. A row faster than that ceiling can
only come from a noisy run: it is flagged (`noisy`), and its fraction left
empty rather than shown above 100 %.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import os
import platform
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from importlib import metadata

import numpy as np

from attnviz.bench.registry import REGISTRY, Implementation
from attnviz.exec.monitor import Monitor, Stop, watch
from attnviz.frameworks import FRAMEWORKS, backend, is_installed, prepare
from attnviz.spec import AttentionSpec

__all__ = [
    "FIELDS",
    "REGISTRY",
    "Case",
    "Implementation",
    "busy_threads",
    "count_flops",
    "iter_sweep",
    "match_threads",
    "matmul_ceiling",
    "run_sweep",
    "time_calls",
    "to_csv",
    "weights_bytes",
]

FIELDS = [
    "implementation",
    "framework",
    "version",
    "device",
    "device_name",
    "threads",
    "dtype",
    "batch",
    "length",
    "heads",
    "d_model",
    "mask",
    "first_call_s",
    "median_s",
    "p25_s",
    "p75_s",
    "iqr_s",
    "repeats",
    "flops",
    "gflops_per_s",
    "ceiling_gflops_per_s",
    "fraction_of_ceiling",
    "noisy",
    "weights_bytes",
    "error",
]


@dataclass(frozen=True)
class Case:
    """One configuration of the sweep (self-attention, query length = key length)."""

    batch: int = 1
    length: int = 128
    heads: int = 8
    d_model: int = 512
    dtype: str = "float32"
    mask: str = "none"  # "none" | "causal"

    def spec(self) -> AttentionSpec:
        return AttentionSpec(
            batch=self.batch,
            len_q=self.length,
            d_model=self.d_model,
            n_heads=self.heads,
            mask=self.mask,
            dtype=self.dtype,
        )


def count_flops(spec: AttentionSpec) -> int:
    """Multiply-adds ×2 of the projections, QKᵀ and A·V (softmax and masking not counted)."""
    B, H, Lq, Lk, dk, dv = spec.batch, spec.n_heads, spec.len_q, spec.len_kv, spec.d_k, spec.d_v
    projections = Lq * spec.d_model * H * dk + Lk * spec.d_kv_in * H * (dk + dv) + Lq * H * dv * spec.d_model
    return 2 * B * (projections + H * Lq * Lk * (dk + dv))


def weights_bytes(spec: AttentionSpec) -> int:
    return spec.batch * spec.n_heads * spec.len_q * spec.len_kv * spec.itemsize


def _check(monitor: Monitor | None) -> None:
    """`Stop` (the one stop exception: a `BaseException`, so `measure`'s report of a kernel's own
    error does not swallow it) once `monitor` says the work should stop."""
    if monitor is not None and monitor.stopped():
        raise Stop


def time_calls(
    call: Callable[[], object], warmup: int, repeats: int, *, monitor: Monitor | None = None
) -> tuple[float, list[float]]:
    """The first call's time, then `repeats` timed calls after `warmup` untimed ones.

    `monitor.stopped()` is read before every call (outside the timed span); once it is True, `Stop`
    is raised: a closed tab's sweep ends within one call, not one row of calls.
    """
    _check(monitor)
    start = time.perf_counter()
    call()
    first = time.perf_counter() - start
    for _ in range(warmup):
        _check(monitor)
        call()
    samples = []
    for _ in range(repeats):
        _check(monitor)
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return first, samples


def matmul_ceiling(
    framework: str,
    device: str,
    dtype: str,
    sizes: Iterable[int] = (512, 1024, 2048),
    repeats: int = 15,
    *,
    monitor: Monitor | None = None,
) -> float:
    """The best GFLOP/s of an n × n @ n × n matmul in `framework` on `device`, over `sizes` and repeats.

    The best (not the median) of many: a ceiling is what the machine can do
    when nothing else is running, and a busy moment only lowers a sample.
    """
    be = backend(framework)
    dev = be.resolve_device(device)
    best = 0.0
    for n in sizes:
        a = be.to_tensor(np.random.default_rng(0).standard_normal((n, n)).astype(dtype), dev)

        def call(a=a):
            out = be.matmul(a, a)
            be.sync(dev)
            return out

        _, samples = time_calls(call, warmup=2, repeats=repeats, monitor=monitor)
        best = max(best, 2 * n**3 / min(samples) / 1e9)
    return best


# -- threads --------------------------------------------------------------------------------


def match_threads(frameworks: Iterable[str], threads: int) -> dict[str, int]:
    """Give every framework the same intra-op thread count; return the counts in force (read back).

    TensorFlow's thread pools are fixed the first time it runs in a process (its setter then
    raises, and `set_threads` keeps the old count): when a framework keeps another count than
    `threads`, the others are set to that one instead, so the frameworks still match.
    """
    frameworks = list(frameworks)
    for fw in frameworks:
        backend(fw).set_threads(threads)
    got = {fw: backend(fw).get_threads() for fw in frameworks}
    fixed = sorted({n for n in got.values() if n != threads})
    if len(fixed) == 1:
        for fw in frameworks:
            backend(fw).set_threads(fixed[0])
        got = {fw: backend(fw).get_threads() for fw in frameworks}
    return got


def _cpu_ticks() -> dict[str, int]:
    """CPU time (clock ticks, user + system) of each thread of this process (Linux)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        out[tid] = int(fields[11]) + int(fields[12])  # utime, stime
    return out


def busy_threads(call: Callable[[], float]) -> tuple[int | None, float]:
    """Run `call`; return how many threads of this process worked during it, and its result.

    A thread counts when it used at least a quarter of the CPU time of the busiest one: the
    framework's workers, not a thread that woke once. None where /proc is not available.
    Other work in the same process at the same time (another visitor of an app server) can
    add to the count; run on a quiet process for an exact one.
    """
    if not os.path.isdir("/proc/self/task"):
        return None, call()
    before = _cpu_ticks()
    result = call()
    used = [ticks - before.get(tid, 0) for tid, ticks in _cpu_ticks().items()]
    most = max(used, default=0)
    return (sum(u >= most / 4 for u in used) if most else None), result


# -- the sweep ------------------------------------------------------------------------------


def cpu_name() -> str:
    """The processor's model name (Linux), else what `platform` knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def versions() -> dict[str, str]:
    """Python's, NumPy's and every installed framework's version, read from the installed
    package's metadata: a framework the sweep does not run is not imported for it (TensorFlow
    would add ~0.5 GB to a worker that only measured PyTorch, and keep it)."""
    out = {"python": platform.python_version(), "numpy": np.__version__}
    for fw in FRAMEWORKS:
        if is_installed(fw):
            out[fw] = _installed_version(fw)
    return out


def _installed_version(module: str) -> str:
    """The version of the distribution that provides `module` (the module's own `__version__`
    when it is already imported)."""
    imported = sys.modules.get(module)
    if getattr(imported, "__version__", None):
        return str(imported.__version__)
    with contextlib.suppress(metadata.PackageNotFoundError):
        return metadata.version(module)  # torch, tensorflow: the distribution has the module's name
    for dist in metadata.packages_distributions().get(module, []):  # tensorflow-cpu and the like
        with contextlib.suppress(metadata.PackageNotFoundError):
            return metadata.version(dist)
    return "unknown"


def _fraction(row: dict, ceiling: float) -> None:
    """Set the row's ceiling fields; a row above the ceiling is flagged noisy, never shown above 1."""
    if row.get("error"):
        return
    row["ceiling_gflops_per_s"] = ceiling
    fraction = float(row["gflops_per_s"] / ceiling)
    row["noisy"] = bool(fraction > 1)
    row["fraction_of_ceiling"] = None if fraction > 1 else fraction


def measure(
    name: str,
    case: Case,
    device: str,
    warmup: int,
    repeats: int,
    ceiling: float,
    *,
    monitor: Monitor | None = None,
) -> dict:
    """One row: the timing of implementation `name` on `case` (`monitor`: as `time_calls`)."""
    impl = REGISTRY[name]
    spec = case.spec()
    row = {
        "implementation": name,
        "framework": impl.framework,
        "device": device,
        **dataclasses.asdict(case),
        "flops": count_flops(spec),
        "weights_bytes": weights_bytes(spec),
        "repeats": repeats,
        "ceiling_gflops_per_s": ceiling,
        "fraction_of_ceiling": None,
        "noisy": False,
        "error": "",
    }
    try:
        call, device_name = impl.build(case, device)
        first, samples = time_calls(call, warmup, repeats, monitor=monitor)
    except Exception as error:  # a kernel that does not support this case: reported, not fatal
        return {**row, "error": f"{type(error).__name__}: {str(error)[:200]}"}
    p25, median, p75 = np.percentile(samples, [25, 50, 75])
    row.update(
        device_name=device_name,
        first_call_s=first,
        median_s=float(median),
        p25_s=float(p25),
        p75_s=float(p75),
        iqr_s=float(p75 - p25),
        gflops_per_s=float(row["flops"] / median / 1e9),
    )
    _fraction(row, ceiling)
    return row


def iter_sweep(
    cases: Iterable[Case],
    implementations: Iterable[str] = tuple(REGISTRY),
    device: str = "cpu",
    *,
    warmup: int = 2,
    repeats: int = 7,
    threads: int | None = None,
    ceiling_repeats: int = 15,
    ceiling_sizes: Iterable[int] = (512, 1024, 2048),
    monitor: Monitor | None = None,
) -> Iterator[tuple[dict, dict | None, int, int]]:
    """Like `run_sweep`, one row at a time: yields `(meta, row, done, total)`.

    `monitor.stopped()` is read before every timed call, the matmul ceiling's too: once it is True
    the sweep ends there, without the row it was measuring. The frameworks load inside
    `monitor.loading()` (a worker's memory budget does not count them).

    The first item has `row=None` (set-up done, nothing timed yet), so a
    caller can show progress and keep partial results if it stops early.
    After the last row the ceiling is measured again; the last item
    (`row=None`, `done == total`) comes after every row's fraction has been
    updated in place to the better of the two ceilings.
    """
    cases, implementations = list(cases), list(implementations)
    unknown = set(implementations) - set(REGISTRY)
    if unknown:
        raise ValueError(f"implementations: got {sorted(unknown)}; allowed: {sorted(REGISTRY)}.")
    implementations = [i for i in implementations if is_installed(REGISTRY[i].framework)]
    # One framework after the other within a case: alternating their thread pools slows both.
    order = list(FRAMEWORKS)
    implementations.sort(key=lambda i: order.index(REGISTRY[i].framework))
    frameworks = sorted({REGISTRY[i].framework for i in implementations})
    with watch(monitor).loading():
        for fw in frameworks:
            prepare(fw)
    before = {fw: backend(fw).get_threads() for fw in frameworks}
    match_threads(frameworks, threads or os.cpu_count() or 1)
    try:
        yield from _sweep(
            cases,
            implementations,
            frameworks,
            device,
            warmup,
            repeats,
            ceiling_repeats,
            ceiling_sizes,
            monitor,
        )
    except Stop:
        return
    finally:  # the process (an app server, a notebook) keeps its own thread counts
        for fw, n in before.items():
            backend(fw).set_threads(n)


def _sweep(
    cases, implementations, frameworks, device, warmup, repeats, ceiling_repeats, ceiling_sizes, monitor
):
    began = time.perf_counter()
    keys = sorted({(REGISTRY[i].framework, c.dtype) for i in implementations for c in cases})
    sizes = tuple(ceiling_sizes)

    def ceilings() -> dict[tuple[str, str], float]:
        return {
            (fw, dt): matmul_ceiling(fw, device, dt, sizes, ceiling_repeats, monitor=monitor)
            for fw, dt in keys
        }

    busy: dict[str, int | None] = {}
    start = {}
    for fw, dt in keys:  # the start ceiling, counting the threads each framework keeps busy on it
        count, start[(fw, dt)] = busy_threads(
            lambda fw=fw, dt=dt: matmul_ceiling(fw, device, dt, sizes, ceiling_repeats, monitor=monitor)
        )
        busy[fw] = count if busy.get(fw) is None else max(busy[fw], count or 0)
    threads = {fw: backend(fw).get_threads() for fw in frameworks}
    meta = {
        "versions": versions(),
        "threads": threads,
        "threads_busy": busy,
        "threads_match": len(set(threads.values())) == 1,
        "device": device,
        "machine": platform.machine(),
        "processor": cpu_name(),
        "cpu_count": os.cpu_count(),
        "warmup": warmup,
        "repeats": repeats,
        "ceiling_method": f"best of {ceiling_repeats} n×n matmuls, n in {list(sizes)}, "
        "at the start and at the end of the run",
        "matmul_ceiling_gflops_per_s": {f"{fw}/{dt}": v for (fw, dt), v in start.items()},
    }
    total = len(cases) * len(implementations)
    yield meta, None, 0, total
    rows, done = [], 0
    for case in cases:
        for name in implementations:
            fw = REGISTRY[name].framework
            row = measure(name, case, device, warmup, repeats, start[(fw, case.dtype)], monitor=monitor)
            row.update(threads=meta["threads"][fw], version=meta["versions"][fw])
            rows.append(row)
            done += 1
            yield meta, row, done, total
    end = ceilings()
    best = {k: max(start[k], end[k]) for k in start}
    meta["matmul_ceiling_gflops_per_s"] = {f"{fw}/{dt}": v for (fw, dt), v in best.items()}
    meta["matmul_ceiling_start_end"] = {f"{fw}/{dt}": [start[(fw, dt)], end[(fw, dt)]] for fw, dt in keys}
    for row in rows:
        _fraction(row, best[(row["framework"], row["dtype"])])
    meta["duration_s"] = time.perf_counter() - began
    yield meta, None, total, total


def run_sweep(
    cases: Iterable[Case],
    implementations: Iterable[str] = tuple(REGISTRY),
    device: str = "cpu",
    *,
    warmup: int = 2,
    repeats: int = 7,
    threads: int | None = None,
    monitor: Monitor | None = None,
    **ceiling,
) -> dict:
    """Time every implementation on every case, reporting `(rows done, rows)` and each measured
    row as a partial result to `monitor`; stopped (`monitor.stopped()`), the rows so far.

    Returns:
        `{"meta": {versions, threads, device, matmul ceilings, ...}, "rows": [one dict per
        implementation × case, with the fields in FIELDS]}`.
    """
    monitor = watch(monitor)
    sweep = iter_sweep(
        cases,
        implementations,
        device,
        warmup=warmup,
        repeats=repeats,
        threads=threads,
        monitor=monitor,
        **ceiling,
    )
    rows, meta = [], {}
    with contextlib.closing(sweep):  # a stop closes it: the frameworks get their thread counts back
        for latest, row, done, total in sweep:
            meta = latest
            if row is not None:
                rows.append(row)
            monitor.report(done, total, row)
            if monitor.stopped():
                break
    return {"meta": meta, "rows": rows}


def to_csv(result: dict) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=FIELDS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(result["rows"])
    return buf.getvalue()
