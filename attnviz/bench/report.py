"""The benchmark's targets, checked from ratios of medians measured in one run, and its markdown report."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """median(numerator) / median(denominator) at `length` ≤ `limit`; or, with no denominator,
    median(numerator) ≤ `limit` seconds."""

    label: str
    numerator: str
    denominator: str | None
    length: int
    limit: float


TARGETS = [
    Target("attnviz.run_attention (torch) vs nn.MultiheadAttention, both NumPy in/out, L=512", "attnviz-torch-api", "torch-mha-api", 512, 1.1),
    Target("attnviz.run_attention (tensorflow) vs keras MultiHeadAttention eager, both NumPy in/out, L=512", "attnviz-tf-api", "keras-mha-api", 512, 1.1),
    Target("attnviz.run_attention (torch), one call at L=8, d=32, h=4 (seconds)", "attnviz-torch-api", None, 8, 0.5e-3),
    Target("attnviz.run_attention (tensorflow) vs keras MultiHeadAttention eager, NumPy in/out, L=8", "attnviz-tf-api", "keras-mha-api", 8, 1.5),
    Target("attnviz PyTorch layer vs torch.nn.MultiheadAttention with weights, L=512", "attnviz-torch", "torch-mha-weights", 512, 1.1),
    Target("attnviz TensorFlow layer vs keras MultiHeadAttention, both eager, L=512", "attnviz-tf-eager", "keras-mha-eager", 512, 1.1),
    Target("attnviz TensorFlow vs keras MultiHeadAttention, both tf.function, L=512", "attnviz-tf-function", "keras-mha-function", 512, 1.1),
    Target("attnviz PyTorch capture=True vs fast path, L=512", "attnviz-torch-capture", "attnviz-torch", 512, 1.5),
    Target("attnviz PyTorch capture=True vs fast path, L=1024", "attnviz-torch-capture", "attnviz-torch", 1024, 1.5),
]  # fmt: skip


def median(rows: list[dict], name: str, length: int) -> float | None:
    for r in rows:
        if r["implementation"] == name and r["length"] == length and not r.get("error"):
            return r["median_s"]
    return None


def check(rows: list[dict], target: Target) -> float | None:
    """The measured value for `target` (a ratio, or seconds), None where the run lacks a row."""
    top = median(rows, target.numerator, target.length)
    if target.denominator is None:
        return top
    bottom = median(rows, target.denominator, target.length)
    return top / bottom if top and bottom else None


def to_markdown(result: dict) -> str:
    """A report: the machine, the targets checked from this run, every row."""
    meta, rows = result["meta"], result["rows"]
    ceilings = meta.get("matmul_ceiling_gflops_per_s", {})
    ends = meta.get("matmul_ceiling_start_end", {})
    lines = [
        f"Machine: {meta.get('processor') or meta.get('machine')}, {meta.get('cpu_count')} cores; device "
        f"{meta.get('device')}; threads {meta.get('threads')}; versions {meta.get('versions')}; "
        f"{meta.get('warmup')} warm-up and {meta.get('repeats')} timed calls per row.",
        "",
        f"Matmul ceiling ({meta.get('ceiling_method', '')}): "
        + ", ".join(
            f"{k} {v:.1f} GFLOP/s" + (f" (start {ends[k][0]:.1f}, end {ends[k][1]:.1f})" if k in ends else "")
            for k, v in ceilings.items()
        ),
        "",
        "| target | measured | limit | met |",
        "|---|---|---|---|",
    ]
    for t in TARGETS:
        value = check(rows, t)
        if value is None:
            continue
        shown = f"{value * 1e3:.3f} ms" if t.denominator is None else f"{value:.2f}"
        limit = f"≤ {t.limit * 1e3:g} ms" if t.denominator is None else f"≤ {t.limit}"
        lines.append(f"| {t.label} | {shown} | {limit} | {'yes' if value <= t.limit else '**no**'} |")
    lines += [
        "",
        "| implementation | L | d_model | heads | first call (ms) | median (ms) | IQR (ms) | GFLOP/s |"
        " of ceiling | weights (MiB) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        head = f"| {r['implementation']} | {r['length']} | {r['d_model']} | {r['heads']} "
        if r.get("error"):
            lines.append(head + f"| error: {r['error']} | | | | | |")
            continue
        fraction = "noisy run (above the ceiling)" if r.get("noisy") else f"{r['fraction_of_ceiling']:.0%}"
        lines.append(
            head + f"| {r['first_call_s'] * 1e3:.1f} | {r['median_s'] * 1e3:.3f} | {r['iqr_s'] * 1e3:.3f} "
            f"| {r['gflops_per_s']:.1f} | {fraction} | {r['weights_bytes'] / 2**20:.2f} |"
        )
    return "\n".join(lines) + "\n"
