"""Timing harness: attnviz against each framework's own attention, honestly measured.

Usable as a library (`run_sweep`) and as a command:

    python -m attnviz.bench --quick --json out.json --csv out.csv

Method: every implementation is built once; its first call (tracing,
compilation, lazy init) is timed on its own; then warm-up calls, then
`repeats` timed calls, each ending with the device synchronised. Reported:
median and inter-quartile range of the timed calls. Thread counts are set
once, the same in both frameworks, and stored with every row, as are the
framework versions and the device name. Each row also carries the counted
FLOPs (projections + QKᵀ + A·V), the achieved GFLOP/s, the fraction of a
matmul ceiling measured in the same run (a large matmul in the same
framework on the same device), and the bytes of the attention weights.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from attnviz.frameworks import FRAMEWORKS, backend, is_installed
from attnviz.params import init_params, make_inputs
from attnviz.result import Recorder
from attnviz.spec import AttentionSpec

# name → (framework, what it times)
IMPLEMENTATIONS = {
    "attnviz-torch": ("torch", "attnviz PyTorch fast path (capture=False), returns per-head weights"),
    "attnviz-torch-capture": ("torch", "attnviz PyTorch, every step recorded and copied to NumPy"),
    "torch-sdpa": ("torch", "projections + F.scaled_dot_product_attention + output projection (no weights)"),
    "torch-mha": ("torch", "torch.nn.MultiheadAttention, need_weights=False"),
    "torch-mha-weights": ("torch", "torch.nn.MultiheadAttention, per-head weights returned"),
    "attnviz-tf-eager": ("tensorflow", "attnviz TensorFlow, eager, returns per-head weights"),
    "attnviz-tf-function": ("tensorflow", "attnviz TensorFlow inside tf.function"),
    "attnviz-tf-xla": ("tensorflow", "attnviz TensorFlow inside tf.function(jit_compile=True)"),
    "keras-mha-eager": ("tensorflow", "keras.layers.MultiHeadAttention, eager, scores returned"),
    "keras-mha-function": (
        "tensorflow",
        "keras.layers.MultiHeadAttention inside tf.function, scores returned",
    ),
}
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


# -- thread counts -------------------------------------------------------------------


def set_threads(threads: int, frameworks: Iterable[str]) -> int:
    """The same intra-op thread count in every framework; set once, before any op runs."""
    for fw in frameworks:
        mod = backend(fw)
        if fw == "torch":
            mod.torch.set_num_threads(threads)
        else:
            try:
                mod.tf.config.threading.set_intra_op_parallelism_threads(threads)
                mod.tf.config.threading.set_inter_op_parallelism_threads(1)
            except RuntimeError:  # TensorFlow already initialised in this process
                pass
    return threads


def thread_counts(frameworks: Iterable[str]) -> dict[str, int]:
    out = {}
    for fw in frameworks:
        mod = backend(fw)
        if fw == "torch":
            out[fw] = mod.torch.get_num_threads()
        else:
            out[fw] = mod.tf.config.threading.get_intra_op_parallelism_threads() or os.cpu_count()
    return out


# -- builders: each returns a zero-argument callable whose result is synchronised ------------


def _torch_case(case: Case, device: str):
    tb = backend("torch")
    torch = tb.torch
    dev = tb.resolve_device(device)
    spec = case.spec()
    params, (x, _) = init_params(spec), make_inputs(spec)
    tx = torch.from_numpy(x).to(dev)
    mask = (
        None if case.mask == "none" else torch.from_numpy(np.tril(np.ones((case.length,) * 2, bool))).to(dev)
    )
    return tb, torch, dev, spec, params, tx, mask


def _torch_sync(torch, dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def build_torch(name: str, case: Case, device: str) -> tuple[Callable[[], object], str]:
    tb, torch, dev, spec, params, tx, mask = _torch_case(case, device)
    bmask = None if mask is None else mask.expand(case.batch, -1, -1)
    if name in ("attnviz-torch", "attnviz-torch-capture"):
        layer = tb.MultiHeadAttention.from_spec(spec, dev).load_params(params).eval()
        capture = name.endswith("capture")

        def call():
            record = Recorder(capture, tb._to_numpy)
            with torch.inference_mode():
                out = layer(tx, tx, bmask, record=record)
            _torch_sync(torch, dev)
            return record.steps if capture else out

    elif name == "torch-sdpa":
        layer = tb.MultiHeadAttention.from_spec(spec, dev).load_params(params).eval()
        B, L, H, dk = case.batch, case.length, case.heads, spec.d_k
        F = torch.nn.functional

        def call():
            with torch.inference_mode():
                q, k, v = (
                    m(tx).view(B, L, H, dk).transpose(1, 2) for m in (layer.query, layer.key, layer.value)
                )
                ctx = F.scaled_dot_product_attention(q, k, v, is_causal=mask is not None)
                out = layer.output_proj(ctx.transpose(1, 2).reshape(B, L, H * dk))
            _torch_sync(torch, dev)
            return out

    else:  # torch.nn.MultiheadAttention
        mha = torch.nn.MultiheadAttention(
            case.d_model, case.heads, batch_first=True, dtype=getattr(torch, case.dtype), device=dev
        ).eval()
        need = name == "torch-mha-weights"
        blocked = None if mask is None else ~mask

        def call():
            with torch.inference_mode():
                out = mha(tx, tx, tx, need_weights=need, average_attn_weights=False, attn_mask=blocked)
            _torch_sync(torch, dev)
            return out

    return call, str(dev)


def build_tf(name: str, case: Case, device: str) -> tuple[Callable[[], object], str]:
    tb = backend("tensorflow")
    tf, keras = tb.tf, tb.keras
    dev = tb.resolve_device(device)
    spec = case.spec()
    with tf.device(dev):
        x = tf.constant(make_inputs(spec)[0])
        mask = None
        if case.mask != "none":
            mask = tf.constant(
                np.broadcast_to(
                    np.tril(np.ones((case.length,) * 2, bool)), (case.batch, case.length, case.length)
                )
            )
        if name.startswith("attnviz"):
            layer = tb.MultiHeadAttention.from_spec(spec).load_params(init_params(spec))
            fn = lambda: layer(x, x, attention_mask=mask)  # noqa: E731
        else:
            mha = keras.layers.MultiHeadAttention(num_heads=case.heads, key_dim=spec.d_k, dtype=case.dtype)
            fn = lambda: mha(x, x, attention_mask=mask, return_attention_scores=True)  # noqa: E731
            fn()  # build the layer's variables outside any tf.function
        if name.endswith("function"):
            fn = tf.function(fn)
        elif name.endswith("xla"):
            fn = tf.function(fn, jit_compile=True)

    def call():
        with tf.device(dev):
            out, weights = fn()
        return out.numpy(), weights.numpy()  # waits for the device

    return call, dev


def matmul_ceiling(framework: str, device: str, dtype: str, size: int = 2048, repeats: int = 5) -> float:
    """GFLOP/s of a `size`² × `size`² matmul in `framework` on `device` (median of repeats)."""
    x = np.random.default_rng(0).standard_normal((size, size)).astype(dtype)
    if framework == "torch":
        tb = backend("torch")
        dev = tb.resolve_device(device)
        a = tb.torch.from_numpy(x).to(dev)

        def call():
            out = a @ a
            _torch_sync(tb.torch, dev)
            return out

    else:
        tb = backend("tensorflow")
        with tb.tf.device(tb.resolve_device(device)):
            a = tb.tf.constant(x)

        def call():
            return tb.tf.matmul(a, a).numpy()

    _, samples = time_calls(call, warmup=2, repeats=repeats)
    return 2 * size**3 / statistics.median(samples) / 1e9


def time_calls(call: Callable[[], object], warmup: int, repeats: int) -> tuple[float, list[float]]:
    """The first call's time, then `repeats` timed calls after `warmup` untimed ones."""
    start = time.perf_counter()
    call()
    first = time.perf_counter() - start
    for _ in range(warmup):
        call()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return first, samples


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
    out = {"python": platform.python_version(), "numpy": np.__version__}
    for fw in FRAMEWORKS:
        if is_installed(fw):
            mod = backend(fw)
            out[fw] = (mod.torch if fw == "torch" else mod.tf).__version__
    return out


