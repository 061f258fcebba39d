"""Exact patching in seconds and attribution patching (issue 30 §1–2): SmolLM2, written to docs/interp.md.

Measures, per framework with `--threads` intra-op threads (the app's default, 1), on
SmolLM2-135M-Instruct (the packaged GGUF; 30 layers × 9 heads = 270) and a 15-token
indirect-object pair, in wall and CPU seconds:
- the batched sweep (`patching.sweep`, median and best of `--repeats`);
- the definition it replaces, one full patched run per head, on the first `--per-head-layers`
  layers (extrapolated to 270 heads; the whole of it takes minutes on a busy machine), and the
  largest difference between the two on those heads (in logits, as tests/interp/test_interp_fast.py);
- attribution patching (`interp.attribution`) and its agreement with the sweep (Spearman's ρ,
  top-10 overlap).
The section between the markers in `--out` is replaced; the rest of the file is kept.

Usage: python benchmarks/patching_bench.py [--frameworks torch tensorflow] [--out docs/interp.md]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1]))

from attnviz import frameworks, pretrained
from attnviz.interp import agreement, attribution, direct_logit_attribution, patching
from benchmarks.doc_section import write_section

CLEAN = "When Mary and John went to the big store, John gave a drink to"
CORRUPTED = "When Mary and John went to the big store, Mary gave a drink to"
ANSWER, WRONG = " Mary", " John"
BEGIN, END = "<!-- patching_bench -->", "<!-- /patching_bench -->"


def timed(fn, repeats: int = 1) -> tuple[dict, object]:
    """`fn()` run `repeats` times: wall seconds (median and best) and CPU seconds (median, every
    thread of this process: on a shared machine the work's own cost, which others' load inflates
    less than the wall clock), and the last value."""
    wall, cpu, value = [], [], None
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        value = fn()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return {"wall": statistics.median(wall), "best": min(wall), "cpu": statistics.median(cpu)}, value


def per_head(ckpt, fw: str, layers: int) -> np.ndarray:
    """`(layers, H)` by the definition: one full `run_ids(corrupted, patch=…)` per head."""
    a, w, clean_ids, corrupted_ids = patching.check_prompts(ckpt, CLEAN, CORRUPTED, ANSWER, WRONG)
    base = ckpt.run_ids(clean_ids, fw, head_outputs=True)
    worse = patching.logit_diff(ckpt.run_ids(corrupted_ids, fw).logits, a, w)
    gap = patching.logit_diff(base.logits, a, w) - worse
    H = base.head_outputs.shape[1]
    out = np.zeros((layers, H))
    for layer in range(layers):
        for head in range(H):
            patched = ckpt.run_ids(corrupted_ids, fw, patch={(layer, head): base.head_outputs[layer, head]})
            out[layer, head] = (patching.logit_diff(patched.logits, a, w) - worse) / gap
    return out


def measure(smol, fw: str, repeats: int, layers: int) -> dict:
    smol.run("warm up", fw)
    t_sweep, sweep = timed(lambda: patching.sweep(smol, CLEAN, CORRUPTED, ANSWER, WRONG, fw), repeats)
    t_attr, estimate = timed(lambda: attribution(smol, CLEAN, CORRUPTED, ANSWER, WRONG, fw), repeats)
    t_old, old = timed(lambda: per_head(smol, fw, layers), 1)
    L, H = sweep.restored.shape
    t_old = {k: v * L / layers for k, v in t_old.items()}  # extrapolated to every layer
    # in logits, as tests/interp/test_interp_fast.py: the change of the logit difference each patch causes,
    # fast vs per head, over the largest logit (the fractions of the first layers are small)
    scale = np.abs(smol.run(CORRUPTED, fw).logits[-1]).max()
    err = np.abs(sweep.restored[:layers] - old).max() * abs(sweep.clean_diff - sweep.corrupted_diff) / scale
    return {
        "fw": fw,
        "threads": frameworks.backend(fw).get_threads(),
        "sweep": t_sweep,
        "attr": t_attr,
        "old": t_old,
        "old_heads": layers * H,
        "err": err,
        "result": sweep,
        "agree": agreement(sweep.restored, estimate.restored),
    }


def section(rows: list[dict], T: int, start: int, direct: np.ndarray, load: tuple[float, float]) -> list[str]:
    lines = [
        "## Exact patching in seconds, attribution patching beside it (issue 30 §1–2)",
        "",
        f"Made by `python benchmarks/patching_bench.py` on SmolLM2-135M-Instruct (270 heads), the pair "
        f"{CLEAN!r} / John → Mary as the giver ({T} tokens), answer {ANSWER!r}, wrong {WRONG!r}; "
        f"{os.cpu_count()} cores, load average {load[0]:.1f} before and {load[1]:.1f} after (the machine "
        "is shared with other work: every figure is inflated by it). Targets: sweep ≤ 5 s PyTorch, "
        "≤ 2.5 × that TensorFlow; attribution ≤ 1 s PyTorch.",
        "",
        "Wall seconds as median (best) of the repeats; CPU seconds summed over the process's threads.",
        "",
        "| framework | threads | batched sweep: wall (best) / CPU s | one run per head, extrapolated: "
        "wall / CPU s | speed-up (CPU) | largest difference (of the largest logit) | attribution: wall (best) / CPU s | "
        "Spearman ρ | top-10 overlap |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['fw']} | {r['threads']} | {_t(r['sweep'])} | {r['old']['wall']:.1f} / {r['old']['cpu']:.1f} "
        f"(from {r['old_heads']} heads) | {r['old']['cpu'] / r['sweep']['cpu']:.1f}× | {r['err']:.1e} | "
        f"{_t(r['attr'])} | {r['agree'].rho:.2f} | {r['agree'].overlap}/{r['agree'].k} |"
        for r in rows
    ]
    worst, clean_diff = rows[0]["agree"].disagree, rows[0]["result"].clean_diff
    lines += [
        "",
        "How: every patched run equals the corrupted run up to the patched layer, so the sweep starts each "
        "layer's runs there from the corrupted run's stored residual stream (half the layers on average), "
        "and at every position before the first token where the prompts differ (causal attention), so it "
        f"computes only the {T - start} positions from there on, over that prefix's cached keys and "
        "values; it runs the layer's 9 heads as one batch (30 batched passes instead of 270 single "
        "ones), keeps no attention weights and reads only the answer's and the wrong token's logits at "
        "the last position. Attribution is one clean forward, one corrupted forward and one backward.",
        "",
        f"Where the estimate misses most ({rows[0]['fw']}; exact, estimate, and the head's direct "
        "share of the clean difference, `direct_logit_attribution`): "
        + ", ".join(f"L{a}.H{b} {x:.2f}, {y:.2f}, {direct[a, b] / clean_diff:.2f}" for a, b, x, y in worst)
        + ". The estimate is linear in each head's output; a head that acts through later layers (its "
        "patch restores more than it writes directly) changes where later heads attend, through their "
        "softmax, which a first-order estimate follows only for small changes: near-saturated patterns "
        "move more than their gradient says (AtP*, Kramár et al. 2024).",
    ]
    return lines


def _t(t: dict) -> str:
    return f"{t['wall']:.2f} ({t['best']:.2f}) / {t['cpu']:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", nargs="+", default=["torch", "tensorflow"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--per-head-layers", type=int, default=2)
    parser.add_argument("--out", default="docs/interp.md")
    parser.add_argument(
        "--threads", type=int, default=1, help="intra-op threads per framework (the app's ATTNVIZ_THREADS: 1)"
    )
    args = parser.parse_args()
    for fw in args.frameworks:  # before any operation: TensorFlow fixes its pools at its first
        frameworks.backend(fw).set_threads(args.threads)
    before = os.getloadavg()
    smol = pretrained.load_choice("SmolLM2-135M-Instruct")
    rows = [measure(smol, fw, args.repeats, args.per_head_layers) for fw in args.frameworks]
    for r in rows:
        print({k: v for k, v in r.items() if k != "result"})
    clean_ids, corrupted_ids = smol.encode(CLEAN)[0], smol.encode(CORRUPTED)[0]
    start = patching.shared_prefix(clean_ids, corrupted_ids)
    direct = direct_logit_attribution(smol, CLEAN, ANSWER, WRONG, args.frameworks[0])  # (L, H)
    new = "\n".join(section(rows, len(clean_ids), start, direct, (before[0], os.getloadavg()[0])))
    write_section(args.out, new, BEGIN, END)


if __name__ == "__main__":
    main()
