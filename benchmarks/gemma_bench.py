"""Measure Gemma 3 270M through attnviz (issue 31 §3) and write the figures into docs/gemma.md.

    nice -n 5 python benchmarks/gemma_bench.py          # ~10–20 minutes on a loaded 2-core machine
    python benchmarks/gemma_bench.py --repeats 3 --quick

What is timed, in this one process, with the machine's load average and `uptime` before and after:
- first load: the GGUF converted into a fresh cache folder (dequantise Q4_K/Q5_0/Q6_K/Q8_0, write
  ~1 GB of float32); warm load: `pretrained.load` of the converted folder (checkpoint cache emptied);
- a forward pass over 32 tokens returning every layer's attention: attnviz PyTorch and TensorFlow
  against transformers' eager `Gemma3ForCausalLM` loaded by transformers itself from the same GGUF
  (`from_pretrained(dir, gguf_file=…, attn_implementation="eager")`), interleaved, median of
  `--repeats`;
- 20 greedy new tokens: attnviz's `generate` (KV cache; then one full pass with every attention,
  which the page draws) in both frameworks against transformers' eager `generate`, interleaved,
  median of `--gen-repeats`; the tokens compared;
- time per token against position, cached vs uncached (`attnviz.kernels.decoding.time_per_token`),
  unless `--quick`;
- in a fresh process (`--memory`): the resident memory with both frameworks imported, then with
  SmolLM2 and Gemma loaded, then with each one's PyTorch and TensorFlow models built, against the
  checkpoint cache's bound (`ATTNVIZ_CHECKPOINT_CACHE_MB`, docs/security.md).

PyTorch (attnviz and transformers) and TensorFlow run on `--threads` intra-op threads, as the app
does (`ATTNVIZ_THREADS`). CPU time (this process, all threads) is recorded beside wall time: on a
shared machine the wall time includes waiting for a core, the CPU time does not.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.doc_section import write_section  # noqa: E402
from benchmarks.llama_bench import machine, timed, uptime  # noqa: E402

DOC = ROOT / "docs" / "gemma.md"
RESULTS = ROOT / "test-artifacts" / "gemma-bench.json"
START, END = "<!-- gemma_bench:start -->", "<!-- gemma_bench:end -->"
NAME, SMOLLM2 = "gemma-3-270m", "SmolLM2-135M-Instruct"
TEXT = (
    "Attention lets every token look at the tokens before it. Gemma reads a window of 512 tokens in five "
    "of every six layers, and all of them in the sixth, with one key and value head for four queries."
)
PROMPT = "The three most important ideas in a transformer are"
NEW_TOKENS = 20
TARGETS = {"torch": 1.3, "tensorflow": 2.5}  # a 32-token forward, and 20 cached new tokens


def measure(repeats: int, threads: int, gen_repeats: int, curves: bool) -> dict:
    import torch
    import transformers

    from attnviz import pretrained
    from attnviz.frameworks import backend
    from attnviz.kernels.decoding import time_per_token
    from attnviz.kernels.kv_cache import kv_bytes
    from attnviz.pretrained import gguf

    for framework in ("torch", "tensorflow"):  # as the app does (ATTNVIZ_THREADS), before either runs
        backend(framework).set_threads(threads)
    out = {"load_before": os.getloadavg(), "uptime_before": uptime(), "threads": threads}
    source = pretrained.local_checkpoints()[NAME]
    with tempfile.TemporaryDirectory() as cache:
        os.environ[gguf.ENV_CACHE_DIR] = cache
        cpu = []
        out["first_load_s"] = timed(lambda: gguf.converted(source), cpu)
        pretrained.CACHE.clear()
        out["warm_load_s"] = timed(lambda: pretrained.load(source), cpu)
        out["first_load_cpu_s"], out["warm_load_cpu_s"] = cpu
        checkpoint = pretrained.load(source)
        out["checkpoint_mb"] = checkpoint.nbytes / 2**20
        loaded, hf_cpu = [], []

        def transformers_load():  # transformers' own GGUF reading and dequantisation
            loaded.append(
                transformers.Gemma3ForCausalLM.from_pretrained(
                    str(source.parent), gguf_file=source.name, attn_implementation="eager"
                ).eval()
            )

        out["transformers_load_s"] = timed(transformers_load, hf_cpu)
        out["transformers_load_cpu_s"], hf = hf_cpu[0], loaded[0]
        ids = checkpoint.encode(TEXT)[0][:32]
        assert len(ids) == 32, "the text must give at least 32 tokens"
        for framework in ("torch", "tensorflow"):
            out[f"build_{framework}_s"] = timed(lambda fw=framework: checkpoint.run_ids(ids, fw))

        def transformers_forward():
            with torch.inference_mode():
                hf(torch.tensor([ids]), output_attentions=True)

        runs = {"transformers": [], "torch": [], "tensorflow": []}
        cpu = {name: [] for name in runs}
        for _ in range(repeats):  # interleaved, so a burst of load hits all three alike
            runs["transformers"].append(timed(transformers_forward, cpu["transformers"]))
            for fw in ("torch", "tensorflow"):
                runs[fw].append(timed(lambda fw=fw: checkpoint.run_ids(ids, fw), cpu[fw]))
        out["forward_s"] = {k: statistics.median(v) for k, v in runs.items()}
        out["forward_cpu_s"] = {k: statistics.median(v) for k, v in cpu.items()}
        out["forward_all_s"] = runs
        out["tokens"] = len(ids)
        out.update(generation(checkpoint, hf, gen_repeats))
        out["cache_bytes_expected"] = kv_bytes(checkpoint.config, out["prompt_tokens"] + NEW_TOKENS - 1)
        if curves:
            out["curves"] = {}
            for fw in ("torch", "tensorflow"):
                t = time_per_token(checkpoint, PROMPT, fw, new_tokens=16, repeats=3)
                out["curves"][fw] = {
                    "positions": t.positions.tolist(),
                    "cached": t.cached.tolist(),
                    "uncached": t.uncached.tolist(),
                    "prompt": t.prompt,
                }
    out["load_after"] = os.getloadavg()
    out["uptime_after"] = uptime()
    out["machine"] = machine(threads)
    out["date"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return out


def generation(checkpoint, hf, gen_repeats: int) -> dict:
    """20 greedy tokens after `PROMPT`, interleaved: transformers' eager `generate` and attnviz's in
    both frameworks (cached), median of `gen_repeats`; the tokens compared."""
    import torch

    prompt_ids = checkpoint.encode(PROMPT)[0]
    made = {}

    def transformers_generate():
        with torch.inference_mode():
            made["transformers"] = hf.generate(
                torch.tensor([prompt_ids]), max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=None
            )[0].tolist()

    def attnviz_generate(framework: str):
        made[framework] = checkpoint.generate(PROMPT, framework, NEW_TOKENS, temperature=0)

    for framework in ("torch", "tensorflow"):  # warm: each framework's first cached step (TF traces)
        checkpoint.generate(PROMPT, framework, 2, temperature=0)
    transformers_generate()
    wall = {"transformers": [], "torch": [], "tensorflow": []}
    cpu = {name: [] for name in wall}
    for _ in range(gen_repeats):
        wall["transformers"].append(timed(transformers_generate, cpu["transformers"]))
        for fw in ("torch", "tensorflow"):
            wall[fw].append(timed(lambda fw=fw: attnviz_generate(fw), cpu[fw]))
    expected = made.pop("transformers")
    final_cpu = []
    for fw in ("torch", "tensorflow"):  # the full pass over the final text that `generate` ends with
        timed(lambda fw=fw: checkpoint.run_ids(expected, fw), final_cpu)
    return {
        "generate_s": {k: statistics.median(v) for k, v in wall.items()},
        "generate_cpu_s": {k: statistics.median(v) for k, v in cpu.items()},
        "generate_all_s": wall,
        "generated_same": {fw: g.output.ids == expected for fw, g in made.items()},
        "generated_text": checkpoint.tokenizer.decode(made["torch"].new_ids),
        "cache_bytes": made["torch"].cache_bytes,
        "final_run_cpu_s": dict(zip(("torch", "tensorflow"), final_cpu, strict=True)),
        "prompt_tokens": len(prompt_ids),
    }


def rss_mib() -> float:
    """This process's resident memory now (`VmRSS`), MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def memory(threads: int) -> dict:
    """Run in a fresh process: resident memory as a server holding both models would."""
    import ctypes

    from attnviz import pretrained
    from attnviz.cache import env_number
    from attnviz.frameworks import backend

    trim = ctypes.CDLL("libc.so.6").malloc_trim  # as the app does after a run: freed pages go back
    for framework in ("torch", "tensorflow"):
        backend(framework).set_threads(threads)
    out = {"frameworks_imported": rss_mib()}
    checkpoints = {}
    for name in (SMOLLM2, NAME):
        checkpoints[name] = pretrained.load_choice(name)
        trim(0)
        out[f"loaded {name}"] = rss_mib()
    for framework in ("torch", "tensorflow"):
        for name, ckpt in checkpoints.items():
            ckpt.run("The cat sat on the mat.", framework)
            trim(0)
            out[f"{framework} model {name}"] = rss_mib()
    out["weights_mib"] = {name: c.nbytes / 2**20 for name, c in checkpoints.items()}
    out["cached"] = pretrained.CACHE.keys()
    out["bound_mib"] = env_number(pretrained.ENV_CACHE_MB, pretrained.CACHE_MB, minimum=0)
    return out