def measure(name: str, case: Case, device: str, warmup: int, repeats: int, ceiling: float) -> dict:
    """One row: the timing of implementation `name` on `case`."""
    framework = IMPLEMENTATIONS[name][0]
    spec = case.spec()
    row = {
        "implementation": name,
        "framework": framework,
        "device": device,
        **dataclasses.asdict(case),
        "flops": count_flops(spec),
        "weights_bytes": weights_bytes(spec),
        "repeats": repeats,
        "ceiling_gflops_per_s": ceiling,
        "error": "",
    }
    try:
        call, device_name = (build_torch if framework == "torch" else build_tf)(name, case, device)
        first, samples = time_calls(call, warmup, repeats)
    except Exception as error:  # a kernel that does not support this case: reported, not fatal
        return {**row, "error": f"{type(error).__name__}: {str(error)[:200]}"}
    p25, median, p75 = np.percentile(samples, [25, 50, 75])
    gflops = row["flops"] / median / 1e9
    return {
        **row,
        "device_name": device_name,
        "first_call_s": first,
        "median_s": float(median),
        "p25_s": float(p25),
        "p75_s": float(p75),
        "iqr_s": float(p75 - p25),
        "gflops_per_s": gflops,
        "fraction_of_ceiling": gflops / ceiling,
    }