def table(r: dict) -> str:
    f, fc, g, gc = r["forward_s"], r["forward_cpu_s"], r["generate_s"], r["generate_cpu_s"]
    load = lambda values: " / ".join(f"{v:.1f}" for v in values)  # noqa: E731
    lines = [
        f"Measured {r['date']} on {r['machine']}.",
        f"Load average (1 / 5 / 15 min) before: {load(r['load_before'])}, after: {load(r['load_after'])}. The "
        "machine is shared with other work: wall times include waiting for a core; CPU times (this process, "
        f"all threads) do not. Forward: median of {len(r['forward_all_s']['torch'])}, generation: median of "
        f"{len(r['generate_all_s']['torch'])}, each interleaved.",
        "",
        "| what | wall | CPU | ratio to transformers (wall / CPU) | target |",
        "|---|---|---|---|---|",
        f"| first load: GGUF → safetensors cache ({r['checkpoint_mb']:.0f} MiB float32) | {r['first_load_s']:.1f} s "
        f"| {r['first_load_cpu_s']:.1f} s | | |",
        f"| warm load: `pretrained.load`, cache already converted | {r['warm_load_s']:.1f} s "
        f"| {r['warm_load_cpu_s']:.1f} s | | |",
        f"| transformers' own GGUF load (for reference) | {r['transformers_load_s']:.1f} s "
        f"| {r['transformers_load_cpu_s']:.1f} s | | |",
        f"| first PyTorch run (model built) | {r['build_torch_s']:.1f} s | | | |",
        f"| first TensorFlow run (model built) | {r['build_tensorflow_s']:.1f} s | | | |",
        f"| forward, {r['tokens']} tokens, all attentions: transformers eager `Gemma3ForCausalLM` "
        f"| {f['transformers'] * 1e3:.0f} ms | {fc['transformers'] * 1e3:.0f} ms | 1 / 1 | |",
    ]
    for fw, label in (("torch", "attnviz PyTorch"), ("tensorflow", "attnviz TensorFlow")):
        lines.append(_row(f"forward, {r['tokens']} tokens, all attentions: {label}", f[fw] * 1e3, fc[fw] * 1e3,
                          f["transformers"] * 1e3, fc["transformers"] * 1e3, TARGETS[fw], "ms"))  # fmt: skip
    p = r["prompt_tokens"]
    lines.append(f"| {NEW_TOKENS} new tokens after a {p}-token prompt: transformers eager `generate` (KV cache) "
                 f"| {g['transformers']:.2f} s | {gc['transformers']:.2f} s | 1 / 1 | |")  # fmt: skip
    for fw, label in (("torch", "attnviz PyTorch"), ("tensorflow", "attnviz TensorFlow")):
        what = (f"{NEW_TOKENS} new tokens: {label} `generate` (KV cache; then one full pass with every attention "
                f"for the page, {r['final_run_cpu_s'][fw]:.2f} s CPU of it)")  # fmt: skip
        lines.append(_row(what, g[fw], gc[fw], g["transformers"], gc["transformers"], TARGETS[fw], "s"))
    lines += [
        "",
        f"Greedy tokens identical to transformers': {r['generated_same']}. The continuation of “{PROMPT}”: "
        f"“{r['generated_text'].strip()}”. The KV cache at the end held {r['cache_bytes'] / 2**10:.0f} KiB "
        f"(`kv_bytes` says {r['cache_bytes_expected'] / 2**10:.0f} KiB: 18 layers × K and V × 1 K/V head × 256 × "
        f"float32 per position, local layers capped at 512 positions). `uptime` before: `{r['uptime_before']}`; "
        f"after: `{r['uptime_after']}`.",
    ]
    if "curves" in r:
        lines += ["", *curve_table(r["curves"])]
    if "memory" in r:
        lines += ["", *memory_table(r["memory"])]
    return "\n".join(lines)