def iter_sweep(
    cases: Iterable[Case],
    implementations: Iterable[str] = tuple(IMPLEMENTATIONS),
    device: str = "cpu",
    *,
    warmup: int = 2,
    repeats: int = 7,
    threads: int | None = None,
) -> Iterator[tuple[dict, dict | None, int, int]]:
    """Like `run_sweep`, one row at a time: yields `(meta, row, done, total)`.

    The first item has `row=None` (set-up done, nothing timed yet), so a
    caller can show progress and keep partial results if it stops early.
    """
    cases, implementations = list(cases), list(implementations)
    unknown = set(implementations) - set(IMPLEMENTATIONS)
    if unknown:
        raise ValueError(f"implementations: got {sorted(unknown)}; allowed: {sorted(IMPLEMENTATIONS)}.")
    implementations = [i for i in implementations if is_installed(IMPLEMENTATIONS[i][0])]
    frameworks = sorted({IMPLEMENTATIONS[i][0] for i in implementations})
    set_threads(threads or os.cpu_count() or 1, frameworks)
    dtypes = sorted({c.dtype for c in cases})
    ceilings = {(fw, dt): matmul_ceiling(fw, device, dt) for fw in frameworks for dt in dtypes}
    meta = {
        "versions": versions(),
        "threads": thread_counts(frameworks),
        "device": device,
        "machine": platform.machine(),
        "processor": cpu_name(),
        "cpu_count": os.cpu_count(),
        "warmup": warmup,
        "repeats": repeats,
        "matmul_ceiling_gflops_per_s": {f"{fw}/{dt}": v for (fw, dt), v in ceilings.items()},
    }
    total = len(cases) * len(implementations)
    yield meta, None, 0, total
    done = 0
    for case in cases:
        for name in implementations:
            fw = IMPLEMENTATIONS[name][0]
            row = measure(name, case, device, warmup, repeats, ceilings[(fw, case.dtype)])
            done += 1
            yield meta, {**row, "threads": meta["threads"][fw], "version": meta["versions"][fw]}, done, total


def run_sweep(
    cases: Iterable[Case],
    implementations: Iterable[str] = tuple(IMPLEMENTATIONS),
    device: str = "cpu",
    *,
    warmup: int = 2,
    repeats: int = 7,
    threads: int | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> dict:
    """Time every implementation on every case.

    Returns:
        `{"meta": {versions, threads, device, matmul ceilings, ...}, "rows": [one dict per
        implementation × case, with the fields in FIELDS]}`.
    """
    sweep = iter_sweep(cases, implementations, device, warmup=warmup, repeats=repeats, threads=threads)
    meta, _, _, total = next(sweep)
    rows = []
    for _, row, done, total in sweep:
        rows.append(row)
        if progress:
            progress(done, total, f"{row['implementation']} · length {row['length']}")
    return {"meta": meta, "rows": rows}


def to_csv(result: dict) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=FIELDS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(result["rows"])
    return buf.getvalue()


def ratio(rows: list[dict], a: str, b: str, length: int) -> float | None:
    """median(a) / median(b) at `length`, from rows of one run."""
    by = {(r["implementation"], r["length"]): r.get("median_s") for r in rows}
    ta, tb = by.get((a, length)), by.get((b, length))
    return ta / tb if ta and tb else None


TARGETS = [
    # (label, numerator, denominator, length, limit): median(numerator) / median(denominator) ≤ limit
    (
        "attnviz PyTorch fast path vs torch.nn.MultiheadAttention with weights, len 512",
        "attnviz-torch",
        "torch-mha-weights",
        512,
        1.1,
    ),
    (
        "attnviz TensorFlow vs keras MultiHeadAttention, both eager, len 512",
        "attnviz-tf-eager",
        "keras-mha-eager",
        512,
        1.1,
    ),
    (
        "attnviz TensorFlow vs keras MultiHeadAttention, both tf.function, len 512",
        "attnviz-tf-function",
        "keras-mha-function",
        512,
        1.1,
    ),
    (
        "attnviz PyTorch capture=True vs fast path, len 512",
        "attnviz-torch-capture",
        "attnviz-torch",
        512,
        1.5,
    ),
    (
        "attnviz PyTorch capture=True vs fast path, len 1024",
        "attnviz-torch-capture",
        "attnviz-torch",
        1024,
        1.5,
    ),
]


def to_markdown(result: dict) -> str:
    """A report: the machine, the targets checked from this run's ratios, every row."""
    meta, rows = result["meta"], result["rows"]
    lines = [
        f"Machine: {meta.get('processor') or meta.get('machine')}, {meta.get('cpu_count')} cores; device "
        f"{meta.get('device')}; threads {meta.get('threads')}; versions {meta.get('versions')}; "
        f"{meta.get('warmup')} warm-up and {meta.get('repeats')} timed calls per row.",
        "",
        "Matmul ceiling (2048 × 2048 @ 2048 × 2048, same run): "
        + ", ".join(f"{k} {v:.1f} GFLOP/s" for k, v in meta.get("matmul_ceiling_gflops_per_s", {}).items()),
        "",
        "| target | ratio of medians | limit | met |",
        "|---|---|---|---|",
    ]
    for label, a, b, length, limit in TARGETS:
        r = ratio(rows, a, b, length)
        if r is not None:
            lines.append(f"| {label} | {r:.2f} | ≤ {limit} | {'yes' if r <= limit else '**no**'} |")
    for name in ("attnviz-torch", "attnviz-tf-function"):
        at = [x for x in rows if x["implementation"] == name and x["length"] == 1024 and not x["error"]]
        if at:
            f = at[0]["fraction_of_ceiling"]
            lines.append(
                f"| {name} at len 1024: fraction of the matmul ceiling | {f:.0%} | ≥ 50% | "
                f"{'yes' if f >= 0.5 else '**no**'} |"
            )
    lines += [
        "",
        "| implementation | length | first call (ms) | median (ms) | IQR (ms) | GFLOP/s | of ceiling |"
        " weights (MiB) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["error"]:
            lines.append(f"| {r['implementation']} | {r['length']} | error: {r['error']} | | | | | |")
            continue
        lines.append(
            f"| {r['implementation']} | {r['length']} | {r['first_call_s'] * 1e3:.1f} | {r['median_s'] * 1e3:.2f} "
            f"| {r['iqr_s'] * 1e3:.2f} | {r['gflops_per_s']:.1f} | {r['fraction_of_ceiling']:.0%} "
            f"| {r['weights_bytes'] / 2**20:.1f} |"
        )
    return "\n".join(lines) + "\n"


# -- command line ------------------------------------------------------------------------------


QUICK = {"lengths": [32, 128], "d_model": 128, "heads": 4, "repeats": 5, "warmup": 1}


def _ints(text: str) -> list[int]:
    return [int(t) for t in text.split(",") if t]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m attnviz.bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--quick", action="store_true", help="a small sweep that finishes in well under a minute"
    )
    parser.add_argument("--impl", default=",".join(IMPLEMENTATIONS), help="comma-separated; default: all")
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
    args = parser.parse_args(argv)
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key.replace("-", "_"), value)
    cases = [Case(args.batch, n, args.heads, args.d_model, args.dtype, args.mask) for n in args.lengths]
    result = run_sweep(
        cases,
        args.impl.split(","),
        args.device,
        warmup=args.warmup,
        repeats=args.repeats,
        threads=args.threads,
        progress=lambda i, n, label: print(f"[{i}/{n}] {label}", file=sys.stderr),
    )
    outputs = (
        (json.dumps(result, indent=2), args.json),
        (to_csv(result), args.csv),
        (to_markdown(result), args.markdown),
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