def _row(what: str, value: float, cpu: float, base: float, base_cpu: float, target: float, unit: str) -> str:
    wall_ratio, cpu_ratio = value / base, cpu / base_cpu
    verdict = (
        "met"
        if max(wall_ratio, cpu_ratio) <= target
        else "met in CPU time"
        if cpu_ratio <= target
        else "not met"
    )
    digits = 0 if unit == "ms" else 2
    return (f"| {what} | {value:.{digits}f} {unit} | {cpu:.{digits}f} {unit} | {wall_ratio:.2f}× / {cpu_ratio:.2f}× "
            f"| ≤ {target}× ({verdict}) |")  # fmt: skip


def curve_table(curves: dict) -> list[str]:
    """Time per token at the first, middle and last position, cached vs uncached (wall, median of 3)."""
    lines = [
        "Time per new token against position (`kernels.decoding.time_per_token`, greedy after the prompt, "
        "wall, median of 3, interleaved): one cached step against one full pass over every position so far.",
        "",
        "| framework | position | cached step | full pass (no cache) | ratio |",
        "|---|---|---|---|---|",
    ]
    for fw, c in curves.items():
        n = len(c["positions"])
        for i in sorted({0, n // 2, n - 1}):
            cached, full = c["cached"][i], c["uncached"][i]
            lines.append(
                f"| {fw} | {c['positions'][i]} | {cached * 1e3:.0f} ms | {full * 1e3:.0f} ms | {full / cached:.1f}× |"
            )
    return lines


def memory_table(m: dict) -> list[str]:
    weights = sum(m["weights_mib"].values())
    inside = weights <= m["bound_mib"] and len(m["cached"]) == 2
    lines = [
        "Resident memory of one fresh process (`VmRSS` after `malloc_trim`, as the app trims after a run):",
        "",
        "| state | RSS | added |",
        "|---|---|---|",
    ]
    previous = None
    for key, value in m.items():
        if not isinstance(value, float):
            continue
        added = "" if previous is None else f"+{value - previous:.0f} MiB"
        lines.append(f"| {key} | {value:.0f} MiB | {added} |")
        previous = value
    lines += [
        "",
        f"Weights held by the checkpoint cache: {weights:.0f} MiB "
        f"({', '.join(f'{k} {v:.0f} MiB' for k, v in m['weights_mib'].items())}) against "
        f"`ATTNVIZ_CHECKPOINT_CACHE_MB` = {m['bound_mib']:.0f} MiB: "
        + (
            "both stay cached, inside the bound."
            if inside
            else f"NOT inside the bound (cached: {m['cached']})."
        ),
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--gen-repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="skip the time-per-token curves")
    parser.add_argument("--memory", action="store_true", help="(internal) measure memory in this process")
    args = parser.parse_args()
    if args.memory:
        print(json.dumps(memory(args.threads)))
        return
    child = subprocess.run([sys.executable, __file__, "--memory", "--threads", str(args.threads)],
                           capture_output=True, text=True, check=True, cwd=ROOT)  # fmt: skip
    mem = json.loads(child.stdout.strip().splitlines()[-1])
    results = measure(args.repeats, args.threads, args.gen_repeats, not args.quick)
    results["memory"] = mem
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2))
    text = table(results)
    print(text)
    write_section(DOC, text, START, END)


if __name__ == "__main__":
    main()
